r"""Bring your own environment: a `dm_env.Environment` and a `gymnasium.Env`
of your own, trained by any built-in agent.

  python examples/custom_environment.py --agent=impala --env=corridor \
      --lp_launch_type=local_mt
  python examples/custom_environment.py --agent=ppo --env=match_sign \
      --lp_launch_type=local_mt --stop_at_return=8.5

`repertory.environments.make` takes a spec string, a factory (a callable
returning a dm_env or gymnasium environment, given `seed=` if it takes one)
or an instance. Agents receive `ExperimentConfig.env` and build their
environments from it in their own nodes, so the simplest way to hand them a
new environment is a name registered in this process with
`environments.register` (below). Registrations live in the process that made
them: use the one-process launch types (test_mt, local_mt) for registered
names; under local_mp / ray each node process would need the registration too.
(A factory as `ExperimentConfig.env` would reach every node, in every launch
type, but the run monitor cannot yet write a function into results.json.)
"""

import sys
from typing import Optional

import dm_env
from dm_env import specs
import gymnasium
import numpy as np

from repertory import environments


class Corridor(dm_env.Environment):
  """Walk right along `length` cells: +1 on reaching the last cell.

  The observation is the one-hot position; action 0 steps left, 1 right.
  An episode ends at the goal (discount 0) or after `2 * length` steps
  (a truncation: discount 1).
  """

  def __init__(self, length: int = 5):
    if length < 2:
      raise ValueError(f'Corridor length must be >= 2, got {length}.')
    self._length, self._position, self._steps = length, 0, 0
    self._reset_next_step = True

  def reset(self) -> dm_env.TimeStep:
    self._position, self._steps, self._reset_next_step = 0, 0, False
    return dm_env.restart(self._observation())

  def step(self, action) -> dm_env.TimeStep:
    if self._reset_next_step:  # dm_env: the step after LAST starts anew.
      return self.reset()
    move = 1 if int(action) == 1 else -1
    self._position = min(max(self._position + move, 0), self._length - 1)
    self._steps += 1
    if self._position == self._length - 1:
      self._reset_next_step = True
      return dm_env.termination(1.0, self._observation())
    if self._steps >= 2 * self._length:
      self._reset_next_step = True
      return dm_env.truncation(0.0, self._observation())
    return dm_env.transition(0.0, self._observation())

  def _observation(self) -> np.ndarray:
    return np.eye(self._length, dtype=np.float32)[self._position]

  def observation_spec(self):
    return specs.BoundedArray((self._length,), np.float32, 0.0, 1.0,
                              name='position')

  def action_spec(self):
    return specs.DiscreteArray(2, name='action')


class MatchSign(gymnasium.Env):
  """A gymnasium contextual bandit: see x ~ U(-1, 1), answer 1 if x > 0
  else 0; reward 1 for a right answer; episodes of 10 steps."""

  observation_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
  action_space = gymnasium.spaces.Discrete(2)

  def reset(self, *, seed: Optional[int] = None, options=None):
    super().reset(seed=seed)  # Seeds self.np_random (the adapter passes it).
    self._steps = 0
    self._x = self.np_random.uniform(-1.0, 1.0, (1,)).astype(np.float32)
    return self._x, {}

  def step(self, action):
    reward = float(int(action) == int(self._x[0] > 0))
    self._steps += 1
    self._x = self.np_random.uniform(-1.0, 1.0, (1,)).astype(np.float32)
    return self._x, reward, self._steps >= 10, False, {}


def make_corridor(seed: Optional[int] = None) -> dm_env.Environment:
  """A factory: `make` passes `seed=` (Corridor is deterministic)."""
  del seed
  return Corridor(length=5)


def make_match_sign() -> gymnasium.Env:
  """A factory without `seed`: the gymnasium adapter seeds the first reset."""
  return MatchSign()


def register() -> None:
  """Makes 'corridor' and 'match_sign' valid `--env` values in this process."""
  environments.register('corridor', make_corridor)
  environments.register('match_sign', make_match_sign)


def main(command) -> None:
  """`repertory.run`'s entry point, in one process, with our names known."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  from repertory import run  # pylint: disable=g-import-not-at-top
  if flags.FLAGS.lp_launch_type != 'local_mt':
    sys.exit(f'custom_environment.py: error: --lp_launch_type='
             f'{flags.FLAGS.lp_launch_type}: this script registers its '
             'environments in this process only; use '
             '--lp_launch_type=local_mt.')
  register()
  run.main(command)


if __name__ == '__main__':
  from absl import app  # pylint: disable=g-import-not-at-top
  from absl import flags  # pylint: disable=g-import-not-at-top
  from repertory import run  # pylint: disable=g-import-not-at-top
  flags.FLAGS.set_default('env', 'corridor')
  flags.FLAGS.set_default('stop_at_return', '0.95')  # Corridor's best: 1.
  register()  # The --env value is checked as the flags are read.
  command = run.parse_command_line(sys.argv)
  if command is not None:
    app.run(lambda _: main(command), argv=command[:1],
            flags_parser=lambda args: args)
