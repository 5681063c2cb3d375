"""`--seed` reaches every agent: the experiment's seed, not a per-agent one.

For every agent, the same seed gives the same initial weights twice and
another seed different ones; for the agents whose actors write to a FIFO
queue (IMPALA, SEED, PPO) the first unroll of the actor (its first
observations and first actions) is the same for the same seed, too.
"""

import numpy as np
import pytest

from repertory import experiment as experiment_lib
from repertory import testing
from repertory.agents import a3c
from repertory.agents import apex
from repertory.agents import impala
from repertory.agents import ppo
from repertory.agents import r2d2
from repertory.agents import seed as seed_agent

AGENTS = {
    'impala': impala.Config(unroll_length=5, batch_size=4, max_queue_size=16,
                            hidden_sizes=(16,)),
    'seed': seed_agent.Config(unroll_length=5, batch_size=4,
                              max_queue_size=16, hidden_sizes=(16,)),
    'ppo': ppo.Config(unroll_length=5, hidden_sizes=(16,)),
    'a3c': a3c.Config(unroll_length=5, hidden_sizes=(16,)),
    'apex': apex.Config(torso_sizes=(16,), head_sizes=(16,), batch_size=8,
                        min_replay_size=16, replay_size=500),
    'r2d2': r2d2.Config(torso_sizes=(16,), lstm_size=8, head_sizes=(16,),
                        burn_in=2, trace_length=3, sequence_period=2,
                        batch_size=4, min_replay_size=8, replay_size=500),
}
MODULES = {'impala': impala, 'seed': seed_agent, 'ppo': ppo, 'a3c': a3c,
           'apex': apex, 'r2d2': r2d2}
QUEUES = ('impala', 'seed', 'ppo')


def _first(agent, seed, tmp_path):
  """(initial weights, first queue item or None) of a run with `seed`."""
  experiment = experiment_lib.ExperimentConfig(
      agent=agent, env='catch', num_actors=1, envs_per_actor=2,
      max_actor_steps=10**9, seed=seed, launch_type='test_mt',
      logdir=str(tmp_path / f'{agent}-{seed}-{len(list(tmp_path.iterdir()))}'))
  program = MODULES[agent].make_program(AGENTS[agent], experiment)
  learner_node = program.groups['learner'][0]
  learner_node = getattr(learner_node, 'nodes', [learner_node])[0]
  learner_node.disable_run()
  if agent not in QUEUES:
    for node in program.groups['actor']:
      node.disable_run()
  with testing.launched(program):
    learner = learner_node.create_handle().dereference()
    version, (weights,) = learner.get_variables(['policy'])
    assert version == 0
    item = None
    if agent in QUEUES:
      replay = program.groups['replay'][0].create_handle().dereference()
      testing.wait_until(lambda: testing.table_size(replay, 'queue') >= 2,
                         'the actor\'s first unrolls')
      item = next(iter(replay.sample('queue', num_samples=1,
                                     emit_timesteps=False))).data
  return weights, item


def _same(a, b) -> bool:
  flat_a, flat_b = list(a), list(b)
  return len(flat_a) == len(flat_b) and all(
      np.array_equal(x, y) for x, y in zip(flat_a, flat_b))


@pytest.mark.parametrize('agent', sorted(AGENTS))
def test_seed_sets_initial_weights_and_first_steps(agent, tmp_path):
  weights, item = _first(agent, 0, tmp_path)
  again, item_again = _first(agent, 0, tmp_path)
  other, item_other = _first(agent, 1, tmp_path)
  assert sorted(weights) == sorted(again)
  assert all(np.array_equal(weights[k], again[k]) for k in weights)
  assert any(not np.array_equal(weights[k], other[k]) for k in weights)
  if item is not None:
    assert _same(item, item_again)  # Observations, actions, logits...
    assert not _same(item, item_other)
