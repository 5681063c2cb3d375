"""What every Reverb adder shares: specs, the policy version, flushing.

Layouts written by the adders (all items also carry `policy_version`, the
behaviour policy's version at the item's first step, int64 scalar, and
`actor_id`, int32 scalar, so that the learner can measure policy lag):

- a *step* (sequence, episode and unroll items) holds, at time index t, the
  observation o_t and its `step_type` (int32, dm_env.StepType value), the
  action a_t the actor took on o_t with its `extras` (e.g. logits, log-probs),
  and the `reward` and `discount` (float32) that came with the next timestep
  (`SequenceAdder`, `EpisodeAdder`; Acme's layout) or with o_t itself
  (`UnrollAdder`; SEED RL / IMPALA layout, see its docstring).
- a *transition* (`NStepTransitionAdder`) holds o_t, a_t, the n-step return,
  the discount product and o_{t+n}.

The policy version is set by the actor with `adder.set_policy_version(v)`
(typically `adder.set_policy_version(variable_client.version)` after each
`update()`); it is recorded with every step.
"""

import abc
from typing import TYPE_CHECKING, Any, Callable, List, Mapping, Optional

from absl import logging
import dm_env
from dm_env import specs
import numpy as np
import tree

if TYPE_CHECKING:  # The client may be a `reverb_lite.WriterClient` too.
  import reverb  # pylint: disable=g-import-not-at-top

from repertory import core
from repertory.components import specs as specs_lib
from repertory.launch.process import reverb_lite

# Priority functions receive the item as a nest of numpy arrays.
PriorityFn = Callable[[Mapping[str, Any]], float]

STEP_TYPE_DTYPE = np.int32
REWARD_DTYPE = np.float32
VERSION_DTYPE = np.int64
ACTOR_ID_DTYPE = np.int32


# Defined beside `num_actions` so that a spec pickled into a node process
# that imports no TensorFlow (the run monitor) does not import it there.
EnvironmentSpec = specs_lib.EnvironmentSpec
make_environment_spec = specs_lib.make_environment_spec


def as_environment_spec(spec_or_env: Any) -> EnvironmentSpec:
  """Accepts an EnvironmentSpec-like object or a dm_env environment."""
  if hasattr(spec_or_env, 'observation_spec'):
    return make_environment_spec(spec_or_env)
  if all(hasattr(spec_or_env, a) for a in ('observations', 'actions')):
    return EnvironmentSpec(
        spec_or_env.observations, spec_or_env.actions,
        getattr(spec_or_env, 'rewards', None),
        getattr(spec_or_env, 'discounts', None))
  raise TypeError(
      f'Expected an EnvironmentSpec (observations, actions, rewards, '
      f'discounts) or a dm_env.Environment, got {type(spec_or_env).__name__}.')


def _leaf_shape_dtype(leaf):
  """(shape, dtype) of a dm_env spec, tf.TensorSpec or example array."""
  if isinstance(leaf, specs.Array):
    return tuple(leaf.shape), np.dtype(leaf.dtype)
  if hasattr(leaf, 'shape') and hasattr(leaf, 'dtype'):
    dtype = leaf.dtype
    dtype = getattr(dtype, 'as_numpy_dtype', dtype)
    return tuple(leaf.shape), np.dtype(dtype)
  arr = np.asarray(leaf)
  return arr.shape, arr.dtype


def tensor_spec(leaf, prefix=(), name=None):
  """A tf.TensorSpec with leading dims `prefix` for a spec or example leaf."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  shape, dtype = _leaf_shape_dtype(leaf)
  return tf.TensorSpec(tuple(prefix) + tuple(shape), tf.as_dtype(dtype), name)


def nest_spec(nest, prefix=()):
  """Maps `tensor_spec` over a nest of specs or example arrays."""
  return tree.map_structure(lambda x: tensor_spec(x, prefix), nest)


def zeros_like_spec(nest, prefix=()):
  """Zeros shaped like a nest of specs or example arrays (with `prefix`)."""
  def zeros(leaf):
    shape, dtype = _leaf_shape_dtype(leaf)
    return np.zeros(tuple(prefix) + tuple(shape), dtype)
  return tree.map_structure(zeros, nest)


def step_signature(environment_spec,
                   extras_spec=(),
                   core_state_spec=None,
                   time_prefix=()):
  """The signature of step-layout items (see module docstring).

  Args:
    environment_spec: an `EnvironmentSpec` (or dm_env environment).
    extras_spec: nest of specs (or example arrays) of the per-step extras.
    core_state_spec: nest of specs of the recurrent state stored once per item
      (at its first step), or None to store no state.
    time_prefix: leading dims of the per-step columns, e.g. `(T,)`, `(None,)`.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  env = as_environment_spec(environment_spec)
  sig = {
      'observation': nest_spec(env.observations, time_prefix),
      'action': nest_spec(env.actions, time_prefix),
      'reward': tf.TensorSpec(tuple(time_prefix) + value_shape(env.rewards),
                              tf.float32),
      'discount': tf.TensorSpec(
          tuple(time_prefix) + value_shape(env.discounts), tf.float32),
      'step_type': tf.TensorSpec(tuple(time_prefix), tf.int32),
      'extras': nest_spec(extras_spec, time_prefix),
      'policy_version': tf.TensorSpec((), tf.int64),
      'actor_id': tf.TensorSpec((), tf.int32),
  }
  if core_state_spec is not None:
    sig['core_state'] = nest_spec(core_state_spec)
  return sig


