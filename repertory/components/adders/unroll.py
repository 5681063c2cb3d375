"""A batched unroll writer for on-policy agents (IMPALA, SEED RL, PPO).

The actor steps N environments per policy call (auto-resetting: after an
environment's LAST step its next step is a FIRST step). `UnrollAdder` copies
each batched step into preallocated numpy arrays and, every `unroll_length`
steps, writes each environment's unroll of `unroll_length + 1` steps as ONE
Reverb step (one `writer.append` and one item per environment per unroll),
whose columns have a leading time dimension [T + 1, ...]; with
`batched_items=True` it writes the N unrolls as one step and one item whose
columns are [N, T + 1, ...] (every field, `policy_version` and `actor_id`
too: [N]), which costs Reverb about one item's work instead of N (small
observations: most of an item's cost is per chunk, not per byte; the
learner splits such items, `replay.make_dataset(unbatch_items=True)`).
Consecutive unrolls
overlap by one step (the last step of an unroll is the first of the next) and
run across episode boundaries, as in IMPALA (Espeholt et al., 2018) and
SEED RL (Espeholt et al., 2020).

Layout of an item (SEED RL layout): at time index t,

- `observation[t]`, `step_type[t]`, `reward[t]`, `discount[t]`: the timestep
  received at t (its reward and discount came with it: they belong to the
  transition t-1 -> t);
- `action[t]`, `extras[t]`: what the actor did on `observation[t]`. The
  actor's output at the last index T is not known when the unroll is written:
  it is zeros there (it is recorded at index 0 of the next unroll);
- `core_state`: the recurrent state the policy used at index 0 (once per item);
- `policy_version`: the version set with `set_policy_version` when the action
  at index 0 was added; `actor_id`: the constructor argument.

The transition t -> t+1 (action[t], reward[t+1], discount[t+1]) is a real
transition unless `step_type[t+1] == FIRST` (an auto-reset boundary: the
learner must mask it out, e.g. `mask = step_type[1:] != 0`).
"""

from typing import TYPE_CHECKING, Any, List, Optional

import dm_env
import numpy as np
import tree

if TYPE_CHECKING:  # The client may be a `reverb_lite.WriterClient` too.
  import reverb  # pylint: disable=g-import-not-at-top

from repertory import core
from repertory.components.adders import base
from repertory.components.adders.unroll_layout import unroll_signature


# Placeholders in `_step_sources` for the fields that are one value per item.
_POLICY_VERSION = object()
_ACTOR_ID = object()


def _as_flat(nest) -> List[Any]:
  if isinstance(nest, np.ndarray):
    return [nest]
  return tree.flatten(nest)


