"""PettingZoo games as `MultiAgentEnvironment`s (`pettingzoo:<module>`).

    env = PettingZooEnvironment('classic.tictactoe_v3', seed=0)     # AEC
    env = PettingZooEnvironment('classic.rps_v2', seed=0,
                                api='parallel')                      # parallel

Spec form: `pettingzoo:<family>.<game>` (a module under `pettingzoo`), with
`/parallel` appended for the parallel API (e.g. `pettingzoo:classic.rps_v2/
parallel`). Players are the environment's `possible_agents`, in order.
Discrete observations are one-hot encoded, boxes flattened to float32; a
dict observation with 'observation' and 'action_mask' (PettingZoo's classic
games) gives both. Only discrete action spaces of one size are supported.
"""

import importlib
from typing import Any, Optional

import dm_env
import numpy as np

from repertory.environments.multiagent import base


def load_module(name: str) -> Any:
  """Imports `pettingzoo.<name>`, refusing unknown modules in one line."""
  if not name or not all(part.isidentifier() for part in name.split('.')):
    raise ValueError(f'PettingZoo spec {name!r}: expected '
                     "'<family>.<game>', e.g. 'classic.tictactoe_v3'.")
  try:
    module = importlib.import_module(f'pettingzoo.{name}')
  except ImportError as e:
    raise ValueError(f'PettingZoo has no module {name!r} ({e}); e.g. '
                     "'classic.tictactoe_v3', 'classic.rps_v2'.") from None
  if not (hasattr(module, 'env') or hasattr(module, 'parallel_env')):
    raise ValueError(f'pettingzoo.{name} is not a game module (it has neither '
                     'env() nor parallel_env()).')
  return module


def _space_parts(space):
  """(obs space, has action mask) of one agent's observation space."""
  import gymnasium  # pylint: disable=g-import-not-at-top
  if isinstance(space, gymnasium.spaces.Dict):
    if 'observation' not in space.spaces:
      raise ValueError(f'Unsupported PettingZoo dict observation {space}: '
                       "expected an 'observation' key.")
    return space['observation'], 'action_mask' in space.spaces
  return space, False


def _encode(space, value) -> np.ndarray:
  import gymnasium  # pylint: disable=g-import-not-at-top
  if isinstance(space, gymnasium.spaces.Discrete):
    one_hot = np.zeros(space.n, np.float32)
    one_hot[int(value) - space.start] = 1.0
    return one_hot
  return np.asarray(value, np.float32).reshape(-1)


def _encoded_size(space) -> int:
  import gymnasium  # pylint: disable=g-import-not-at-top
  if isinstance(space, gymnasium.spaces.Discrete):
    return int(space.n)
  if isinstance(space, gymnasium.spaces.Box):
    return int(np.prod(space.shape))
  raise ValueError(f'Unsupported PettingZoo observation space {space}: '
                   'expected Discrete or Box.')


