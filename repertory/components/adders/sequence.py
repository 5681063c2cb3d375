"""Sequence adders: overlapping fixed-length sequences (R2D2, IMPALA-style).

Each environment step is one writer step (Acme's layout): the observation
o_t with its step type, the action a_t and extras e_t the actor produced on
it, and the reward and discount of the timestep that followed. At an
episode's LAST timestep a final step holds the last observation with zero
action, reward, discount and extras. An episode of n actions is therefore
L = n + 1 steps.

Sequences of `sequence_length` steps start at every multiple of `period`
(counted from the episode's first step, or from the adder's first step with
`EndBehavior.CONTINUE`). The recurrent state the actor passes as
`core_state=` is stored once per item: the item's `core_state` references
only its first step's state, and that column is chunked one step at a time,
so only referenced states are sent to the server (R2D2's stored state,
Kapturowski et al., 2019).
"""

import enum
from typing import TYPE_CHECKING, Optional

import dm_env
import numpy as np
import tree

if TYPE_CHECKING:  # The client may be a `reverb_lite.WriterClient` too.
  import reverb  # pylint: disable=g-import-not-at-top

from repertory import core
from repertory.components.adders import base


class EndBehavior(enum.Enum):
  """What a `SequenceAdder` does at the end of an episode (Acme's rules,
  `acme/adders/reverb/sequence.py`, checked against its test cases).

  Periodic items (every `period` steps once `sequence_length` steps are in)
  end at steps that hold an action; the episode's final step (the last
  observation) never triggers one, except with CONTINUE. At the end of an
  episode of L steps, let delta = sequence_length - L if L <= sequence_length,
  else the steps from L to the next periodic position, (-(L -
  sequence_length)) % period. Then:

  - WRITE: drop the episode if L < sequence_length; else write the last
    `sequence_length` steps (one item ending at the final step).
  - CONTINUE: no end-of-episode item; sequences continue into the next
    episode (step_type marks the boundary) and the final step is periodic
    like any other.
  - ZERO_PAD: append delta zero steps (padding: step_type LAST, zero reward
    and discount) and write the last `sequence_length` steps.
  - TRUNCATE: write the last `sequence_length - delta` steps.
  """
  WRITE = 'write'
  CONTINUE = 'continue'
  ZERO_PAD = 'zero_pad'
  TRUNCATE = 'truncate'


_FIRST = base.STEP_TYPE_DTYPE(dm_env.StepType.FIRST)
_MID = base.STEP_TYPE_DTYPE(dm_env.StepType.MID)
_LAST = base.STEP_TYPE_DTYPE(dm_env.StepType.LAST)


def _as_end_behavior(value) -> EndBehavior:
  if isinstance(value, EndBehavior):
    return value
  try:
    return EndBehavior(value)
  except ValueError:
    raise ValueError(
        f'Unknown end_of_episode_behavior {value!r}; choose one of '
        f'{[b.value for b in EndBehavior]} (or EndBehavior.*).') from None


def sequence_signature(environment_spec,
                       sequence_length: int,
                       extras_spec=(),
                       core_state_spec=None,
                       end_of_episode_behavior=EndBehavior.ZERO_PAD):
  """The table signature of `SequenceAdder` items.

  The time dimension is `sequence_length` for ZERO_PAD and CONTINUE (all
  items are full length) and None for WRITE and TRUNCATE (items may be
  shorter at episode ends).
  """
  behavior = _as_end_behavior(end_of_episode_behavior)
  fixed = behavior in (EndBehavior.ZERO_PAD, EndBehavior.CONTINUE)
  return base.step_signature(
      environment_spec, extras_spec, core_state_spec,
      time_prefix=(sequence_length if fixed else None,))


