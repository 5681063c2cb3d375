"""PPO's linear schedules (learning rate and clip range, SB3's progress
offset) and the network choice, against a plain reference and in a real
short test_mt run."""

import pytest

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents import ppo
from repertory.agents.ppo import config as config_lib
from repertory.components import learners
from repertory.components.networks import separate_mlp


def sb3_progress_remaining(rounds: int, steps_per_round: int,
                           total_timesteps: int):
  """SB3's `OnPolicyAlgorithm.learn`, written out: collect a rollout (the
  step count grows), then `_update_current_progress_remaining`, then
  `train()` with `schedule(progress_remaining)`; a linear schedule is
  `progress_remaining * initial`."""
  num_timesteps, out = 0, []
  for _ in range(rounds):
    num_timesteps += steps_per_round                      # collect_rollouts
    out.append(1.0 - float(num_timesteps) / float(total_timesteps))
  return out


@pytest.mark.parametrize('steps_per_round, anneal_steps', [
    (256, 100_000), (512, 1_000_000), (20, 100), (7, 30)])
def test_remaining_fraction_matches_sb3s_loop(steps_per_round, anneal_steps):
  rounds = anneal_steps // steps_per_round + 3      # Past the end as well.
  expected = sb3_progress_remaining(rounds, steps_per_round, anneal_steps)
  got = [learners.remaining_fraction(k, steps_per_round, anneal_steps)
         for k in range(rounds)]
  # SB3 goes below 0 in the round that crosses its budget; ours stops at 0.
  assert got == pytest.approx([max(0.0, e) for e in expected], abs=1e-12)
  assert got[0] < 1.0 and got[-1] == 0.0


def test_config_names_the_networks_and_refuses_others():
  assert set(config_lib.NETWORKS) == set(separate_mlp.KINDS)
  assert ppo.Config().network == 'separate_tanh'
  with pytest.raises(ValueError, match=r"network must be one of "
                     r"shared_relu, separate_tanh, got 'relu'"):
    ppo.Config(network='relu')


@pytest.mark.parametrize('anneal_lr, anneal_clip', [(True, False),
                                                     (False, True)])
def test_clip_range_and_learning_rate_decay_in_a_real_run(
    tmp_path, anneal_lr, anneal_clip):
  config = ppo.Config(unroll_length=5, num_epochs=2, num_minibatches=2,
                      hidden_sizes=(16,), round_timeout_s=300.0,
                      anneal_learning_rate=anneal_lr,
                      anneal_clip_epsilon=anneal_clip, anneal_steps=100)
  experiment = experiment_lib.ExperimentConfig(
      agent='ppo', env='catch', num_actors=2, envs_per_actor=2,
      max_actor_steps=10**9, logdir=str(tmp_path), launch_type='test_mt')
  program = ppo.make_program(config, experiment)
  learner_node, = program.groups['learner']
  learner_node.disable_run()
  launched = launch.launch(program, launch_type='test_mt')
  try:
    learner = learner_node.create_handle().dereference()
    steps_per_round = 5 * 2 * 2                                 # 20
    clips = []
    for round_index in range(6):            # 6 x 20 steps > 100: reaches 0.
      metrics = learner.step()
      fraction = max(0.0, 1.0 - (round_index + 1) * steps_per_round / 100)
      clips.append(metrics['charts/clip_epsilon'])
      assert metrics['charts/learning_rate'] == pytest.approx(
          1e-3 * (fraction if anneal_lr else 1.0), rel=1e-5, abs=1e-9)
      assert clips[-1] == pytest.approx(
          0.2 * (fraction if anneal_clip else 1.0), rel=1e-5, abs=1e-9)
    if anneal_clip:
      assert clips[0] == pytest.approx(0.16) and clips[-1] == 0.0
      assert all(a > b for a, b in zip(clips[:5], clips[1:5]))
      # The loss clipped with the variable: at ε = 0 (and a step size left)
      # every ratio the updates moved off 1 is outside the clip range.
      assert metrics['losses/clip_fraction'] > 0.5
    else:
      assert clips == pytest.approx([0.2] * 6)
      # At ε = 0.2 and a step size of 0 no ratio leaves [0.8, 1.2].
      assert metrics['losses/clip_fraction'] == 0.0
  finally:
    launched.stop(timeout=60)
