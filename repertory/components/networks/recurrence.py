"""An LSTM core and time-major unrolls with episode resets and burn-in.

Recurrent modules in this package share one interface:

  initial_state(batch_size)          -> state nest, leaves [B, ...]
  __call__(inputs [B, ...], state)   -> (outputs [B, ...], next state)
  unroll(inputs [T, B, ...], state, reset=None)
                                     -> (outputs [T, B, ...], final state)

`reset[t, b]` (bool, optional) marks step t as the first step of a new
episode in sequence b: the state is zeroed just before that step, so an
unroll that crosses an episode boundary is computed as two episodes.
"""

from typing import Any, Callable, Optional, Tuple

import sonnet as snt
import tensorflow as tf

State = Any  # A nest of [B, ...] tensors.
StepFn = Callable[[Any, State], Tuple[Any, State]]
UnrollFn = Callable[..., Tuple[Any, State]]


def _reset_state(state: State, reset_t: tf.Tensor) -> State:
  """Zeroes the state of the batch entries where `reset_t` ([B] bool) holds."""

  def reset_leaf(leaf):
    mask = tf.reshape(tf.cast(reset_t, tf.bool),
                      [-1] + [1] * (leaf.shape.rank - 1))
    return tf.where(mask, tf.zeros_like(leaf), leaf)

  return tf.nest.map_structure(reset_leaf, state)


def _while_unroll(step_fn: StepFn, inputs: Any, state: State,
                  reset: Optional[tf.Tensor]) -> Tuple[Any, State]:
  """Unroll with `tf.while_loop` when T is only known at run time (T >= 1).

  Step 0 runs outside the loop to learn the output structure; autograph is
  kept out of the step (converting Sonnet modules makes tracing very slow).
  """
  num_steps = tf.shape(tf.nest.flatten(inputs)[0])[0]

  def step(t, state):
    x_t = tf.nest.map_structure(lambda x: x[t], inputs)
    if reset is not None:
      state = _reset_state(state, reset[t])
    return step_fn(x_t, state)

  out_0, state = step(0, state)
  arrays = tf.nest.map_structure(
      lambda o: tf.TensorArray(o.dtype, size=num_steps,
                               element_shape=o.shape).write(0, o), out_0)

  def body(t, arrays, state):
    out_t, state = step(t, state)
    arrays = tf.nest.map_structure(lambda ta, o: ta.write(t, o), arrays,
                                   out_t)
    return t + 1, arrays, state

  _, arrays, state = tf.while_loop(
      lambda t, *_: t < num_steps,
      tf.autograph.experimental.do_not_convert(body),
      (tf.constant(1), arrays, state))
  return tf.nest.map_structure(lambda ta: ta.stack(), arrays), state


# Plain Python over a static T; autograph conversion only slows tracing.
@tf.autograph.experimental.do_not_convert
def unroll_step_fn(step_fn: StepFn,
                   inputs: Any,
                   state: State,
                   reset: Optional[tf.Tensor] = None) -> Tuple[Any, State]:
  """Runs `step_fn` over the leading time axis of `inputs`.

  A Python loop when T is known when tracing (fast for the short unrolls of
  IMPALA/R2D2 inside `tf.function`), a `tf.while_loop` otherwise.

  Args:
    step_fn: `(inputs_t [B, ...], state) -> (outputs_t [B, ...], state)`.
    inputs: nest of `[T, B, ...]` tensors.
    state: nest of `[B, ...]` tensors, the state before step 0.
    reset: optional `[T, B]` bool; True zeroes the state before that step.

  Returns:
    (outputs, final_state) with outputs a nest of `[T, B, ...]` tensors.
  """
  leaves = tf.nest.flatten(inputs)
  if not leaves:
    raise ValueError('unroll: inputs is empty.')
  first = tf.convert_to_tensor(leaves[0])
  if first.shape.rank is None or first.shape.rank < 2:
    raise ValueError(
        f'unroll: inputs must be time-major [T, B, ...], got shape '
        f'{first.shape}.')
  if reset is not None:
    reset = tf.cast(reset, tf.bool)
    if not reset.shape.is_compatible_with(first.shape[:2]):
      raise ValueError(
          f'unroll: reset has shape {reset.shape.as_list()}, expected [T, B] '
          f'= {first.shape[:2].as_list()} (the inputs\' leading dims).')
  num_steps = first.shape[0]
  if num_steps is None:
    return _while_unroll(step_fn, inputs, state, reset)
  outputs = []
  for t in range(num_steps):
    x_t = tf.nest.map_structure(lambda x: x[t], inputs)  # pylint: disable=cell-var-from-loop
    if reset is not None:
      state = _reset_state(state, reset[t])
    out_t, state = step_fn(x_t, state)
    outputs.append(out_t)
  stacked = tf.nest.map_structure(lambda *xs: tf.stack(xs), *outputs)
  return stacked, state