class StepAdder(base.ReverbAdder):
  """Shared step layout of `SequenceAdder` and `EpisodeAdder`."""

  def __init__(self, client, table, num_keep_alive_refs, actor_id,
               priority_fn, max_in_flight_items, flush_timeout_s):
    super().__init__(client, table, num_keep_alive_refs, actor_id=actor_id,
                     priority_fn=priority_fn,
                     max_in_flight_items=max_in_flight_items,
                     flush_timeout_s=flush_timeout_s)
    self._keep_alive = num_keep_alive_refs
    self._observation = None  # o_t waiting for its action.
    self._step_type = _FIRST
    self._zero_step = None  # zeros shaped like a step's actor outputs.
    self._has_state = None
    self._episode_steps = 0  # steps appended in this episode.
    self._stream_steps = 0   # steps appended since the buffers were cleared.

  def add_first(self, timestep: dm_env.TimeStep) -> None:
    if self._observation is not None:
      raise RuntimeError(
          f'{type(self).__name__}.add_first() called while an episode is in '
          'progress; call adder.reset() first to drop the unfinished episode.')
    self._observation = timestep.observation
    self._step_type = _FIRST
    self._episode_steps = 0

  def add(self,
          action: core.Nest,
          next_timestep: dm_env.TimeStep,
          extras: core.Nest = (),
          core_state: Optional[core.Nest] = None) -> None:
    """Records a_t (with extras and the state used) and the next timestep.

    Args:
      action: the action taken on the previous observation.
      next_timestep: the timestep it led to.
      extras: the actor's other outputs on the previous observation (e.g.
        {'logits': ..., 'log_prob': ...}); the same structure every step.
      core_state: the recurrent state the policy used on the previous
        observation; stored at the first step of each item.
    """
    if self._observation is None:
      raise base.not_started_error(self)
    outputs = {'action': action, 'extras': extras}
    if core_state is not None:
      outputs['core_state'] = core_state
    if self._has_state is None:
      self._first_add(outputs)
    elif (core_state is not None) != self._has_state:
      raise ValueError(
          f'{type(self).__name__}: core_state must be given with every add() '
          'or never (it was ' + ('given' if self._has_state else 'not given') +
          ' before).')
    self._append(self._observation, self._step_type, outputs,
                 next_timestep.reward, next_timestep.discount)
    if next_timestep.last():
      self._append(next_timestep.observation, _LAST, self._zero_step, 0.0, 0.0)
      self._end_episode()
      self._observation = None
    else:
      self._observation = next_timestep.observation
      self._step_type = _MID

  def _first_add(self, outputs) -> None:
    self._has_state = 'core_state' in outputs
    self._zero_step = tree.map_structure(
        lambda x: np.zeros_like(np.asarray(x)), outputs)
    if self._has_state:
      for path, _ in tree.flatten_with_path(outputs['core_state']):
        self._writer.configure(('core_state',) + tuple(path),
                               num_keep_alive_refs=self._keep_alive,
                               max_chunk_length=1)

  def _append(self, observation, step_type, outputs, reward, discount) -> None:
    step = dict(outputs)
    step['observation'] = observation
    step['step_type'] = step_type
    step['reward'] = self._value(reward, 0.0, 'reward')
    step['discount'] = self._value(discount, 1.0, 'discount')
    step['policy_version'] = self._policy_version
    step['actor_id'] = self._actor_id
    try:
      self._writer.append(step)
    except ValueError as e:
      raise ValueError(
          f'{type(self).__name__}: this step does not match the earlier steps '
          f'({e}). Every step must have the same structure, shapes and dtypes '
          '(cast actions to the action spec dtype).') from e
    self._episode_steps += 1
    self._stream_steps += 1
    self._on_step_appended(step_type)

  def _on_step_appended(self, step_type) -> None:
    pass

  def _value(self, value, default: float, what: str) -> np.ndarray:
    """A reward or discount in the shape of the environment's spec (that of
    the first one seen); the adders' own padding (a Python 0.0) fills it."""
    shapes = self.__dict__.setdefault('_value_shapes', {})
    if type(value) is float and shapes.get(what):  # pylint: disable=unidiomatic-typecheck
      value = np.full(shapes[what], value)
    array = base.as_value(value, default, shapes.get(what), what,
                          type(self).__name__)
    shapes.setdefault(what, array.shape)
    return array

  def _item(self, length: int):
    """An item over the last `length` steps (state etc. from the first)."""
    history = self._cached_history()
    trajectory = {
        'observation': tree.map_structure(lambda c: c[-length:],
                                          history['observation']),
        'action': tree.map_structure(lambda c: c[-length:], history['action']),
        'reward': history['reward'][-length:],
        'discount': history['discount'][-length:],
        'step_type': history['step_type'][-length:],
        'extras': tree.map_structure(lambda c: c[-length:],
                                     history.get('extras', ())),
        'policy_version': history['policy_version'][-length],
        'actor_id': history['actor_id'][-length],
    }
    if self._has_state:
      trajectory['core_state'] = tree.map_structure(lambda c: c[-length],
                                                    history['core_state'])
    return trajectory

  def _end_episode(self) -> None:
    raise NotImplementedError

  def _reset_episode(self) -> None:
    self._observation = None
    self._episode_steps = 0
    self._stream_steps = 0


