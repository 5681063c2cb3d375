"""Remote episodes for a recurrent Q-learning agent (R2D2): a recurrent
Q-network with one LSTM state per slot, epsilon-greedy actions, and one
`SequenceAdder` per slot into the prioritized table.

```
 slots (remote episodes) --batched act--> SequenceBackend
   OAR(observation, previous action, previous reward) per slot
   q, state' = policy(oar, state)  (state zeroed on a new episode)
   --> SequenceAdder per slot (core_state stored at each sequence start,
       priority from priority_fn) --> prioritized table
```

A slot plays episodes back to back; its sequences continue across them
(`EndBehavior.CONTINUE`: the step types mark the boundaries, the learner
zeroes the state at FIRST steps), exactly as an R2D2 actor's environments.
The slot's recurrent state and previous action/reward are reset when a new
episode starts on it. Each slot's epsilon follows Ape-X's schedule over
`num_epsilons` values (slot `s` takes value `s % num_epsilons`).

Legal-action masks restrict both the greedy and the random choice to the
legal actions. Logged actions (the game acted itself) are recorded as the
action taken; Q-learning is off-policy, so they are ordinary data.
"""

from typing import Any, Callable, Dict, Tuple

import numpy as np

from repertory.remote import acting


class _Slot:
  def __init__(self, adder, state_size: int, action_dtype, reward_dtype):
    self.adder = adder
    self.state = {'hidden': np.zeros(state_size, np.float32),
                  'cell': np.zeros(state_size, np.float32)}
    self.prev_action = np.zeros((), action_dtype)
    self.prev_reward = np.zeros((), reward_dtype)
    self.pending = None  # (action, q_values, state used) of the last step.
    self.started = False


