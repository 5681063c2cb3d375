"""`--seed` reaches every agent: the experiment's seed, not a per-agent one.

For every agent, with two actors: the same seed gives the same initial
weights and the same first observations and actions of each actor twice;
another seed gives different ones; and the two actors of one run are not
copies of each other (each actor has its own seed). The first steps are
read where the agent really puts them:

- IMPALA, SEED, PPO: each actor's first item in the FIFO queue (the
  actors run freely; the learner does not): IMPALA's and SEED's hold the
  first unroll of all the actor's environments, PPO's one environment's.
- A3C (no replay): each actor's first rollout through its own node
  (`pull()` then `rollout()`, what its `step()` does before the gradient).
- Ape-X, R2D2: every item of the prioritized table after each actor made
  `STEPS` policy calls (through its node) and flushed; the table is read
  whole by sampling it uniformly (priority_exponent=0) until every key was
  seen, then each actor's items are put in a canonical order.
"""

import dataclasses

import numpy as np
import pytest
import tree

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
    # Uniform sampling, and a rate limiter's error buffer (1,000 items) that
    # lets the actors insert and the test read the whole table.
    'apex': apex.Config(torso_sizes=(16,), head_sizes=(16,), batch_size=8,
                        min_replay_size=1, replay_size=500,
                        priority_exponent=0.0, samples_per_insert=1.0,
                        samples_per_insert_tolerance=1000.0),
    'r2d2': r2d2.Config(torso_sizes=(16,), lstm_size=8, head_sizes=(16,),
                        burn_in=2, trace_length=3, sequence_period=2,
                        batch_size=4, min_replay_size=1, replay_size=500,
                        priority_exponent=0.0, samples_per_insert=1.0,
                        samples_per_insert_tolerance=1000.0),
}
MODULES = {'impala': impala, 'seed': seed_agent, 'ppo': ppo, 'a3c': a3c,
           'apex': apex, 'r2d2': r2d2}
QUEUES = ('impala', 'seed', 'ppo')
REPLAY = ('apex', 'r2d2')
NUM_ACTORS = 2
STEPS = 8  # Policy calls of each replay actor (R2D2's sequences are 6 long).


def _queue_firsts(replay):
  """Each actor's first unroll in the FIFO queue, by actor id."""
  firsts = {}
  while len(firsts) < NUM_ACTORS:
    sample = next(iter(replay.sample('queue', num_samples=1,
                                     emit_timesteps=False,
                          unpack_as_table_signature=True)))
    # One id per item, or one per environment of a batched item.
    actor_id = int(np.asarray(sample.data['actor_id']).flat[0])
    firsts.setdefault(actor_id, sample.data)
  return firsts


def _table_items(replay, table):
  """Every item of `table`, as {actor id: [items in a canonical order]}."""
  size = testing.table_size(replay, table)
  assert size > 0
  items = {}
  samples = replay.sample(table, num_samples=100 * size,
                          emit_timesteps=False,
                          unpack_as_table_signature=True)
  for sample in samples:
    items.setdefault(int(sample.info.key), sample.data)
    if len(items) == size:
      break
  assert len(items) == size, f'sampled {len(items)} of {size} items'
  by_actor = {}
  for data in items.values():
    by_actor.setdefault(int(data['actor_id']), []).append(data)
  canonical = lambda d: b''.join(np.asarray(x).tobytes()  # pylint: disable=g-long-lambda
                                 for x in tree.flatten(d))
  return {a: sorted(ds, key=canonical) for a, ds in by_actor.items()}


