"""The central batched inference server of SEED RL (Espeholt et al. 2020,
"SEED RL: Scalable and Efficient Deep-RL with Accelerated Central Inference",
arXiv:1910.06591).

Actors only step environments: each actor sends the batched timestep of its
`envs_per_actor` environments in ONE call and gets one action per
environment back. Concurrent calls of many actors are stacked by
`launch.batched_handler` and served by one forward pass. The server

* keeps the recurrent state of every environment, keyed by
  (actor id, environment index); it is zeroed when an environment starts a
  new episode (a FIRST step) and for all of an actor's environments when the
  actor restarts (a new `run_id`), which also drops that actor's partial
  unroll;
* rejects a batch in which one actor appears twice (an actor must wait for
  its actions before sending its next step);
* assembles each actor's unrolls with an `UnrollAdder` and writes them to
  the Reverb queue, tagged with the policy version that chose the actions;
* pulls new weights from the learner every `variable_update_period` batches
  (on the serving thread when the learner shares its process);
* serves `inference` also over a direct TCP channel (`channel_address()`,
  see `launch.ChannelServer`), which SEED's actors use instead of a Ray call per
  step.

The policy is any object with `initial_state(n)`, `step(observation [B, ...],
state, first [B]) -> (action [B], extras, next_state)` and
`set_weights(weights)`, built inside the server's process by `make_policy()`.
A policy whose `step` also takes `uniform` ([B] numbers in [0, 1)) gets each
actor's numbers from a random stream of that actor's own (seeded by the server's
`seed` and the actor id), so an actor's actions do not depend on which other
actors shared its batch.
"""

import inspect
import threading
from typing import Any, Callable, Dict

from absl import logging
import numpy as np
import tree

from repertory import launch
from repertory.components import variables

_FIRST = 0  # dm_env.StepType.FIRST


class _ActorSlot:
  """What the server keeps for one actor (all of its environments)."""

  def __init__(self, run_id: int, state: Any, adder: Any,
               rng: np.random.RandomState):
    self.run_id = run_id
    self.rng = rng                # This actor's action sampling.
    self.state = state            # nest of [N, ...]: the state before the
    # environments' current step (not yet reset for FIRST steps).
    self.adder = adder
    self.pending = None           # (action, extras, state, version) of the
    # last call: written once the timestep it led to arrives.
    self.steps = 0


