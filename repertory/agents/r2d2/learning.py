"""R2D2 learner: stored-state burn-in, transformed n-step double Q-learning
over the trace, importance weights, mixed max/mean sequence priorities
written back asynchronously, periodic target copies (Kapturowski et al.
2019, sections 2-3)."""

import functools
from typing import Any, Callable

import dm_env
import sonnet as snt
import tensorflow as tf

from repertory.agents.r2d2 import networks as r2d2_networks
from repertory.agents.prioritized_replay import learning as prioritized
from repertory.components import losses
from repertory.components import networks as networks_lib

_FIRST = int(dm_env.StepType.FIRST)
_LAST = int(dm_env.StepType.LAST)


def _time_major(x: tf.Tensor) -> tf.Tensor:
  """`[B, T, ...]` -> `[T, B, ...]`."""
  perm = [1, 0] + list(range(2, x.shape.rank))
  return tf.transpose(x, perm)


def _shift(x: tf.Tensor, i: int, pad: float) -> tf.Tensor:
  """`x[s + i]` along time, `pad` past the end."""
  if i == 0:
    return x
  return tf.concat([x[i:], tf.fill(tf.shape(x[:i]), tf.cast(pad, x.dtype))],
                   axis=0)


def episode_n_step_returns(r_t: tf.Tensor, discount_t: tf.Tensor,
                           v_t: tf.Tensor, end_t: tf.Tensor,
                           n: int) -> tf.Tensor:
  """n-step returns that stop at episode ends and at the end of the trace.

    G_s = sum_{k<m} Gamma_{s,k} r_{s+k} + Gamma_{s,m} v_t[s+m-1],
    m = min(n, T - s, 1 + steps from s to the first end at or after s)

  where Gamma_{s,k} is the product of the k discounts from s. At an episode
  end (x_{s+m} is a LAST observation) the return bootstraps from the value
  of that last observation: a truncation (discount 1) keeps gamma^m V(x_T),
  a termination (discount 0) drops it. The window never runs into the next
  episode, which the sequence continues with (`EndBehavior.CONTINUE`).

  Args:
    r_t: `[T, B]` rewards r_s.
    discount_t: `[T, B]` discounts of x_{s+1} (already times gamma).
    v_t: `[T, B]` value of x_{s+1}.
    end_t: `[T, B]` bool, x_{s+1} is the LAST observation of its episode.
    n: number of steps, >= 1.

  Returns:
    `[T, B]` returns G_s.
  """
  num_steps = r_t.shape[0]
  if int(n) != n or n < 1:
    raise ValueError(f'episode_n_step_returns: n must be an int >= 1, got '
                     f'{n!r}.')
  n = min(int(n), num_steps)
  # The trace's last transition always bootstraps.
  stop_t = tf.concat([end_t[:-1], tf.ones_like(end_t[-1:])], axis=0)
  returns = _shift(v_t, n - 1, 0.0)
  for i in reversed(range(n)):
    v_i = _shift(v_t, i, 0.0)
    continuation = tf.where(_shift(stop_t, i, True), v_i, returns)
    returns = _shift(r_t, i, 0.0) + _shift(discount_t, i, 1.0) * continuation
  return returns


def n_step_double_q_td(q_tm1: tf.Tensor, a_tm1: tf.Tensor, r_t: tf.Tensor,
                       discount_t: tf.Tensor, target_q_t: tf.Tensor,
                       selector_q_t: tf.Tensor, end_t: tf.Tensor, n: int,
                       transform: Any) -> losses.TDOutput:
  """R2D2's transformed n-step double-Q TD errors on a sequence that runs on
  across episodes (Kapturowski et al. 2019, section 2):

    v_s = h^-1(Q_target(x_{s+1}, argmax_a Q_online(x_{s+1}, a)))
    y_s = h(G_s)  (`episode_n_step_returns` over v)
    delta_s = y_s - Q_online(x_s, a_s)

  Shapes as in `repertory.components.losses.n_step_q`, plus `end_t` `[T, B]`
  (x_{s+1} is LAST).
  """
  a_star = tf.argmax(selector_q_t, axis=-1, output_type=tf.int32)
  v_t = transform.apply_inverse(
      tf.gather(target_q_t, a_star, axis=-1, batch_dims=2))
  returns = episode_n_step_returns(r_t, discount_t, v_t, end_t, n)
  target = tf.stop_gradient(transform.apply(returns))
  q_a = tf.gather(q_tm1, tf.cast(a_tm1, tf.int32), axis=-1, batch_dims=2)
  td_error = target - q_a
  return losses.TDOutput(loss=0.5 * tf.square(td_error), td_error=td_error,
                         target=target)


