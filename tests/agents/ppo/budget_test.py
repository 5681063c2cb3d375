"""PPO's step budget counts whole rounds: a run whose budget is not a
multiple of the round ends by itself after the rounds SB3's loop would take
(no actor waits for a round another one was refused)."""

import json

import pytest

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents import ppo
from repertory.agents.ppo import config as config_lib


@pytest.mark.parametrize('budget, steps_per_round, rounds', [
    (100_000, 256, 391), (100_096, 256, 391), (100_097, 256, 392),
    (1, 20, 1), (20, 20, 1), (21, 20, 2)])
def test_rounds_for_budget_is_sb3s_loop(budget, steps_per_round, rounds):
  taken, expected = 0, 0
  while taken < budget:                 # SB3: while num_timesteps < total.
    taken += steps_per_round
    expected += 1
  assert expected == rounds
  assert config_lib.rounds_for_budget(budget, steps_per_round) == rounds


def test_run_ends_after_its_last_round_when_the_budget_splits_one(tmp_path):
  # 2 actors x 2 environments x 5 steps = 20 steps a round; 4,990 steps is
  # 249.5 rounds: the run takes 250 rounds (5,000 steps) and stops by itself.
  # (With the budget shared by reservation the actors were granted steps in
  # chunks, and near the end one actor was refused its round while the
  # other waited for the next version.)
  experiment = experiment_lib.ExperimentConfig(
      agent='ppo', env='catch', num_actors=2, envs_per_actor=2,
      max_actor_steps=4_990, stop_at_return='never', eval_episodes=1,
      eval_every_steps=0, logdir=str(tmp_path), launch_type='local_mt',
      progress_every_seconds=60.0)
  config = ppo.Config(unroll_length=5, num_epochs=1, num_minibatches=1,
                      hidden_sizes=(8,), round_timeout_s=120.0)
  # A stuck round would end the run by the round timeout, as an error.
  launch.launch(ppo.make_program(config, experiment), launch_type='local_mt',
                termination_notice_secs=10.0)
  with open(tmp_path / 'results.json') as f:
    results = json.load(f)
  assert results['actor_steps'] == 5_000
  with open(tmp_path / 'counts.json') as f:
    counts = json.load(f)
  assert counts['policy_lag_items'] == 250 * 4   # 4 unrolls a round.
