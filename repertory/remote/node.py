"""The remote environment node: SEED's inference server behind the gRPC
service, as one node of a program graph.

```
 remote clients (any language) --gRPC--> EnvironmentService (this node)
      one slot per open episode            | act(slot, timestep, mask, logged)
                                           v
                       RemoteInferenceServer (batched; per-slot recurrent
                       state; unrolls with policy versions) --> Reverb queue
                       <-- weights from the learner
```

Each slot of the service is one "actor" of the inference server with one
environment; its episodes follow each other as an auto-resetting
environment's would, so the `UnrollAdder`'s items look exactly like those of
in-process SEED actors (the learner needs no change).

Legal-action masks and logged actions ride along with the observation:
`RemoteInferenceServer` hands them to `MaskedPolicy` for the batch it runs.
Masked rows sample from the policy's logits restricted to the legal
actions, and the stored behaviour logits are those restricted logits.
Logged rows keep the client's action; the stored behaviour logits are the
client's, or, without them, logits giving that action probability 1
(illegal or other actions get `MASKED_LOGIT`).
"""

import os
import threading
import time
from typing import Any, Callable, Optional, Tuple

from absl import logging
import numpy as np

from repertory import launch
from repertory.components import inference
from repertory.components.evaluation import episodes as episodes_lib
from repertory.remote import options as options_lib
from repertory.remote import service as service_lib
from repertory.remote import validation
from repertory_remote import wire as specs_lib

MASKED_LOGIT = -1e4  # a log-probability of an action never taken


class MaskedPolicy:
  """Wraps a SEED policy: applies the legal masks and logged actions that
  `RemoteInferenceServer` sets for the batch being run."""

  def __init__(self, policy: Any, num_actions: int, seed: int = 0):
    self._policy = policy
    self._num_actions = num_actions
    self._rng = np.random.RandomState(seed)
    self.batch_inputs = None  # (mask [B, A], logged [B], logits [B, A],
    # has_logits [B]) of the batch being run.

  def initial_state(self, batch_size: int) -> Any:
    return self._policy.initial_state(batch_size)

  def set_weights(self, weights: Any) -> None:
    self._policy.set_weights(weights)

  def step(self, observation, state, first):
    action, extras, next_state = self._policy.step(observation, state, first)
    if self.batch_inputs is None:
      return action, extras, next_state
    mask, logged, logged_logits, has_logits = self.batch_inputs
    action = np.array(action, copy=True)
    logits = np.array(extras['logits'], dtype=np.float32, copy=True)
    masked = ~mask.all(axis=1)
    if masked.any():
      rows = logits[masked]
      rows = rows - rows.max(axis=1, keepdims=True)
      rows[~mask[masked]] = MASKED_LOGIT
      logits[masked] = rows
      probabilities = np.exp(rows)
      probabilities /= probabilities.sum(axis=1, keepdims=True)
      cumulative = probabilities.cumsum(axis=1)
      draws = self._rng.uniform(size=(len(rows), 1)) * cumulative[:, -1:]
      action[masked] = np.minimum((cumulative < draws).sum(axis=1),
                                  self._num_actions - 1)
    is_logged = logged >= 0
    if is_logged.any():
      action[is_logged] = logged[is_logged]
      with_logits = is_logged & has_logits
      logits[with_logits] = logged_logits[with_logits]
      certain = is_logged & ~has_logits
      one_hot = np.full((int(certain.sum()), self._num_actions), MASKED_LOGIT,
                        np.float32)
      one_hot[np.arange(len(one_hot)), logged[certain]] = 0.0
      logits[certain] = one_hot
    extras = dict(extras, logits=logits)
    return action, extras, next_state


def _masked_policy(make_policy, num_actions, seed):
  return MaskedPolicy(make_policy(), num_actions, seed)


