"""What the remote acting backends of PPO and R2D2 share: one batched
`act` over the service's slots.

The service (`service.EnvironmentService`) calls `act(slot, step_type,
reward, discount, observation, mask, logged_action, logged_logits)` from one
thread per in-flight step. `SlotBackend.act` stacks concurrent calls
(`launch.batched_handler`) into one call of the subclass's
`_batch(steps)` with a `Steps` of `[K, ...]` arrays, which returns the K
actions; a slot is a stream of episodes played back to back, like one
environment of an auto-resetting actor. SEED's backend is
`node.RemoteInferenceServer`.
"""

from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

from repertory import launch

FIRST, MID, LAST = 0, 1, 2  # dm_env.StepType values


class Steps(NamedTuple):
  """A batch of K steps from K different slots (all `[K, ...]`).

  mask: [K, A] bool, all True where the client sent no legal mask.
  logged: [K] int64, the client's own action, -1 where it sent none.
  logged_logits, has_logits: [K, A], [K]: the client's behaviour logits.
  """
  slot: np.ndarray
  step_type: np.ndarray
  reward: np.ndarray
  discount: np.ndarray
  observation: np.ndarray
  mask: np.ndarray
  logged: np.ndarray
  logged_logits: np.ndarray
  has_logits: np.ndarray


def masked_epsilon_greedy(q_values: np.ndarray, epsilon: np.ndarray,
                          mask: np.ndarray, rng: np.random.RandomState
                          ) -> np.ndarray:
  """Per-row epsilon-greedy over the legal actions only (`mask` [B, A])."""
  greedy = np.argmax(np.where(mask, q_values, -np.inf), axis=-1)
  probabilities = mask / mask.sum(axis=1, keepdims=True)
  cumulative = probabilities.cumsum(axis=1)
  draws = rng.uniform(size=(len(mask), 1)) * cumulative[:, -1:]
  random = np.minimum((cumulative < draws).sum(axis=1), mask.shape[1] - 1)
  explore = rng.uniform(size=len(mask)) < epsilon
  return np.where(explore, random, greedy).astype(np.int64)


class SlotBackend:
  """Batches `act` calls into `_batch(Steps) -> (actions [K], version)`.

  Subclasses set `num_actions` and implement `_batch`; `unsupported` maps
  step fields the backend refuses ('step.legal_actions', 'step.logged') to
  the reason (the service answers INVALID_ARGUMENT naming the field).
  """

  unsupported: dict = {}

  def __init__(self, num_actions: int, max_batch_size: int,
               batch_timeout_ms: float):
    self.num_actions = num_actions
    self.num_batches = 0
    self.num_calls = 0
    self.closed = False
    self._batched = launch.batched_handler(
        max_batch_size, timeout=batch_timeout_ms / 1000.0)(self._run_batch)

  def act(self, slot: int, step_type: int, reward: float, discount: float,
          observation: np.ndarray, mask: Optional[np.ndarray],
          logged_action: Optional[int],
          logged_logits: Optional[np.ndarray]) -> Tuple[int, int]:
    """One step of one slot; blocks until its batch ran. Returns (action,
    policy version)."""
    n = self.num_actions
    result = self._batched(
        np.int64(slot), np.int8(step_type), np.float32(reward),
        np.float32(discount), observation,
        np.ones(n, bool) if mask is None else mask,
        np.int64(-1 if logged_action is None else logged_action),
        (np.zeros(n, np.float32) if logged_logits is None
         else logged_logits),
        np.bool_(logged_logits is not None))
    return int(result['action']), int(result['version'])

  def _run_batch(self, *arrays) -> dict:
    if self.closed:
      raise RuntimeError(f'{type(self).__name__} is closed.')
    steps = Steps(*[np.asarray(a) for a in arrays])
    slots = [int(s) for s in steps.slot]
    if len(set(slots)) != len(slots):
      raise ValueError(f'{type(self).__name__}: slots {slots} appear twice in '
                       'one batch (an episode has one step in flight).')
    actions, version = self._batch(steps)
    self.num_batches += 1
    self.num_calls += len(slots)
    return {'action': np.asarray(actions, np.int64),
            'version': np.full(len(slots), version, np.int64)}

  def _batch(self, steps: Steps) -> Tuple[np.ndarray, int]:
    raise NotImplementedError

  def stats(self) -> dict:
    return {'num_batches': self.num_batches, 'num_calls': self.num_calls,
            'mean_batch_size': self.num_calls / max(self.num_batches, 1)}

  def close(self) -> None:
    pass


def abort_adder(adder: Any) -> None:
  """Closes an adder's writer without flushing: a flush blocked in another
  thread (a full table whose learner stopped) then raises instead of
  waiting forever, so that a closing node's threads end."""
  try:
    adder._writer.close()  # pylint: disable=protected-access
  except Exception:  # pylint: disable=broad-except
    pass


def timestep(step_type, reward, discount, observation) -> Any:
  """A `dm_env.TimeStep` for the adders (fields as given: scalars, or [1]
  arrays for a one-environment `UnrollAdder`)."""
  import dm_env  # pylint: disable=g-import-not-at-top
  return dm_env.TimeStep(step_type, reward, discount, observation)
