"""kill -9 an actor's process in a running IMPALA program: it is restarted,
writes again, the learner keeps stepping on whole unrolls, and the run still
ends at exactly its step budget (local_mp and a loopback Ray cluster)."""

import json
import os
import signal
from typing import List

import psutil
import pytest

from repertory import experiment as experiment_lib
from repertory import launch
from repertory import testing
from repertory.agents import impala
from repertory.components import checkpointing


def node_pids(nodes_logdir: str, unit: str = '') -> List[int]:
  """Processes whose stdout is `<nodes_logdir>/<unit>.log` (any unit if '')."""
  pids = []
  for process in psutil.process_iter():
    try:
      target = os.readlink(f'/proc/{process.pid}/fd/1')
    except OSError:
      continue
    if os.path.dirname(target) != nodes_logdir:
      continue
    if not unit or os.path.basename(target) == f'{unit}.log':
      pids.append(process.pid)
  return pids


def wait_for(predicate, what: str, timeout: float, period: float = 0.5):
  return testing.wait_until(predicate, what, timeout=timeout,
                            interval=period)


def _inserts(replay) -> int:
  return replay.server_info()['queue'].rate_limiter_info.insert_stats.completed


@pytest.mark.slow
def test_killed_actor_is_restarted_and_the_learner_steps_on(tmp_path):
  config = impala.Config(unroll_length=10, batch_size=4, max_queue_size=16,
                         hidden_sizes=(32,))
  experiment = experiment_lib.ExperimentConfig(
      num_actors=2, envs_per_actor=4, max_actor_steps=10**12,
      logdir=str(tmp_path), launch_type='local_mp',
      checkpoint=checkpointing.CheckpointSettings(
          every_minutes=None, replay_every_minutes=None))
  program = impala.make_program(config, experiment)
  nodes = str(tmp_path / 'nodes')
  for attempt in range(3):  # Ray's start-up times out (30 s) when starved.
    try:
      launched = launch.launch(program, launch_type='local_mp', logdir=nodes,
                               block=False, max_restarts={'actor': 2})
      break
    except Exception as e:  # pylint: disable=broad-except
      if 'timed out during startup' not in str(e) or attempt == 2:
        raise
  try:
    counter = program.groups['counter'][0].create_handle().dereference()
    replay = program.groups['replay'][0].create_handle().dereference()
    steps = lambda: counter.get_counts().get('learner_steps', 0)
    wait_for(lambda: steps() >= 3, 'the learner to step', 300)
    (pid,) = node_pids(nodes, 'actor_0')
    os.kill(pid, signal.SIGKILL)

    new = wait_for(
        lambda: [p for p in node_pids(nodes, 'actor_0')
                 if p != pid], 'actor_0 to be restarted', 240)
    assert len(new) == 1
    inserts, learner_steps = _inserts(replay), steps()
    wait_for(lambda: _inserts(replay) >= inserts + 8,
                       'unrolls after the restart', 240)
    wait_for(lambda: steps() >= learner_steps + 5,
                       'the learner to step on', 240)
    assert launched.is_running()
    assert launched.error is None  # No node failed: no malformed unroll.
  finally:
    launched.stop(timeout=180)  # Re-raises a node's failure.
  # Processes Ray is still tearing down may take a few seconds to exit.
  wait_for(lambda: not node_pids(nodes), 'every node process to exit', 30)


def _run_and_kill_an_actor(tmp_path, launch_type: str, max_actor_steps: int):
  """Runs IMPALA on catch to its budget, kill -9 of actor_0 once the
  learner has stepped; returns results.json and counts.json."""
  config = impala.Config(unroll_length=10, batch_size=4, max_queue_size=16,
                         hidden_sizes=(32,))
  experiment = experiment_lib.ExperimentConfig(
      num_actors=2, envs_per_actor=4, max_actor_steps=max_actor_steps,
      stop_at_return='never', eval_every_steps=0, final_eval_episodes=5,
      logdir=str(tmp_path), launch_type=launch_type,
      checkpoint=checkpointing.CheckpointSettings(
          every_minutes=None, replay_every_minutes=None))
  program = impala.make_program(config, experiment)
  nodes = str(tmp_path / 'nodes')
  launched = launch.launch(program, launch_type=launch_type, logdir=nodes,
                           block=False, max_restarts={'actor': 2})
  try:
    counter = program.groups['counter'][0].create_handle().dereference()
    wait_for(lambda: counter.get_counts().get('learner_steps', 0) >= 3,
             'the learner to step', 300)
    assert counter.get_counts().get('actor_steps', 0) < max_actor_steps
    (pid,) = node_pids(nodes, 'actor_0')
    os.kill(pid, signal.SIGKILL)
    assert launched.wait(timeout=400), 'the run did not end'
  finally:
    launched.stop(timeout=180)
  with open(tmp_path / 'results.json') as f:
    results = json.load(f)
  with open(tmp_path / 'counts.json') as f:
    counts = json.load(f)
  return results, counts


def _check_ends_at_its_budget(results, counts, limit):
  # Exactly the budget, up to the rounding of one batched step (4 envs).
  assert limit <= results['actor_steps'] < limit + 4, results
  assert counts['actor_steps'] == results['actor_steps']
  assert counts['learner_steps'] == results['learner_steps']


@pytest.mark.slow
def test_a_killed_actor_leaves_no_budget_behind_local_mp(tmp_path):
  results, counts = _run_and_kill_an_actor(tmp_path, 'local_mp', 60_000)
  _check_ends_at_its_budget(results, counts, 60_000)


@pytest.mark.slow
def test_a_killed_actor_leaves_no_budget_behind_on_ray(tmp_path):
  from repertory.launch.backends import local_ray  # pylint: disable=g-import-not-at-top
  with testing.loopback_ray_cluster(num_cpus=4) as cluster:
    local_ray.connect(cluster.address)
    results, counts = _run_and_kill_an_actor(tmp_path, 'ray', 60_000)
  _check_ends_at_its_budget(results, counts, 60_000)