class RemoteInferenceServer(inference.InferenceServer):
  """`InferenceServer` (one environment per actor id = slot) whose batched
  `inference` also takes each call's legal mask and logged action; returns
  {'action', 'version'} per call."""

  def __init__(self, make_policy: Callable[[], Any], num_actions: int,
               max_batch_size: int, batch_timeout_ms: float, seed: int = 0,
               **kwargs):
    super().__init__(
        make_policy=lambda: _masked_policy(make_policy, num_actions, seed),
        envs_per_actor=1, max_batch_size=max_batch_size,
        batch_timeout_ms=batch_timeout_ms, **kwargs)
    self._num_actions = num_actions
    # One run id per instance: a restarted node starts fresh slots.
    self._run_id = np.int64(int.from_bytes(os.urandom(7), 'little'))
    self.inference = launch.batched_handler(
        max_batch_size, timeout=batch_timeout_ms / 1000.0)(
            RemoteInferenceServer._remote_inference).__get__(
                self, RemoteInferenceServer)

  unsupported: dict = {}

  def close(self) -> None:
    """Closes the channel and aborts the unroll writers (see
    `acting.abort_adder`)."""
    from repertory.remote import acting  # pylint: disable=g-import-not-at-top
    super().close()
    with self._lock:
      slots = list(self._slots.values())
    for slot in slots:
      if slot.adder is not None:
        acting.abort_adder(slot.adder)

  def act(self, slot, step_type, reward, discount, observation, mask,
          logged_action, logged_logits) -> Tuple[int, int]:
    """One step of one slot (the service's `act`); blocks for its batch."""
    n = self._num_actions
    result = self.inference(
        np.int64(slot), self._run_id, np.array([step_type], np.int8),
        np.array([reward], np.float32), np.array([discount], np.float32),
        observation[None],
        np.ones(n, bool) if mask is None else mask,
        np.int64(-1 if logged_action is None else logged_action),
        (np.zeros(n, np.float32) if logged_logits is None
         else logged_logits),
        np.bool_(logged_logits is not None))
    return int(result['action']), int(result['version'])

  def _remote_inference(self, actor_id, run_id, step_type, reward, discount,
                        observation, mask, logged, logged_logits, has_logits):
    """A batch of K calls: [K, 1, ...] timesteps, [K, A] masks, [K] logged."""
    self._policy.batch_inputs = (mask, logged, logged_logits, has_logits)
    try:
      action = inference.InferenceServer._inference(
          self, actor_id, run_id, step_type, reward, discount, observation)
    finally:
      self._policy.batch_inputs = None
    return {'action': np.asarray(action)[:, 0],
            'version': np.full(len(action), self._version, np.int64)}


def make_vtrace_backend(make_policy: Callable[[], Any], variable_source: Any,
                        replay: Any, table: str, unroll_length: int,
                        observation_spec: Any, action_spec: Any,
                        max_batch_size: int, batch_timeout_ms: float,
                        extras_spec: Any = None, core_state_spec: Any = None,
                        variable_update_period: int = 1,
                        variable_name: str = 'policy',
                        seed: int = 0) -> 'RemoteInferenceServer':
  """SEED's backend: a `RemoteInferenceServer` writing V-trace unrolls."""
  from repertory.components import adders  # pylint: disable=g-import-not-at-top
  return RemoteInferenceServer(
      make_policy=make_policy,
      num_actions=specs_lib.Specs.from_dm_env(observation_spec,
                                              action_spec).num_actions,
      max_batch_size=max_batch_size, batch_timeout_ms=batch_timeout_ms,
      seed=seed, variable_source=variable_source, replay=replay, table=table,
      unroll_length=unroll_length,
      variable_update_period=variable_update_period,
      variable_name=variable_name,
      environment_spec=adders.EnvironmentSpec(observation_spec, action_spec,
                                              None, None),
      extras_spec=extras_spec, core_state_spec=core_state_spec)


