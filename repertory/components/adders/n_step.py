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
at the episode's end). The shorter tail items at an episode end get their
(R, D) from extra writer steps that hold only those two values. Observations
are therefore sent once, though referenced by two items. Steps and items go
to Reverb's C++ writer (`reverb_lite.cpp_writer`) as flat lists, in a
column layout fixed by the first step the adder writes.
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


# Each item leaf's writer step (the item's first, last or value step) and
# the field of that step it reads.
_FIRST, _LAST, _VALUE = 0, 1, 2
_ITEM_FIELDS = {
    'observation': (_FIRST, 'observation'),
    'action': (_FIRST, 'action'),
    'reward': (_VALUE, 'n_step_return'),
    'discount': (_VALUE, 'total_discount'),
    'next_observation': (_LAST, 'observation'),
    'extras': (_FIRST, 'extras'),
    'policy_version': (_FIRST, 'policy_version'),
    'actor_id': (_FIRST, 'actor_id'),
}


class _Layout:
  """The writer's columns (a step's leaves in `tree.flatten` order, fixed by
  the first step) and, for each leaf of an item in `tree.flatten` order of
  the table signature, its (step, column)."""

  def __init__(self, step: dict):
    paths = [path for path, _ in tree.flatten_with_path(step)]
    self.num_columns = len(paths)
    self._tail_columns = [paths.index((k,)) for k in ('n_step_return',
                                                      'total_discount')]
    self.item = [(row, column)
                 for key in sorted(_ITEM_FIELDS)  # tree.flatten's order.
                 for row, field in [_ITEM_FIELDS[key]]
                 for column, path in enumerate(paths) if path[0] == field]
    self.squeeze = [True] * len(self.item)

  def flatten(self, step: dict) -> list:
    leaves = tree.flatten(step)
    if len(leaves) != self.num_columns:
      raise ValueError(f'{len(leaves)} leaves where the first step had '
                       f'{self.num_columns}')
    return leaves

  def flatten_tail(self, values: dict) -> list:
    """A tail step: only its (R, D) columns."""
    leaves = [None] * self.num_columns
    for column, key in zip(self._tail_columns,
                           ('n_step_return', 'total_discount')):
      leaves[column] = values[key]
    return leaves

  @staticmethod
  def item_values(first, last, value) -> dict:
    """The item's values (what a `priority_fn` sees) from its three steps'
    (values, references)."""
    steps = (first[0], last[0], value[0])
    return {key: steps[row][field]
            for key, (row, field) in _ITEM_FIELDS.items()}


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
    # (values, references) of this episode's newest writer steps (tail rows
    # included): items reach at most n + 1 steps back.
    self._rows = collections.deque(maxlen=n_step + 1)
    self._layout = None  # The step's columns, from the first step.
    self._shapes = (None, None)  # reward and discount shapes, once seen.

  def add_first(self, timestep: dm_env.TimeStep) -> None:
    if self._observation is not None:
      raise RuntimeError(
          'NStepTransitionAdder.add_first() called while an episode is in '
          'progress; call adder.reset() first to drop the unfinished episode.')
    self._observation = timestep.observation
    self._transitions.clear()
    self._steps = 0
    self._rows.clear()

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
    if self._layout is None:
      self._layout = _Layout(step)
    try:
      references = self._cpp_writer.Append(self._layout.flatten(step))
    except ValueError as e:
      raise ValueError(
          f'NStepTransitionAdder: this step does not match the earlier steps '
          f'({e}). Every step must have the same structure, shapes and dtypes '
          '(cast actions to the action spec dtype).') from e
    self._rows.append((step, references))
    self._steps += 1
    if full:
      # Item starting n observations back, bootstrapping from this one.
      self._write_item(first=-(self._n + 1), last=-1, value=-1)

  def _write_item(self, first: int, last: int, value: int) -> None:
    """Creates the item of rows `first` (o_t, a_t, extras), `last`
    (o_{t+m}) and `value` (R, D), counted back from the newest row."""
    rows = (self._rows[first], self._rows[last], self._rows[value])
    if self._priority_fn is None:
      priority = 1.0
    else:
      priority = float(self._priority_fn(self._layout.item_values(*rows)))
    columns = [[rows[row][1][column]] for row, column in self._layout.item]
    try:
      self._cpp_writer.CreateItem(self._table, priority, columns,
                                  self._layout.squeeze)
    except Exception as e:  # pylint: disable=broad-except
      raise base.item_error(self, e) from e
    self._num_items += 1
    self._flush(self._max_in_flight_items)

  def _write_tails(self) -> None:
    """Writes the items of the last starts, whose tails are shorter than n."""
    num_obs = self._steps  # includes the final observation o_T.
    transitions = list(self._transitions)
    # Starts not yet written: those with fewer than n transitions left.
    num_tails = min(self._n, num_obs) - 1
    for k in range(num_tails):
      tail = transitions[len(transitions) - num_tails + k:]
      ret, disc = self._return(tail)
      values = {'n_step_return': ret, 'total_discount': disc}
      self._rows.append(
          (values, self._cpp_writer.Append(self._layout.flatten_tail(values))))
      # o_t is len(tail) observations before o_T, which is k + 1 rows back.
      self._write_item(first=-(k + 2) - len(tail), last=-(k + 2), value=-1)

  def _reset_episode(self) -> None:
    self._observation = None
    self._transitions.clear()
    self._steps = 0
    self._rows.clear()