class SequenceBackend(acting.SlotBackend):
  """See module doc.

  Args:
    make_policy: builds `policy(oar [B, ...], {'hidden', 'cell'} [B, S]) ->
      (q_values [B, A], next state)` with `set_weights` (R2D2's
      `graph_recurrent_policy`).
    variable_source: the learner (`get_variables`).
    replay, table: the Reverb client and the prioritized table.
    environment_spec: the OAR environment's `EnvironmentSpec`.
    state_size: the LSTM width.
    sequence_length, sequence_period: of the `SequenceAdder`.
    priority_fn: the insert priority of a sequence (item -> float).
    epsilon, epsilon_alpha, num_epsilons: the Ape-X schedule over slots.
  """

  def __init__(self, make_policy: Callable[[], Any], variable_source: Any,
               replay: Any, table: str, environment_spec: Any,
               state_size: int, sequence_length: int, sequence_period: int,
               priority_fn: Callable[[Any], float], epsilon: float,
               epsilon_alpha: float, num_epsilons: int, num_actions: int,
               max_batch_size: int = 64, batch_timeout_ms: float = 0.5,
               variable_update_period: int = 1,
               max_in_flight_items: int = 8, seed: int = 0,
               variable_name: str = 'policy'):
    from repertory.components import variables  # pylint: disable=g-import-not-at-top
    from repertory.components.actors import epsilon_greedy as eg  # pylint: disable=g-import-not-at-top
    super().__init__(num_actions, max_batch_size, batch_timeout_ms)
    self._policy = make_policy()
    self._client = variables.VariableClient(
        variable_source, variable_name, update_period=variable_update_period)
    self._client.update(wait=True)
    self._policy.set_weights(self._client.params)
    self.version = self._client.version
    self._replay, self._table = replay, table
    self._spec = environment_spec
    self._state_size = state_size
    self._sequence = (sequence_length, sequence_period)
    self._priority_fn = priority_fn
    self._max_in_flight_items = max_in_flight_items
    self._epsilons = [eg.apex_epsilon(i, num_epsilons, epsilon, epsilon_alpha)
                      for i in range(max(num_epsilons, 1))]
    self._rng = np.random.RandomState(seed)
    observations = environment_spec.observations
    self._dtypes = (np.dtype(observations.observation.dtype),
                    np.dtype(observations.action.dtype),
                    np.dtype(observations.reward.dtype),
                    np.dtype(environment_spec.actions.dtype),
                    np.dtype(environment_spec.rewards.dtype),
                    np.dtype(environment_spec.discounts.dtype))
    self._slots: Dict[int, _Slot] = {}

  def epsilon(self, slot: int) -> float:
    return self._epsilons[slot % len(self._epsilons)]

  def state_of(self, slot: int) -> Any:
    """The recurrent state held for a slot (for tests)."""
    held = self._slots.get(int(slot))
    return None if held is None else held.state

  def _slot(self, slot: int) -> _Slot:
    if slot not in self._slots:
      from repertory.components import adders  # pylint: disable=g-import-not-at-top
      length, period = self._sequence
      adder = adders.SequenceAdder(
          self._replay, self._table, sequence_length=length, period=period,
          end_of_episode_behavior=adders.EndBehavior.CONTINUE, actor_id=slot,
          priority_fn=self._priority_fn,
          max_in_flight_items=self._max_in_flight_items)
      adder.set_policy_version(self.version)
      self._slots[slot] = _Slot(adder, self._state_size, self._dtypes[1],
                                self._dtypes[2])
    return self._slots[slot]

  def _batch(self, steps: acting.Steps) -> Tuple[np.ndarray, int]:
    from repertory import environments  # pylint: disable=g-import-not-at-top
    obs_dtype, prev_action_dtype, prev_reward_dtype, action_dtype, \
        reward_dtype, discount_dtype = self._dtypes
    slots = [self._slot(int(s)) for s in steps.slot]
    for k, slot in enumerate(slots):
      if steps.step_type[k] == acting.FIRST:  # A new episode on this slot.
        slot.state = {name: np.zeros_like(x) for name, x in slot.state.items()}
        slot.prev_action = np.zeros((), prev_action_dtype)
        slot.prev_reward = np.zeros((), prev_reward_dtype)
      else:
        slot.prev_reward = np.asarray(steps.reward[k], prev_reward_dtype)
    oar = [environments.OAR(np.asarray(steps.observation[k], obs_dtype),
                            slot.prev_action, slot.prev_reward)
           for k, slot in enumerate(slots)]
    state = {name: np.stack([slot.state[name] for slot in slots])
             for name in ('hidden', 'cell')}
    batch_oar = environments.OAR(*[np.stack(x) for x in zip(*oar)])
    q_values, next_state = self._policy(batch_oar, state)
    q_values = np.asarray(q_values, np.float32)
    epsilons = np.array([self.epsilon(int(s)) for s in steps.slot])
    action = acting.masked_epsilon_greedy(q_values, epsilons, steps.mask,
                                          self._rng)
    logged = steps.logged >= 0
    action[logged] = steps.logged[logged]
    for k, slot in enumerate(slots):
      timestep = acting.timestep(
          steps.step_type[k], np.asarray(steps.reward[k], reward_dtype),
          np.asarray(steps.discount[k], discount_dtype), oar[k])
      if steps.step_type[k] == acting.FIRST:
        if slot.started and slot.pending is not None:
          # The slot's previous episode ended without its LAST step being
          # recorded (cannot happen through the service; kept safe).
          slot.adder.reset()
        slot.adder.add_first(timestep)
        slot.started = True
      elif slot.pending is not None:
        prev_action, prev_q, used_state = slot.pending
        slot.adder.add(prev_action, timestep, extras={'q_values': prev_q},
                       core_state=used_state)
      used = {name: slot.state[name] for name in ('hidden', 'cell')}
      slot.pending = (None if steps.step_type[k] == acting.LAST else (
          np.asarray(action[k], action_dtype), q_values[k], used))
      slot.state = {name: np.asarray(next_state[name][k], np.float32)
                    for name in ('hidden', 'cell')}
      slot.prev_action = np.asarray(action[k], prev_action_dtype)
    self._refresh_weights()
    return action, self.version

  def _refresh_weights(self) -> None:
    version = self._client.version
    self._client.update()
    if self._client.version != version:
      self._policy.set_weights(self._client.params)
      self.version = self._client.version
      for slot in self._slots.values():
        slot.adder.set_policy_version(self.version)

  def stats(self) -> dict:
    stats = super().stats()
    stats.update(version=self.version, slots=len(self._slots))
    return stats

  def close(self) -> None:
    self.closed = True
    self._client.close()
    for slot in list(self._slots.values()):
      acting.abort_adder(slot.adder)