def value_shape(spec: Any) -> tuple:
  """The shape of a reward or discount spec (`()` for None: scalars)."""
  if spec is None:
    return ()
  return _leaf_shape_dtype(spec)[0]


def as_value(value: Any, default: float, shape: Optional[tuple], what: str,
             owner: str) -> np.ndarray:
  """A reward or discount as float32 of `shape` (`default` for None).

  `shape=None` accepts any shape (the caller learns it from the first value).
  A value of another shape is refused with one line naming both shapes.
  """
  if value is None:
    return np.full(() if shape is None else shape, default, REWARD_DTYPE)
  try:
    array = np.asarray(value, REWARD_DTYPE)
  except (TypeError, ValueError) as e:
    raise ValueError(f'{owner}: the {what} {value!r} is not numeric ({e}).'
                     ) from None
  if shape is not None and array.shape != tuple(shape):
    raise ValueError(
        f'{owner}: a {what} of shape {array.shape}, but this adder writes '
        f'{what}s of shape {tuple(shape)} (from the environment\'s '
        f'{what}_spec, or the first {what} it saw); build the adder and the '
        'table signature from the environment spec that produces them.')
  return array


_FLUSH_POLL_MS = 500


class ReverbAdder(abc.ABC):
  """Base of the adders: one TrajectoryWriter, versions, regular flushes.

  Subclasses implement `add_first`, `add` and `_reset_episode`.
  """

  def __init__(self,
               client: 'reverb.Client',
               table: str,
               num_keep_alive_refs: int,
               actor_id: int = 0,
               priority_fn: Optional[PriorityFn] = None,
               max_in_flight_items: int = 4,
               flush_timeout_s: float = 30.0):
    """Creates the writer.

    Args:
      client: a `reverb.Client` (a dereferenced ReverbNode handle: in a
        process without TensorFlow, a `launch.reverb_lite.WriterClient`).
      table: the table to insert items into.
      num_keep_alive_refs: how many steps back items may reference.
      actor_id: stored in every item.
      priority_fn: computes an item's priority from its numpy values; None
        inserts with priority 1.0.
      max_in_flight_items: items allowed to be pending on the server before
        `add` blocks (the table's rate limiter applies back-pressure here).
      flush_timeout_s: how often a blocked writer logs what it waits for.
    """
    if not isinstance(table, str) or not table:
      raise ValueError(f'table must be a table name, got {table!r}.')
    if not hasattr(client, 'trajectory_writer'):
      raise TypeError(
          f'client must be a reverb.Client, got {type(client).__name__}; '
          'pass the ReverbNode handle that the node received (it is '
          'dereferenced to a reverb.Client) or reverb.Client(address).')
    if max_in_flight_items < 1:
      raise ValueError(
          f'max_in_flight_items must be >= 1, got {max_in_flight_items}.')
    self._client = client
    self._table = table
    self._actor_id = ACTOR_ID_DTYPE(actor_id)
    self._priority_fn = priority_fn
    self._max_in_flight_items = max_in_flight_items
    self._flush_timeout_ms = int(flush_timeout_s * 1000)
    self._writer = client.trajectory_writer(num_keep_alive_refs)
    # Adders with a fixed step layout write through it directly.
    self._cpp_writer = reverb_lite.cpp_writer(self._writer)
    self._policy_version = VERSION_DTYPE(0)
    self._num_items = 0
    self._history = None

  def _cached_history(self):
    """`writer.history`, cached: its columns are long-lived objects, and the
    adders append every field in their first append (the structure never
    grows afterwards), so the structure is built once."""
    if self._history is None:
      self._history = self._writer.history
    return self._history

  @property
  def table(self) -> str:
    return self._table

  @property
  def num_items(self) -> int:
    """How many items this adder has created."""
    return self._num_items

  @property
  def policy_version(self) -> int:
    return int(self._policy_version)

  def set_policy_version(self, version: int) -> None:
    """Sets the behaviour policy version recorded with the following steps."""
    self._policy_version = VERSION_DTYPE(version)

  @abc.abstractmethod
  def add_first(self, timestep: dm_env.TimeStep) -> None:
    """Records the first timestep of an episode."""

  @abc.abstractmethod
  def add(self, action: core.Nest, next_timestep: dm_env.TimeStep,
          extras: core.Nest = ()) -> None:
    """Records the action taken and the timestep it led to."""

  def reset(self, timeout_ms: Optional[int] = None) -> None:
    """Drops the episode in progress (no partial items are written)."""
    self._reset_episode()
    self._writer.end_episode(clear_buffers=True, timeout_ms=timeout_ms)

  @abc.abstractmethod
  def _reset_episode(self) -> None:
    """Clears the subclass's per-episode state."""

  def _create_item(self, trajectory, flush: bool = True) -> None:
    """Creates one item and (if flush) bounds the number of pending items."""
    if self._priority_fn is None:
      priority = 1.0
    else:
      priority = float(self._priority_fn(
          tree.map_structure(lambda c: c.numpy(), trajectory)))
    try:
      self._writer.create_item(self._table, priority, trajectory)
    except Exception as e:  # pylint: disable=broad-except
      raise item_error(self, e) from e
    self._num_items += 1
    if flush:
      self._flush(self._max_in_flight_items)

  def _insert_step(self, flat_step: List[Any]) -> None:
    """Appends one step, given as its leaves in `tree.flatten` order of the
    table signature, and inserts it alone as an item with priority 1.0
    (adders with a `priority_fn` use `_create_item`), through the C++
    writer (`reverb_lite.cpp_writer`), which checks the item against the
    table signature as the Python writer does.
    """
    try:
      references = self._cpp_writer.Append(flat_step)
      self._cpp_writer.CreateItem(self._table, 1.0,
                                  [[r] for r in references],
                                  [True] * len(references))
    except Exception as e:  # pylint: disable=broad-except
      raise item_error(self, e) from e
    self._num_items += 1

  def _flush(self, block_until_num_items: int) -> None:
    """Flushes, logging what it waits for while the table is full.

    Inside a launched program that is stopping, gives up waiting (the items
    still pending are dropped with the program) so the actor can exit.
    """
    waited_ms = 0
    next_log_ms = self._flush_timeout_ms
    while True:
      try:
        self._writer.flush(block_until_num_items, timeout_ms=_FLUSH_POLL_MS)
        return
      except reverb_lite.errors().DeadlineExceededError:
        waited_ms += _FLUSH_POLL_MS
      from repertory import launch  # pylint: disable=g-import-not-at-top
      if launch.stopping():
        return
      if waited_ms >= next_log_ms:
        next_log_ms += self._flush_timeout_ms
        logging.warning(
            '%s (actor %d) waited %.0fs for table %r to accept items (its '
            'rate limiter blocks inserts until the learner samples more).',
            type(self).__name__, self._actor_id, waited_ms / 1000,
            self._table)

  def flush(self) -> None:
    """Blocks until every created item has reached the server."""
    self._flush(0)

  def close(self) -> None:
    """Flushes and closes the writer."""
    try:
      self._flush(0)
    finally:
      self._writer.close()

  def __del__(self):
    try:
      self._writer.close()
    except Exception:  # pylint: disable=broad-except
      pass


def item_error(adder, error: Exception) -> ValueError:
  return ValueError(
      f'{type(adder).__name__}: could not create an item in table '
      f'{adder.table!r}: {error}\nThe item must match the table signature: '
      f'build the table with this adder\'s `signature(...)` from the same '
      'environment spec, extras spec and core state spec that the actor '
      'writes (dtypes included).')


def not_started_error(adder) -> RuntimeError:
  return RuntimeError(
      f'{type(adder).__name__}.add() called before add_first(): call '
      'adder.add_first(timestep) with the first timestep of every episode '
      '(after environment.reset() or an auto-reset FIRST step), then '
      'adder.add(action, next_timestep, extras) for each step.')