def _first(agent, seed, tmp_path):
  """(initial weights, {actor id: its first steps}) of a run with `seed`."""
  experiment = experiment_lib.ExperimentConfig(
      agent=agent, env='catch', num_actors=NUM_ACTORS, envs_per_actor=2,
      max_actor_steps=10**9, seed=seed, launch_type='test_mt',
      logdir=str(tmp_path / f'{agent}-{seed}-{len(list(tmp_path.iterdir()))}'))
  program = MODULES[agent].make_program(AGENTS[agent], experiment)
  learner_node = program.groups['learner'][0]
  learner_node = getattr(learner_node, 'nodes', [learner_node])[0]
  learner_node.disable_run()
  actor_nodes = program.groups['actor']
  assert len(actor_nodes) == NUM_ACTORS
  if agent not in QUEUES:
    for node in actor_nodes:
      node.disable_run()
  with testing.launched(program):
    learner = learner_node.create_handle().dereference()
    version, (weights,) = learner.get_variables(['policy'])
    assert version == 0
    if agent in QUEUES:
      replay = program.groups['replay'][0].create_handle().dereference()
      firsts = _queue_firsts(replay)
    elif agent == 'a3c':
      firsts = {}
      for i, node in enumerate(actor_nodes):
        actor = node.create_handle().dereference()
        assert actor.pull() == 0
        firsts[i] = actor.rollout()
    else:
      for node in actor_nodes:
        actor = node.create_handle().dereference()
        for _ in range(STEPS):
          actor.step()
        actor.flush()
      replay = program.groups['replay'][0].create_handle().dereference()
      firsts = _table_items(replay, MODULES[agent].TABLE)
  assert sorted(firsts) == list(range(NUM_ACTORS))
  return weights, firsts


def _same(a, b) -> bool:
  flat_a, flat_b = tree.flatten(a), tree.flatten(b)
  return len(flat_a) == len(flat_b) and all(
      np.array_equal(x, y) for x, y in zip(flat_a, flat_b))


def _steps(first):
  """The observations and actions of an actor's first steps."""
  if isinstance(first, list):  # Replay items.
    return [_steps(item) for item in first]
  return (first['observation'], first['action'])


@pytest.mark.parametrize('agent', sorted(AGENTS))
def test_seed_sets_initial_weights_and_first_steps(agent, tmp_path):
  weights, firsts = _first(agent, 0, tmp_path)
  again, firsts_again = _first(agent, 0, tmp_path)
  other, firsts_other = _first(agent, 1, tmp_path)
  assert sorted(weights) == sorted(again)
  assert all(np.array_equal(weights[k], again[k]) for k in weights)
  assert any(not np.array_equal(weights[k], other[k]) for k in weights)
  for i in range(NUM_ACTORS):
    # Everything the actor wrote (observations, actions, logits, states...).
    assert _same(firsts[i], firsts_again[i]), f'actor {i}'
    assert not _same(_steps(firsts[i]), _steps(firsts_other[i])), f'actor {i}'
  assert not _same(_steps(firsts[0]), _steps(firsts[1]))


def test_the_actors_of_a_run_differ_in_seed():
  experiment = experiment_lib.ExperimentConfig(
      num_actors=3, envs_per_actor=4, seed=5, logdir='unused')
  seeds = [experiment.actor_seed(i) + j for i in range(3) for j in range(4)]
  assert len(set(seeds + [experiment.eval_seed])) == len(seeds) + 1
  assert dataclasses.replace(experiment, seed=6).actor_seed(0) not in seeds


def test_sample_from_uniform_matches_a_plain_inverse_cdf():
  """What the inference server's per-actor sampling and the numpy actors
  draw from: the categorical of the logits, row by row (against
  `np.searchsorted`)."""
  from repertory.agents.actor_critic import numpy_policy  # pylint: disable=g-import-not-at-top
  rng = np.random.RandomState(3)
  logits = rng.normal(size=(500, 4)).astype(np.float32) * 3
  uniform = rng.random_sample(500)
  probs = np.exp(logits.astype(np.float64))
  probs /= probs.sum(axis=1, keepdims=True)
  expected = [np.searchsorted(np.cumsum(p), u, side='right')
              for p, u in zip(probs, uniform)]
  actions = numpy_policy.sample_from_uniform(logits, uniform)
  assert actions.dtype == np.int32
  np.testing.assert_array_equal(actions, expected)
  # Near-certain actions at the ends of [0, 1); an impossible action is
  # never drawn, even by 0.
  sure = np.array([[-50.0, 50.0, -50.0]] * 2, np.float32)
  ends = np.array([1e-9, 1.0 - 1e-9])
  np.testing.assert_array_equal(
      numpy_policy.sample_from_uniform(sure, ends), [1, 1])
  masked = np.array([[-np.inf, 0.0, 0.0]], np.float32)
  assert numpy_policy.sample_from_uniform(masked, np.array([0.0]))[0] == 1