class RemoteEnvironmentNode:
  """Serves remote episodes to the agent; see module doc.

  `make_backend(*backend_args, max_batch_size=, batch_timeout_ms=,
  **backend_kwargs)` builds (in this node's process) the object that acts for the slots: `act(slot, step_type, reward,
  discount, observation, mask, logged_action, logged_logits) -> (action,
  version)`, `stats()`, `close()` and `unsupported` ({step field: why});
  SEED's is `make_vtrace_backend`, PPO's `rounds.RoundBackend`, R2D2's
  `sequences.SequenceBackend`.

  The gRPC server starts in the constructor (its port is then known:
  `address()`, and written to `options.address_file` when set); `run()`
  serves until the program stops.
  """

  def __init__(self,
               make_backend: Callable[..., Any],
               backend_args: tuple,
               backend_kwargs: dict,
               observation_spec: Any,
               action_spec: Any,
               options: options_lib.RemoteOptions,
               counter: Any = None,
               monitor: Any = None):
    self.specs = specs_lib.Specs.from_dm_env(observation_spec, action_spec)
    self._num_actions = self.specs.num_actions
    self._options = options
    self._server = make_backend(*backend_args,
                                max_batch_size=options.max_batch_size,
                                batch_timeout_ms=options.batch_timeout_ms,
                                **backend_kwargs)
    self._reporter = episodes_lib.ActorReporter(
        counter, monitor, min_interval_s=episodes_lib.REPORT_INTERVAL_S)
    self._report_lock = threading.Lock()
    self._closed = False
    self.service = service_lib.EnvironmentService(
        self.specs, self._server.act, options.token(),
        max_episodes=options.max_episodes,
        on_episode_end=self._episode_ended, on_step=self._stepped,
        unsupported=getattr(self._server, 'unsupported', None),
        limits=validation.Limits.from_dm_env(
            observation_spec, max_abs_reward=options.max_abs_reward,
            max_abs_observation=options.max_abs_observation),
        hello_timeout_s=options.hello_timeout_s,
        max_sessions_per_peer=options.max_sessions_per_peer)
    self._grpc, self.port = service_lib.serve(
        self.service, options.host, options.port, tls=options.tls(),
        max_sessions=options.max_sessions)
    logging.info('remote: serving %s on %s (specs %s).',
                 service_lib.SERVICE, self.address(), self.specs)
    if options.address_file:
      os.makedirs(os.path.dirname(os.path.abspath(options.address_file)),
                  exist_ok=True)
      temporary = options.address_file + '.tmp'
      with open(temporary, 'w') as f:
        f.write(self.address() + '\n')
      os.replace(temporary, options.address_file)

  def address(self) -> str:
    """'host:port' the clients connect to."""
    return f'{self._options.host}:{self.port}'

  def stats(self) -> dict:
    """The inference server's batches plus the service's sessions."""
    stats = self._server.stats()
    stats.update(open_episodes=self.service.open_episodes(),
                 sessions=self.service.num_sessions,
                 truncated_by_disconnect=(
                     self.service.num_truncated_by_disconnect))
    return stats

  def _stepped(self) -> None:
    if self._closed:  # Stopping: the counter and monitor may be gone.
      return
    with self._report_lock:
      self._reporter.report(1, [], [])

  def _episode_ended(self, episode_return: float, length: int,
                     truncated: bool) -> None:
    del truncated
    if self._closed:
      return
    with self._report_lock:
      self._reporter.report(0, [episode_return], [length])

  def run(self) -> None:
    """Serves until the program stops, then closes."""
    stop = launch.stop_event()
    try:
      while not stop.wait(episodes_lib.REPORT_INTERVAL_S):
        with self._report_lock:
          self._reporter.flush()
    finally:
      self.close()

  def close(self) -> None:
    """Stops serving (open sessions end; their episodes are truncated)."""
    if self._closed:
      return
    self._closed = True
    self._grpc.stop(grace=1.0).wait(5.0)
    self.service.close()
    self._server.close()
    with self._report_lock:
      self._reporter.flush()
