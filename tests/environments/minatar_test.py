"""MinAtar's sticky actions (Machado et al. 2018; the MinAtar paper's 0.1),
measured from Breakout's paddle as the environment shows it."""

from absl.testing import absltest
import numpy as np

from repertory import environments
from repertory.environments import minatar_adapter

LEFT, RIGHT = 1, 2  # Breakout's minimal actions: no-op, left, right.
PADDLE = 0  # Breakout's paddle channel; the paddle moves along row 9.


def _paddle(observation) -> int:
  return int(np.flatnonzero(observation[9, :, PADDLE])[0])


def repeated_fraction(env, steps: int, seed: int = 0) -> float:
  """Of the steps whose requested move differs from the move the paddle
  last made, the fraction in which it repeated its last move instead:
  the sticky-action probability. Moves are read off the paddle (away from
  the walls, where a move shows)."""
  rng = np.random.default_rng(seed)
  timestep = env.reset()
  last_move, repeated, counted = None, 0, 0
  for _ in range(steps):
    requested = int(rng.choice([LEFT, RIGHT]))
    before = _paddle(timestep.observation)
    timestep = env.step(requested)
    if timestep.last():
      timestep, last_move = env.reset(), None
      continue
    delta = _paddle(timestep.observation) - before
    move = {-1: LEFT, 1: RIGHT}.get(delta) if 0 < before < 9 else None
    if move is not None and last_move is not None and requested != last_move:
      counted += 1
      repeated += move == last_move
    last_move = move
  assert counted > 2000, counted
  return repeated / counted


class StickyActionsTest(absltest.TestCase):

  def test_the_registry_makes_minatar_sticky_at_one_tenth(self):
    env = environments.make('minatar:breakout', seed=3)
    fraction = repeated_fraction(env, 30_000)
    # ~0.004 standard error at this count: 0.1 +- 0.025 is over 5 of them.
    self.assertBetween(fraction, 0.075, 0.125)

  def test_the_configured_probability_is_the_one_measured(self):
    for probability in (0.0, 0.3):
      env = minatar_adapter.MinAtarEnvironment(
          'breakout', seed=1, sticky_action_prob=probability)
      fraction = repeated_fraction(env, 20_000)
      self.assertBetween(fraction, probability - 0.03, probability + 0.03)
      if probability == 0.0:
        self.assertEqual(fraction, 0.0)


if __name__ == '__main__':
  absltest.main()
