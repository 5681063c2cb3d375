"""N-step transitions (Ape-X, DQN-style replay).

Each item is (o_t, a_t, R_t, D_t, o_{t+m}, extras_t) with m = n except at an
episode's end, where the last transitions have shorter tails m < n:

  R_t = sum_{k<m} gamma^k (prod_{j<k} d_{t+j}) r_{t+k}
  D_t = gamma^m prod_{j<m} d_{t+j}

(r_k, d_k: the reward and discount of the timestep after a_k). A learner's
target is `reward + discount * V(next_observation)`, with no further gamma.
A terminal step (discount 0) gives D = 0; a truncated one (LAST with discount
1) keeps D > 0 and hence the bootstrap (Horgan et al., 2018, Ape-X).

Writer layout: one writer step per environment step t holds o_t, a_t,
extras_t, the policy version and the (R, D) of the item that ends at o_t;
an item is created when the step after its next observation is added (or
at the episode's end). The shorter tail items at an episode end get their (R, D) from extra writer
steps that hold only those two values. Observations are therefore sent once,
though referenced by two items.
"""

import collections
from typing import TYPE_CHECKING, Optional

import dm_env
import numpy as np
import tree

if TYPE_CHECKING:  # The client may be a `reverb_lite.WriterClient` too.
  import reverb  # pylint: disable=g-import-not-at-top

from repertory import core
from repertory.components.adders import base