class R2D2Learner(prioritized.PrioritizedReplay):
  """Samples prioritized sequences; serves its weights as 'policy'.

  Arguments as `PrioritizedReplay`'s; the weights are published every
  `config.learner_steps_per_publish` steps.
  """

  def __init__(self, config: Any, spec: Any,
               make_network: Callable[[Any, Any], Any], replay_client: Any,
               table: str, seed: int = 0):
    if config.use_value_rescaling:
      self._transform = losses.signed_hyperbolic_transform(
          config.value_rescaling_eps)
    else:
      self._transform = losses.IDENTITY_TRANSFORM
    super().__init__(config, spec, make_network, replay_client, table,
                     seed=seed,
                     publish_period=config.learner_steps_per_publish)

  def _start_state(self, data) -> snt.LSTMState:
    stored = data['core_state']
    state = snt.LSTMState(hidden=stored['hidden'], cell=stored['cell'])
    if not self._config.use_stored_state:
      state = tf.nest.map_structure(tf.zeros_like, state)
    return state

  # No data-dependent Python control flow: autograph would only add
  # (a lot of) tracing time.
  @tf.function(autograph=False)
  def _sgd_step(self, sample):
    config = self._config
    data, info = sample.data, sample.info
    burn_in = config.effective_burn_in
    oar = tf.nest.map_structure(_time_major, data['observation'])  # [L, B]
    action = _time_major(data['action'])[burn_in:]  # [T+1, B]
    reward = _time_major(data['reward'])[burn_in:]
    discount = _time_major(data['discount'])[burn_in:] * config.discount
    step_type = _time_major(data['step_type'])  # [L, B]
    # Sequences run on across episodes: the state is zeroed at each FIRST
    # step, and the final step of an episode (LAST, no action) is no x_s.
    reset = tf.equal(step_type, _FIRST)
    valid = tf.cast(tf.not_equal(step_type[burn_in:-1], _LAST),
                    tf.float32)  # [T, B]
    # n-step windows stop at x_{s+1} = LAST and bootstrap from its value
    # (discount 1 at a truncation, 0 at a termination).
    end = tf.equal(step_type[burn_in + 1:], _LAST)  # [T, B]
    state = self._start_state(data)
    weights = losses.importance_sampling_weights(
        info.probability, info.table_size,
        config.importance_sampling_exponent)  # [B]
    # The target network: burn-in and trace, no gradient at all.
    target_q, _ = networks_lib.burn_in_unroll(
        self._target.unroll, oar, state, burn_in, reset)  # [T+1, B, A]
    with tf.GradientTape() as tape:
      # Burn-in without gradient, then the trace with gradient.
      online_q, _ = networks_lib.burn_in_unroll(
          self._online.unroll, oar, state, burn_in, reset)  # [T+1, B, A]
      td = n_step_double_q_td(
          q_tm1=online_q[:-1], a_tm1=action[:-1], r_t=reward[:-1],
          discount_t=discount[:-1], target_q_t=target_q[1:],
          selector_q_t=tf.stop_gradient(online_q[1:]), end_t=end,
          n=config.n_step, transform=self._transform)
      per_sequence = tf.reduce_sum(valid * td.loss, axis=0) / tf.maximum(
          tf.reduce_sum(valid, axis=0), 1.0)  # [B]
      loss = tf.reduce_mean(weights * per_sequence)
    priorities = losses.r2d2_priority(valid * td.td_error,
                                      config.priority_eta) + 1e-6  # [B]
    return self._apply(tape, loss, online_q, priorities, sample)


make_learner = functools.partial(prioritized.make_learner, R2D2Learner,
                                 r2d2_networks.make_network)