class UnrollAdder(base.ReverbAdder):
  """Writes overlapping [T + 1] unrolls of N batched environments.

  Example::

    adder = UnrollAdder(client, 'queue', unroll_length=20, num_envs=8,
                        actor_id=3)
    timestep = batched_env.reset()                # arrays with leading [N]
    adder.add_first(timestep)
    while True:
      adder.set_policy_version(variable_client.version)
      actions, logits = policy(timestep.observation)
      timestep = batched_env.step(actions)
      adder.add(actions, timestep, extras={'logits': logits})
  """

  signature = staticmethod(unroll_signature)

  def __init__(self,
               client: 'reverb.Client',
               table: str,
               unroll_length: int,
               num_envs: int,
               actor_id: int = 0,
               environment_spec=None,
               extras_spec=None,
               core_state_spec=None,
               priority_fn: Optional[base.PriorityFn] = None,
               max_in_flight_items: Optional[int] = None,
               flush_timeout_s: float = 30.0,
               batched_items: bool = False):
    """Creates the adder.

    Args:
      client: a `reverb.Client`.
      table: the table (typically a queue) to write to.
      unroll_length: T; every T steps one item of T + 1 steps per env.
      num_envs: N, the batch size of the timesteps given to `add`.
      actor_id: stored in every item.
      environment_spec: optional spec of ONE environment; when given, the
        buffers take its dtypes (actions are cast on copy), otherwise dtypes
        are those of the first data seen.
      extras_spec: optional spec of one env's extras (same role).
      core_state_spec: optional spec of one env's recurrent state.
      priority_fn: see `ReverbAdder`.
      max_in_flight_items: pending items before `add` blocks (default: one
        unroll of every environment, N items, or 1 with `batched_items`).
      flush_timeout_s: see `ReverbAdder`.
      batched_items: write each unroll of the N environments as one item
        [N, T + 1, ...] (table signature: `unroll_signature(...,
        envs_per_item=N)`) instead of N items [T + 1, ...].
    """
    if unroll_length < 1:
      raise ValueError(f'unroll_length must be >= 1, got {unroll_length}.')
    if num_envs < 1:
      raise ValueError(f'num_envs must be >= 1, got {num_envs}.')
    if batched_items and priority_fn is not None:
      raise ValueError('UnrollAdder(batched_items=True) writes N unrolls as '
                       'one item with one priority: priority_fn must be None.')
    default_in_flight = 1 if batched_items else num_envs
    super().__init__(client, table, num_keep_alive_refs=1, actor_id=actor_id,
                     priority_fn=priority_fn,
                     max_in_flight_items=(max_in_flight_items or
                                          default_in_flight),
                     flush_timeout_s=flush_timeout_s)
    self._batched_items = batched_items
    self._T = unroll_length
    self._N = num_envs
    self._shape = (num_envs, unroll_length + 1)
    self._env_spec = (base.as_environment_spec(environment_spec)
                      if environment_spec is not None else None)
    self._extras_spec = extras_spec
    self._core_state_spec = core_state_spec
    self._t = -1  # -1: add_first not called yet.
    self._obs = None
    self._actions = None
    self._extras = None
    self._state0 = None
    self._version0 = base.VERSION_DTYPE(0)
    # Rewards and discounts take the environment's specs (default scalars).
    self._value_shapes = (
        base.value_shape(self._env_spec.rewards if self._env_spec else None),
        base.value_shape(self._env_spec.discounts if self._env_spec else None))
    self._reward = np.zeros(self._shape + self._value_shapes[0],
                            base.REWARD_DTYPE)
    self._discount = np.zeros(self._shape + self._value_shapes[1],
                              base.REWARD_DTYPE)
    self._step_type = np.zeros(self._shape, base.STEP_TYPE_DTYPE)
    # One reward and discount per environment, as batched environments give.
    self._reward_shape = (num_envs,) + self._value_shapes[0]
    self._discount_shape = (num_envs,) + self._value_shapes[1]
    self._flat_sources = None  # `_step_sources()`, flattened.

  # --- buffers --------------------------------------------------------------

  def _alloc(self, spec, example, prefix):
    """Preallocates zeros [prefix..., ...] from a spec or example batch."""
    if spec is not None:
      return base.zeros_like_spec(spec, prefix)
    return tree.map_structure(
        lambda x: np.zeros(prefix + np.shape(x)[1:], np.asarray(x).dtype),
        example)

  def _check_batch(self, name, value):
    n = np.shape(value)[0] if np.ndim(value) else None
    if n != self._N:
      raise ValueError(
          f'UnrollAdder(num_envs={self._N}): {name} has leading dimension '
          f'{n}, expected {self._N} (one entry per environment; shape '
          f'{np.shape(value)}).')

  def _put_timestep(self, t: int, timestep: dm_env.TimeStep) -> None:
    self._step_type[:, t] = timestep.step_type
    reward, discount = timestep.reward, timestep.discount
    if (getattr(reward, 'shape', None) != self._reward_shape or
        getattr(discount, 'shape', None) != self._discount_shape):
      reward, discount = self._checked_values(reward, discount)
    self._reward[:, t] = reward
    self._discount[:, t] = discount
    obs = timestep.observation
    if isinstance(obs, np.ndarray):
      self._obs_flat[0][:, t] = obs
    else:
      for buf, x in zip(self._obs_flat, tree.flatten(obs)):
        buf[:, t] = x

  def _checked_values(self, reward, discount):
    """(reward, discount) to store when either is not one array per
    environment: None as the default (0 and 1), or one value for every
    environment; any other shape is an error."""
    values = []
    for value, default, what, shape in (
        (reward, 0.0, 'reward', self._value_shapes[0]),
        (discount, 1.0, 'discount', self._value_shapes[1])):
      if value is None:
        value = default
      elif np.shape(value) not in ((self._N,) + shape, shape):
        raise ValueError(
            f'UnrollAdder(num_envs={self._N}): a {what} of shape '
            f'{np.shape(value)}, expected {(self._N,) + shape} (the '
            f'environment\'s {what}_spec {shape} for each of the {self._N} '
            'environments); pass environment_spec= for non-scalar '
            f'{what}s.')
      values.append(value)
    return values

  # --- adder API ------------------------------------------------------------

  def add_first(self, timestep: dm_env.TimeStep) -> None:
    """Starts the unrolls with a batched timestep (after `batch.reset()`).

    Called again, it drops the unroll in progress and starts afresh; with
    auto-resetting batches it is needed only once.
    """
    self._check_batch('timestep.step_type', timestep.step_type)
    if self._obs is None:
      obs_spec = self._env_spec.observations if self._env_spec else None
      self._obs = self._alloc(obs_spec, timestep.observation, self._shape)
      self._obs_flat = _as_flat(self._obs)
    self._put_timestep(0, timestep)
    self._t = 0

  def add(self,
          action: core.Nest,
          next_timestep: dm_env.TimeStep,
          extras: core.Nest = (),
          core_state: Optional[core.Nest] = None) -> None:
    """Records the batched actions and the batched timestep they led to.

    Args:
      action: actions [N, ...] taken on the previous timestep.
      next_timestep: the batched timestep that followed.
      extras: nest of [N, ...] arrays of the actor's outputs for the previous
        timestep (e.g. {'logits': [N, A]}).
      core_state: nest of [N, ...] recurrent states the policy used for the
        previous timestep; stored once per unroll (at index 0).
    """
    t = self._t
    if t < 0:
      raise base.not_started_error(self)
    if self._actions is None:
      self._first_add(action, extras, core_state)
    if isinstance(action, np.ndarray) or not isinstance(action, (dict, list,
                                                                 tuple)):
      self._actions_flat[0][:, t] = action
    else:
      for buf, x in zip(self._actions_flat, tree.flatten(action)):
        buf[:, t] = x
    if self._extras_flat:
      for buf, x in zip(self._extras_flat, tree.flatten(extras)):
        buf[:, t] = x
    if t == 0:
      self._version0 = self._policy_version
      if self._state0 is not None:
        if core_state is None:
          raise ValueError(
              'UnrollAdder was given a core_state before; pass core_state= '
              'with every add() (it is stored at each unroll\'s first step).')
        for buf, x in zip(self._state0_flat, tree.flatten(core_state)):
          buf[...] = x
    t += 1
    self._put_timestep(t, next_timestep)
    if t == self._T:
      self._write()
      t = 0
    self._t = t

  def _first_add(self, action, extras, core_state) -> None:
    self._check_batch('action', tree.flatten(action)[0])
    act_spec = self._env_spec.actions if self._env_spec else None
    self._actions = self._alloc(act_spec, action, self._shape)
    self._actions_flat = _as_flat(self._actions)
    self._extras = self._alloc(self._extras_spec, extras, self._shape)
    self._extras_flat = tree.flatten(self._extras)
    if core_state is not None or self._core_state_spec is not None:
      self._state0 = self._alloc(self._core_state_spec, core_state,
                                 (self._N,))
      self._state0_flat = tree.flatten(self._state0)

  def _write(self) -> None:
    """Appends and inserts one [T + 1] unroll per environment (or the N of
    them as one [N, T + 1] item)."""
    if self._priority_fn is not None:
      self._write_nested()
    else:
      if self._flat_sources is None:
        self._flat_sources = tree.flatten(self._step_sources())
      if self._batched_items:
        self._insert_step([self._batched_field(source)
                           for source in self._flat_sources])
      else:
        for i in range(self._N):
          self._insert_step([self._field(source, i)
                             for source in self._flat_sources])
    self._flush(self._max_in_flight_items)
    # The last step of this unroll is the first step of the next one.
    T = self._T
    self._reward[:, 0] = self._reward[:, T]
    self._discount[:, 0] = self._discount[:, T]
    self._step_type[:, 0] = self._step_type[:, T]
    for buf in self._obs_flat:
      buf[:, 0] = buf[:, T]

  def _step_sources(self):
    """One item's fields: the [N, ...] buffers, indexed per environment."""
    sources = {
        'observation': self._obs, 'action': self._actions,
        'reward': self._reward, 'discount': self._discount,
        'step_type': self._step_type, 'extras': self._extras,
        'policy_version': _POLICY_VERSION, 'actor_id': _ACTOR_ID,
    }
    if self._state0 is not None:
      sources['core_state'] = self._state0
    return sources

  def _field(self, source, i: int):
    """Environment i's value of one `_step_sources` leaf."""
    if source is _POLICY_VERSION:
      return self._version0
    if source is _ACTOR_ID:
      return self._actor_id
    return source[i]

  def _batched_field(self, source):
    """All environments' values of one `_step_sources` leaf: [N, ...]."""
    if source is _POLICY_VERSION:
      return np.full(self._N, self._version0)
    if source is _ACTOR_ID:
      return np.full(self._N, self._actor_id)
    return source

  def _write_nested(self) -> None:
    """`_write` for a `priority_fn`, which is given each item as a nest."""
    structure = self._step_sources()
    for i in range(self._N):
      self._writer.append(tree.map_structure(
          lambda source: self._field(source, i), structure))  # pylint: disable=cell-var-from-loop
      self._create_item(tree.map_structure(lambda c: c[-1],
                                           self._cached_history()),
                        flush=False)

  def _reset_episode(self) -> None:
    self._t = -1