class InferenceServer:
  """Serves batched actions to environment-only actors; see module doc.

  Call `inference(actor_id, run_id, step_type, reward, discount,
  observation)` from an actor (through the node's handle) with the batched
  timestep of its N environments; it returns the N actions.

  Args:
    make_policy: builds the policy (called once, in this process).
    variable_source: the learner (handle), with `get_variables(names)`.
    replay: a `reverb.Client`; None writes nothing (inference only).
    table: the queue the unrolls go to.
    unroll_length: T; items hold T + 1 steps.
    envs_per_actor: N, the environments of every actor.
    max_batch_size: the most actor calls one forward pass serves.
    batch_timeout_ms: a partial batch runs this long after its first call
      arrived; 0 runs the calls that are ready at once (batches then grow
      with the load: calls that arrive while one batch runs make the
      next).
    variable_update_period: fetch new weights every this many batches.
    variable_name: the variable group to fetch.
    environment_spec, extras_spec, core_state_spec: specs of ONE
      environment for the `UnrollAdder`s (see `UnrollAdder`).
    seed: with the actor id, seeds each actor's action sampling (for a
      policy whose `step` takes `uniform`).
    batched_items: each actor's unroll of its N environments is one item
      (`UnrollAdder(batched_items=True)`), not N.
    colocated_variable_source: `variable_source` runs in this process
      (SEED's default placement, in the learner's): weights are fetched
      on the serving thread, not on a fetch thread
      (`VariableClient(asynchronous=False)`), which at a fetch per batch
      saves two thread hand-offs per call.
    weights_transport: how a server in another process than its source
      fetches: 'handle' (`variable_source.get_variables`, on a fetch
      thread) or 'tcp' (the source's `variables_channel_address()`: the
      request sent on one batch, its reply read on a later one, with no
      thread; see `VariableClient`). A colocated source is called
      directly.
  """

  def __init__(self,
               make_policy: Callable[[], Any],
               variable_source: Any,
               replay: Any,
               table: str,
               unroll_length: int,
               envs_per_actor: int,
               max_batch_size: int = 16,
               batch_timeout_ms: float = 0.0,
               variable_update_period: int = 1,
               variable_name: str = 'policy',
               environment_spec: Any = None,
               extras_spec: Any = None,
               core_state_spec: Any = None,
               seed: int = 0,
               batched_items: bool = False,
               colocated_variable_source: bool = False,
               weights_transport: str = 'handle'):
    """Builds the policy and waits for the first weights (arguments: see
    the class docstring)."""
    if unroll_length < 1 or envs_per_actor < 1 or max_batch_size < 1:
      raise ValueError(
          'unroll_length, envs_per_actor and max_batch_size must be >= 1, got '
          f'{unroll_length}, {envs_per_actor}, {max_batch_size}.')
    self._policy = make_policy()
    self._seed = seed
    self._uniform = 'uniform' in inspect.signature(
        self._policy.step).parameters
    self._client = variables.VariableClient(
        variable_source, variable_name,
        update_period=variable_update_period,
        asynchronous=not colocated_variable_source,
        transport='handle' if colocated_variable_source else weights_transport)
    self._client.update(wait=True)
    self._policy.set_weights(self._client.params)
    self._version = self._client.version
    self._recurrent = bool(tree.flatten(self._policy.initial_state(1)))
    self._replay = replay
    self._table = table
    self._unroll_length = unroll_length
    self._num_envs = envs_per_actor
    self._specs = (environment_spec, extras_spec, core_state_spec)
    self._batched_items = batched_items
    self._slots: Dict[int, _ActorSlot] = {}
    self._lock = threading.Lock()
    self.num_batches = 0
    self.num_calls = 0
    # Batch concurrent calls: one forward pass per batch (SEED's dynamic
    # batching). Built per instance so that the sizes come from the config.
    self.inference = launch.batched_handler(
        max_batch_size, timeout=batch_timeout_ms / 1000.0)(
            InferenceServer._inference).__get__(self, InferenceServer)
    self._channel = launch.LazyChannel(self.inference)

  # --- statistics -----------------------------------------------------------

  def stats(self) -> Dict[str, Any]:
    """Batches and calls served, actors known, the policy version."""
    with self._lock:
      return {'num_batches': self.num_batches, 'num_calls': self.num_calls,
              'num_actors': len(self._slots), 'version': self._version,
              'mean_batch_size': self.num_calls / max(self.num_batches, 1)}

  def state_of(self, actor_id: int) -> Any:
    """The recurrent state held for an actor's environments (for tests)."""
    with self._lock:
      slot = self._slots.get(int(actor_id))
      return None if slot is None else slot.state

  # --- serving --------------------------------------------------------------

  def channel_address(self) -> str:
    """Starts (once) the direct channel to `inference` and returns its
    'host:port' for `launch.ChannelClient` (`launch.serve_channel`)."""
    return self._channel.address()

  def close(self) -> None:
    """Closes the channel (its clients' calls then raise)."""
    self._channel.close()

  def _new_slot(self, actor_id: int, run_id: int) -> _ActorSlot:
    adder = None
    if self._replay is not None:
      from repertory.components import adders  # pylint: disable=g-import-not-at-top
      env_spec, extras_spec, state_spec = self._specs
      adder = adders.UnrollAdder(
          self._replay, self._table, unroll_length=self._unroll_length,
          num_envs=self._num_envs, actor_id=actor_id,
          environment_spec=env_spec, extras_spec=extras_spec,
          core_state_spec=state_spec, batched_items=self._batched_items)
    return _ActorSlot(run_id, self._policy.initial_state(self._num_envs),
                      adder, np.random.RandomState([self._seed, actor_id]))

  def _refresh_weights(self) -> None:
    self._client.update()
    if self._client.version != self._version:
      self._policy.set_weights(self._client.params)
      self._version = self._client.version

  def _inference(self, actor_id, run_id, step_type, reward, discount,
                 observation):
    """Serves a batch of K calls: arguments are stacked, [K, N, ...]."""
    actor_ids = [int(a) for a in np.asarray(actor_id)]
    num_calls = len(actor_ids)
    if len(set(actor_ids)) != num_calls:
      duplicates = sorted({a for a in actor_ids if actor_ids.count(a) > 1})
      raise ValueError(
          f'InferenceServer: actor ids {duplicates} appear twice in one '
          'batch; an actor must wait for its actions before sending its next '
          'timestep (and actor ids must be unique).')
    step_type = np.asarray(step_type)
    if step_type.shape[1:] != (self._num_envs,):
      raise ValueError(
          f'InferenceServer(envs_per_actor={self._num_envs}): got timesteps '
          f'of shape {step_type.shape[1:]} from actors {actor_ids}.')
    self._refresh_weights()
    n = self._num_envs
    with self._lock:
      slots = []
      for k, a in enumerate(actor_ids):
        slot = self._slots.get(a)
        if slot is None or slot.run_id != int(run_id[k]):
          if slot is not None:
            logging.info('InferenceServer: actor %d restarted (run %d -> %d); '
                         'its states are reset and its partial unroll '
                         'dropped.', a, slot.run_id, int(run_id[k]))
            if slot.adder is not None:
              slot.adder.reset()
          if not (step_type[k] == _FIRST).all():
            raise ValueError(
                f'InferenceServer: the first call of actor {a} (run '
                f'{int(run_id[k])}) must hold FIRST timesteps (after '
                f'environment.reset()), got step types {step_type[k]}.')
          slot = self._new_slot(a, int(run_id[k]))
          self._slots[a] = slot
        slots.append(slot)
      self.num_batches += 1
      self.num_calls += num_calls

    # One forward pass over all K * N environments.
    flat = lambda x: np.reshape(x, (num_calls * n,) + np.shape(x)[2:])  # pylint: disable=g-long-lambda
    states = tree.map_structure(lambda *xs: np.concatenate(xs),
                                *[s.state for s in slots]
                                ) if self._recurrent else ()
    first = flat(step_type == _FIRST)
    kwargs = {}
    if self._uniform:
      kwargs['uniform'] = np.concatenate([s.rng.random_sample(n)
                                          for s in slots])
    action, extras, next_state = self._policy.step(
        _map(flat, observation), states, first, **kwargs)

    for k, slot in enumerate(slots):
      rows = slice(k * n, (k + 1) * n)
      take = lambda x: x[rows]  # pylint: disable=cell-var-from-loop
      if slot.adder is not None:
        timestep = _Timestep(step_type[k], reward[k], discount[k],
                             _map(lambda x: x[k], observation))  # pylint: disable=cell-var-from-loop
        if slot.pending is None:
          slot.adder.add_first(timestep)
        else:
          prev_action, prev_extras, prev_state, prev_version = slot.pending
          slot.adder.set_policy_version(prev_version)
          slot.adder.add(prev_action, timestep, extras=prev_extras,
                         core_state=prev_state if self._recurrent else None)
        slot.pending = (action[rows], _map(take, extras), slot.state,
                        self._version)
      slot.state = _map(take, next_state) if self._recurrent else ()
      slot.steps += 1
    return np.reshape(action, (num_calls, n) + np.shape(action)[1:])


def _map(fn: Callable[[Any], Any], nest: Any) -> Any:
  """`tree.map_structure(fn, nest)`, without dm-tree for an array or a
  dict of arrays (a server call's observations and extras), where its
  bookkeeping costs more than `fn`."""
  if isinstance(nest, np.ndarray):
    return fn(nest)
  if isinstance(nest, dict) and all(
      isinstance(x, np.ndarray) for x in nest.values()):
    return {k: fn(x) for k, x in nest.items()}
  return tree.map_structure(fn, nest)


class _Timestep:
  """A batched timestep as the adders read it (fields of [N])."""
  __slots__ = ('step_type', 'reward', 'discount', 'observation')

  def __init__(self, step_type, reward, discount, observation):
    self.step_type = step_type
    self.reward = reward
    self.discount = discount
    self.observation = observation
