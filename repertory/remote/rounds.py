"""Remote episodes for a synchronous on-policy learner (PPO): rounds of
`unrolls_per_round` unrolls, every action of a round from one policy
version.

```
 slots (remote episodes) --batched act--> RoundBackend --unrolls of v--> queue
                        <-- blocks at the round's end until the learner
                            publishes v + 1, then fetches its weights
```

Each slot has an `UnrollAdder` (one environment): its unrolls of
`unroll_length` + 1 steps run across the episodes the slot plays, with the
behaviour log-prob and value of every action (`extras`). The round of
version v takes the first `unrolls_per_round` unrolls completed at v
(`actor_id` 0; a slot's unroll completed once the round is full is dropped).
Once the round is full, the backend flushes, waits for the learner's
version v + 1 (the clients' steps wait with it), fetches its weights and
restarts every slot's unroll at that slot's next step: no unroll mixes
versions, so PPO's ratio uses the exact behaviour log-probs.

Legal-action masks and logged actions are refused (the learner's policy is
unmasked and its ratio needs the sampled action's log-prob under the
policy that acted).
"""

import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple

from absl import logging
import numpy as np

from repertory.remote import acting

# How long one blocking wait on the learner lasts before the stop is checked.
WAIT_SLICE_S = 2.0


class _Slot:
  def __init__(self, adder):
    self.adder = adder
    self.t = -1             # steps added since add_first; -1: not started.
    self.pending = None     # (action, extras) of the last step, at version.


class RoundBackend(acting.SlotBackend):
  """See module doc. `make_policy()` builds a feedforward `core.Policy`
  (`step(observation [B, ...], state, first) -> (action, extras, state)`,
  `set_weights`) whose extras are the unrolls' (PPO: `{'log_prob',
  'value'}`); `learner` has `wait_for_version(v, timeout_s)` and
  `get_variables`."""

  unsupported = {
      'step.legal_actions': 'legal-action masks are not supported by this '
                            'agent (PPO); use --agent=seed or r2d2',
      'step.logged': 'logged actions are not supported by this agent (PPO, '
                     'on-policy); use --agent=seed or r2d2',
  }

  def __init__(self, make_policy: Callable[[], Any], learner: Any,
               replay: Any, table: str, unroll_length: int,
               unrolls_per_round: int, environment_spec: Any,
               extras_spec: Any, num_actions: int, max_batch_size: int = 64,
               batch_timeout_ms: float = 0.5, variable_name: str = 'policy',
               round_timeout_s: float = 120.0):
    from repertory.components import variables  # pylint: disable=g-import-not-at-top
    super().__init__(num_actions, max_batch_size, batch_timeout_ms)
    if unrolls_per_round < 1:
      raise ValueError(f'unrolls_per_round must be >= 1, got '
                       f'{unrolls_per_round}.')
    self._policy = make_policy()
    self._learner = learner
    self._client = variables.VariableClient(learner, variable_name,
                                            fetch_timeout_s=round_timeout_s)
    self._client.update(wait=True)
    self._policy.set_weights(self._client.params)
    self.version = self._client.version
    self._replay, self._table = replay, table
    self._T = unroll_length
    self._per_round = unrolls_per_round
    self._specs = (environment_spec, extras_spec)
    self._round_timeout_s = round_timeout_s
    self._slots: Dict[int, _Slot] = {}
    self.written = 0          # unrolls of the current round
    self.rounds = 0           # rounds completed
    self.dropped = 0          # unrolls completed after their round was full
    self._closed = threading.Event()

  def _slot(self, slot: int) -> _Slot:
    if slot not in self._slots:
      from repertory.components import adders  # pylint: disable=g-import-not-at-top
      environment_spec, extras_spec = self._specs
      self._slots[slot] = _Slot(adders.UnrollAdder(
          self._replay, self._table, unroll_length=self._T, num_envs=1,
          actor_id=0, environment_spec=environment_spec,
          extras_spec=extras_spec))
    return self._slots[slot]

  def _batch(self, steps: acting.Steps) -> Tuple[np.ndarray, int]:
    action, extras, _ = self._policy.step(
        steps.observation, self._policy.initial_state(len(steps.slot)),
        steps.step_type == acting.FIRST)
    action = np.asarray(action)
    version = self.version
    for k, s in enumerate(steps.slot):
      slot = self._slot(int(s))
      timestep = acting.timestep(
          steps.step_type[k:k + 1], steps.reward[k:k + 1],
          steps.discount[k:k + 1], steps.observation[k:k + 1])
      if slot.t < 0:  # A new slot, or one restarted at a round's start.
        slot.adder.add_first(timestep)
        slot.t = 0
      else:
        completes = slot.t + 1 == self._T
        if completes and self.written >= self._per_round:
          self.dropped += 1   # The round is full: start afresh next round.
          slot.adder.reset()
          slot.t, slot.pending = -1, None
          continue
        prev_action, prev_extras = slot.pending
        slot.adder.set_policy_version(version)
        slot.adder.add(prev_action, timestep, extras=prev_extras)
        slot.t = 0 if completes else slot.t + 1
        if completes:
          self.written += 1
      slot.pending = (action[k:k + 1],
                      {name: np.asarray(x)[k:k + 1]
                       for name, x in extras.items()})
    if self.written >= self._per_round:
      self._next_round()
    return action, version

  def _next_round(self) -> None:
    """Flushes the round, waits for version + 1, restarts every slot."""
    for slot in self._slots.values():
      slot.adder.flush()
    wanted = self.version + 1
    start = time.monotonic()
    while not self._closed.is_set():
      served = self._learner.wait_for_version(wanted, WAIT_SLICE_S)
      if served >= wanted:
        break
      if time.monotonic() - start > self._round_timeout_s:
        raise TimeoutError(f'remote PPO: the learner did not publish version '
                           f'{wanted} within {self._round_timeout_s:.0f} s.')
    if self._closed.is_set():
      raise RuntimeError('remote PPO: closed while waiting for a version.')
    self._client.update(wait=True)
    self._policy.set_weights(self._client.params)
    self.version = self._client.version
    self.rounds += 1
    self.written = 0
    for slot in self._slots.values():
      slot.adder.reset()
      slot.t, slot.pending = -1, None
    logging.log_every_n_seconds(logging.INFO, 'remote PPO: round %d, version '
                                '%d.', 10, self.rounds, self.version)

  def stats(self) -> dict:
    stats = super().stats()
    stats.update(version=self.version, rounds=self.rounds,
                 written=self.written, dropped=self.dropped)
    return stats

  def close(self) -> None:
    self.closed = True
    self._closed.set()
    for slot in list(self._slots.values()):
      acting.abort_adder(slot.adder)