class SequenceAdder(StepAdder):
  """Writes overlapping sequences of `sequence_length` steps every `period`.

  Example (R2D2: 80-step sequences, overlapping by 40)::

    adder = SequenceAdder(client, 'replay', sequence_length=80, period=40,
                          actor_id=3)
    adder.add_first(timestep)
    ...
    adder.set_policy_version(variable_client.version)
    adder.add(action, next_timestep, extras={'q_values': q},
              core_state=state_used_for_this_action)
  """

  signature = staticmethod(sequence_signature)

  def __init__(self,
               client: 'reverb.Client',
               table: str,
               sequence_length: int,
               period: int,
               end_of_episode_behavior=EndBehavior.ZERO_PAD,
               actor_id: int = 0,
               priority_fn: Optional[base.PriorityFn] = None,
               max_in_flight_items: int = 4,
               flush_timeout_s: float = 30.0):
    """Creates the adder.

    Args:
      client: a `reverb.Client`.
      table: the table to insert into.
      sequence_length: steps per item.
      period: steps between the starts of consecutive items (<=
        sequence_length overlaps them by sequence_length - period).
      end_of_episode_behavior: an `EndBehavior` (or its value string).
      actor_id, priority_fn, max_in_flight_items, flush_timeout_s: see
        `ReverbAdder`.
    """
    if sequence_length < 1:
      raise ValueError(f'sequence_length must be >= 1, got {sequence_length}.')
    if period < 1:
      raise ValueError(f'period must be >= 1, got {period}.')
    self._behavior = _as_end_behavior(end_of_episode_behavior)
    super().__init__(client, table, sequence_length + 1, actor_id,
                     priority_fn, max_in_flight_items, flush_timeout_s)
    self._sequence_length = sequence_length
    self._period = period
    self._padding = False

  def _on_step_appended(self, step_type) -> None:
    if self._padding or (step_type == _LAST and
                         self._behavior is not EndBehavior.CONTINUE):
      return  # The final step's item is `_end_episode`'s.
    n = self._stream_steps
    length = self._sequence_length
    if n >= length and (n - length) % self._period == 0:
      self._create_item(self._item(length))

  def _end_episode(self) -> None:
    if self._behavior is EndBehavior.CONTINUE:
      return
    steps, length = self._episode_steps, self._sequence_length
    if steps <= length:
      delta = length - steps
    else:
      delta = (-(steps - length)) % self._period
    if self._behavior is EndBehavior.WRITE:
      if steps >= length:  # A shorter episode is dropped.
        self._create_item(self._item(length))
    elif self._behavior is EndBehavior.TRUNCATE:
      self._create_item(self._item(length - delta))
    else:  # ZERO_PAD
      self._padding = True
      try:
        for _ in range(delta):
          self._append(self._zero_observation(), _LAST, self._zero_step,
                       0.0, 0.0)
      finally:
        self._padding = False
      self._create_item(self._item(length))
    # No writer.end_episode(): it blocks until the server confirms every item
    # (a round trip); items only reference this episode's steps anyway.
    self._stream_steps = 0

  def _zero_observation(self):
    return tree.map_structure(lambda c: np.zeros_like(c[-1].numpy()),
                              self._cached_history()['observation'])