def n_step_transition_signature(environment_spec, extras_spec=()):
  """The table signature of `NStepTransitionAdder` items."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  env = base.as_environment_spec(environment_spec)
  return {
      'observation': base.nest_spec(env.observations),
      'action': base.nest_spec(env.actions),
      'reward': tf.TensorSpec(base.value_shape(env.rewards), tf.float32),
      'discount': tf.TensorSpec(base.value_shape(env.discounts), tf.float32),
      'next_observation': base.nest_spec(env.observations),
      'extras': base.nest_spec(extras_spec),
      'policy_version': tf.TensorSpec((), tf.int64),
      'actor_id': tf.TensorSpec((), tf.int32),
  }


class NStepTransitionAdder(base.ReverbAdder):
  """Writes n-step transitions, correct at episode ends.

  Example::

    adder = NStepTransitionAdder(client, n_step=3, discount=0.99,
                                 table='replay', actor_id=2)
    adder.add_first(timestep)
    adder.add(action, next_timestep, extras={'q_values': q})
  """

  signature = staticmethod(n_step_transition_signature)

  def __init__(self,
               client: 'reverb.Client',
               n_step: int,
               discount: float,
               table: str,
               priority_fn: Optional[base.PriorityFn] = None,
               actor_id: int = 0,
               max_in_flight_items: int = 16,
               flush_timeout_s: float = 30.0):
    """Creates the adder.

    Args:
      client: a `reverb.Client`.
      n_step: the number of rewards summed (>= 1).
      discount: gamma, in [0, 1].
      table: the table to insert into.
      priority_fn, actor_id, max_in_flight_items, flush_timeout_s: see
        `ReverbAdder`.
    """
    if n_step < 1:
      raise ValueError(f'n_step must be >= 1, got {n_step}.')
    if not 0.0 <= discount <= 1.0:
      raise ValueError(f'discount must be in [0, 1], got {discount}.')
    super().__init__(client, table, num_keep_alive_refs=2 * n_step + 2,
                     actor_id=actor_id, priority_fn=priority_fn,
                     max_in_flight_items=max_in_flight_items,
                     flush_timeout_s=flush_timeout_s)
    self._n = n_step
    self._gamma = float(discount)
    self._observation = None
    self._transitions = collections.deque(maxlen=n_step)  # (r, d) pairs.
    self._steps = 0  # observations appended this episode.
    self._zero_outputs = None
    self._rows = 0  # writer steps appended this episode (incl. tail rows).
    self._shapes = (None, None)  # reward and discount shapes, once seen.

  def add_first(self, timestep: dm_env.TimeStep) -> None:
    if self._observation is not None:
      raise RuntimeError(
          'NStepTransitionAdder.add_first() called while an episode is in '
          'progress; call adder.reset() first to drop the unfinished episode.')
    self._observation = timestep.observation
    self._transitions.clear()
    self._steps = 0
    self._rows = 0

  def _return(self, transitions):
    """(R, D) over a sequence of (reward, discount) pairs."""
    ret, disc = np.zeros(self._shapes[0]), np.ones(self._shapes[1])
    for r, d in transitions:
      ret = ret + disc * r
      disc = disc * self._gamma * d
    return ret.astype(base.REWARD_DTYPE), disc.astype(base.REWARD_DTYPE)

  def add(self,
          action: core.Nest,
          next_timestep: dm_env.TimeStep,
          extras: core.Nest = ()) -> None:
    if self._observation is None:
      raise base.not_started_error(self)
    outputs = {'action': action, 'extras': extras}
    if self._zero_outputs is None:
      self._zero_outputs = tree.map_structure(
          lambda x: np.zeros_like(np.asarray(x)), outputs)
    # Rewards and discounts follow the environment's specs (scalars or
    # arrays, e.g. one per player); their shapes are fixed by the first.
    reward = base.as_value(next_timestep.reward, 0.0, self._shapes[0],
                           'reward', type(self).__name__)
    discount = base.as_value(next_timestep.discount, 1.0, self._shapes[1],
                             'discount', type(self).__name__)
    if self._shapes[0] is None:
      self._shapes = (reward.shape, discount.shape)
    # Row for o_t: it closes the item that started n steps earlier.
    self._append_observation(self._observation, outputs)
    self._transitions.append((reward, discount))
    if next_timestep.last():
      self._append_observation(next_timestep.observation, self._zero_outputs)
      self._write_tails()
      # No writer.end_episode(): it blocks until the server confirms every
      # item (a round trip); items only reference this episode's rows anyway.
      self._observation = None
    else:
      self._observation = next_timestep.observation

  def _append_observation(self, observation, outputs) -> None:
    full = self._steps >= self._n
    ret, disc = (self._return(self._transitions) if full else
                 (np.zeros(self._shapes[0], base.REWARD_DTYPE),
                  np.zeros(self._shapes[1], base.REWARD_DTYPE)))
    step = dict(outputs)
    step['observation'] = observation
    step['policy_version'] = self._policy_version
    step['actor_id'] = self._actor_id
    step['n_step_return'] = ret
    step['total_discount'] = disc
    try:
      self._writer.append(step)
    except ValueError as e:
      raise ValueError(
          f'NStepTransitionAdder: this step does not match the earlier steps '
          f'({e}). Every step must have the same structure, shapes and dtypes '
          '(cast actions to the action spec dtype).') from e
    self._steps += 1
    self._rows += 1
    if full:
      # Item starting n observations back, bootstrapping from this one.
      self._create_item(self._transition(first=-(self._n + 1), last=-1,
                                         value=-1))

  def _transition(self, first: int, last: int, value: int):
    history = self._cached_history()
    return {
        'observation': tree.map_structure(lambda c: c[first],
                                          history['observation']),
        'action': tree.map_structure(lambda c: c[first], history['action']),
        'reward': history['n_step_return'][value],
        'discount': history['total_discount'][value],
        'next_observation': tree.map_structure(lambda c: c[last],
                                               history['observation']),
        'extras': tree.map_structure(lambda c: c[first],
                                     history.get('extras', ())),
        'policy_version': history['policy_version'][first],
        'actor_id': history['actor_id'][first],
    }

  def _write_tails(self) -> None:
    """Writes the items of the last starts, whose tails are shorter than n."""
    num_obs = self._steps  # includes the final observation o_T.
    last_obs_row = self._rows - 1
    transitions = list(self._transitions)
    # Starts not yet written: those with fewer than n transitions left.
    num_tails = min(self._n, num_obs) - 1
    for k in range(num_tails):
      tail = transitions[len(transitions) - num_tails + k:]
      start_row = (num_obs - 1) - len(tail)
      ret, disc = self._return(tail)
      self._writer.append({'n_step_return': ret, 'total_discount': disc})
      self._rows += 1
      self._create_item(self._transition(first=start_row - self._rows,
                                         last=last_obs_row - self._rows,
                                         value=-1))

  def _reset_episode(self) -> None:
    self._observation = None
    self._transitions.clear()
    self._steps = 0
    self._rows = 0