class LSTMCore(snt.Module):
  """An LSTM (Hochreiter & Schmidhuber 1997) with single-step and unroll APIs.

  Wraps `snt.LSTM`; the state is `snt.LSTMState(hidden, cell)`, zeros at the
  start of an episode.
  """

  def __init__(self, hidden_size: int, name: Optional[str] = None):
    super().__init__(name=name)
    self._lstm = snt.LSTM(hidden_size)
    self.hidden_size = hidden_size

  def initial_state(self, batch_size: int) -> snt.LSTMState:
    """Zero state for `batch_size` sequences; leaves `[B, hidden_size]`."""
    return self._lstm.initial_state(batch_size)

  def __call__(self, inputs: tf.Tensor,
               state: snt.LSTMState) -> Tuple[tf.Tensor, snt.LSTMState]:
    """One step: inputs `[B, D]` -> (outputs `[B, hidden]`, next state)."""
    return self._lstm(tf.cast(inputs, tf.float32), state)

  def unroll(self, inputs: tf.Tensor, state: snt.LSTMState,
             reset: Optional[tf.Tensor] = None
             ) -> Tuple[tf.Tensor, snt.LSTMState]:
    """Unroll over `[T, B, D]` -> (outputs `[T, B, hidden]`, final state)."""
    return unroll_step_fn(self.__call__, inputs, state, reset)


def burn_in_unroll(unroll_fn: UnrollFn,
                   inputs: Any,
                   state: State,
                   burn_in: int,
                   reset: Optional[tf.Tensor] = None) -> Tuple[Any, State]:
  """Unrolls with a burn-in prefix that only refreshes the recurrent state.

  Kapturowski et al. 2019 ("Recurrent Experience Replay in Distributed
  Reinforcement Learning", section 3): the first `burn_in` steps of a replayed
  sequence are unrolled to rebuild the state from the stored one; no gradient
  flows through them (the state after burn-in is a constant), and their
  outputs are dropped.

  Args:
    unroll_fn: a network's `unroll(inputs, state, reset)`.
    inputs: nest of `[T, B, ...]` tensors, burn-in steps first.
    state: the stored state before step 0.
    burn_in: number of leading steps to burn in, 0 <= burn_in < T.
    reset: optional `[T, B]` bool episode-start flags.

  Returns:
    (outputs for steps burn_in..T-1, i.e. `[T - burn_in, B, ...]`, final
    state).
  """
  first = tf.nest.flatten(inputs)[0]
  num_steps = first.shape[0]
  if burn_in < 0 or (num_steps is not None and burn_in >= num_steps):
    raise ValueError(
        f'burn_in_unroll: burn_in must be in [0, T) with T = {num_steps}, got '
        f'{burn_in}.')
  if burn_in == 0:
    return unroll_fn(inputs, state, reset)
  head = tf.nest.map_structure(lambda x: x[:burn_in], inputs)
  tail = tf.nest.map_structure(lambda x: x[burn_in:], inputs)
  reset_head = None if reset is None else reset[:burn_in]
  reset_tail = None if reset is None else reset[burn_in:]
  _, state = unroll_fn(tf.nest.map_structure(tf.stop_gradient, head),
                       state, reset_head)
  state = tf.nest.map_structure(tf.stop_gradient, state)
  return unroll_fn(tail, state, reset_tail)