class PettingZooEnvironment(base.MultiAgentEnvironment):
  """A PettingZoo AEC (turn-based) or parallel (simultaneous) environment."""

  def __init__(self, name: str, seed: Optional[int] = None,
               api: str = 'aec', **kwargs):
    if api not in ('aec', 'parallel'):
      raise ValueError(f"api={api!r}: expected 'aec' or 'parallel'.")
    module = load_module(name)
    maker = 'env' if api == 'aec' else 'parallel_env'
    if not hasattr(module, maker):
      raise ValueError(f'pettingzoo.{name} has no {maker}() (the {api} API).')
    import gymnasium  # pylint: disable=g-import-not-at-top
    self._env = getattr(module, maker)(**kwargs)
    self._name, self._api, self._seed = name, api, seed
    self._agents = list(self._env.possible_agents)
    sizes = set()
    for agent in self._agents:
      space = self._env.action_space(agent)
      if not isinstance(space, gymnasium.spaces.Discrete):
        raise ValueError(f'pettingzoo.{name}: agent {agent!r} has action '
                         f'space {space}; only Discrete is supported.')
      sizes.add(int(space.n))
    if len(sizes) != 1:
      raise ValueError(f'pettingzoo.{name}: agents have different action '
                       f'counts {sorted(sizes)}; one size is supported.')
    self._a = sizes.pop()
    self._spaces = [_space_parts(self._env.observation_space(a))
                    for a in self._agents]
    shapes = {_encoded_size(space) for space, _ in self._spaces}
    if len(shapes) != 1:
      raise ValueError(f'pettingzoo.{name}: agents observe different sizes '
                       f'{sorted(shapes)}; one size is supported.')
    self._size = shapes.pop()
    self._done = True
    self._observations = {}

  @property
  def num_players(self) -> int:
    return len(self._agents)

  @property
  def simultaneous(self) -> bool:
    return self._api == 'parallel'

  @property
  def num_actions(self) -> int:
    return self._a

  def player_observation_shape(self) -> tuple:
    return (self._size,)

  def _fill(self, p, raw, obs, legal) -> None:
    space, has_mask = self._spaces[p]
    value = raw['observation'] if has_mask else raw
    obs[p] = _encode(space, value)
    legal[p] = (np.asarray(raw['action_mask'], np.float32) if has_mask
                else 1.0)

  def _timestep(self, step_type, rewards, done) -> dm_env.TimeStep:
    n = self.num_players
    obs = np.zeros((n, self._size), np.float32)
    legal = np.zeros((n, self._a), np.float32)
    if self._api == 'aec':
      for p, agent in enumerate(self._agents):
        if agent in self._env.agents:
          self._fill(p, self._env.observe(agent), obs, legal)
      player = (base.TERMINAL if done else
                self._agents.index(self._env.agent_selection))
      if not done:  # Only the agent to act has legal actions.
        keep = legal[player].copy()
        legal[:] = 0.0
        legal[player] = keep
    else:
      for p, agent in enumerate(self._agents):
        if agent in self._observations:
          self._fill(p, self._observations[agent], obs, legal)
      player = base.TERMINAL if done else base.SIMULTANEOUS
    if done:
      legal[:] = 0.0
    observation = {base.OBSERVATION: obs, base.LEGAL_ACTIONS: legal,
                   base.CURRENT_PLAYER: np.int32(player)}
    if step_type == dm_env.StepType.FIRST:
      return dm_env.TimeStep(step_type, None, None, observation)
    discount = np.full(n, 0.0 if done else 1.0, np.float32)
    return dm_env.TimeStep(step_type, rewards, discount, observation)

  def reset(self) -> dm_env.TimeStep:
    seed, self._seed = self._seed, None  # Seeds the first reset only.
    if self._api == 'aec':
      self._env.reset(seed=seed)
    else:
      self._observations, _ = self._env.reset(seed=seed)
    self._done = False
    return self._timestep(dm_env.StepType.FIRST, None, False)

  def _aec_done(self) -> bool:
    env = self._env
    return not env.agents or all(
        env.terminations[a] or env.truncations[a] for a in env.agents)

  def step(self, actions) -> dm_env.TimeStep:
    if self._done:
      return self.reset()
    n = self.num_players
    rewards = np.zeros(n, np.float32)
    if self._api == 'aec':
      player = self._agents.index(self._env.agent_selection)
      actions = base.as_actions(actions, n, player)
      self._check_legal(player, int(actions[player]))
      self._env.step(int(actions[player]))
      for p, agent in enumerate(self._agents):
        rewards[p] += self._env.rewards.get(agent, 0.0)
      done = self._aec_done()
    else:
      actions = base.as_actions(actions, n, base.SIMULTANEOUS)
      live = [a for a in self._agents if a in self._env.agents]
      self._observations, step_rewards, terms, truncs, _ = self._env.step(
          {a: int(actions[self._agents.index(a)]) for a in live})
      for p, agent in enumerate(self._agents):
        rewards[p] += step_rewards.get(agent, 0.0)
      done = not self._env.agents or all(
          terms.get(a, True) or truncs.get(a, True) for a in live)
    self._done = done
    step_type = dm_env.StepType.LAST if done else dm_env.StepType.MID
    return self._timestep(step_type, rewards, done)

  def _check_legal(self, player: int, action: int) -> None:
    agent = self._agents[player]
    space, has_mask = self._spaces[player]
    del space
    if has_mask:
      mask = np.asarray(self._env.observe(agent)['action_mask'])
      if not 0 <= action < len(mask) or not mask[action]:
        raise ValueError(f'pettingzoo.{self._name}: action {action} of '
                         f'{agent} is illegal here; legal actions: '
                         f'{np.flatnonzero(mask).tolist()}.')

  def close(self) -> None:
    self._env.close()
