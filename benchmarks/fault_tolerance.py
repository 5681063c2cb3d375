r"""Fault-tolerance figures on a real IMPALA program in local_mp.

  python benchmarks/fault_tolerance.py --measure=actor_restart,learner_kill

actor_restart: IMPALA on catch with one actor (so the queue's inserts come
  from that actor alone) and `max_restarts={'actor': 3}`. Once the learner
  steps, the actor's process gets `kill -9`; we time (a) until a new process
  hosts the actor, (b) until the replacement's first unroll is in the Reverb
  queue (its insert count grows again), and check the learner steps on.
learner_kill: the same program (no restarts); once the learner has written a
  periodic checkpoint and stepped on, its process gets `kill -9`. The work
  lost is the learner steps taken since its latest checkpoint (by design at
  most `checkpoint_every_steps`, or what `checkpoint_every_minutes` allows).

A node's process is found by the log file its stdout goes to
(`<nodes logdir>/<unit>.log`, see repertory.launch).
"""

import os
import signal
import tempfile
import time
from typing import List, Optional

from absl import app
from absl import flags
import psutil

from repertory import experiment as experiment_lib
from repertory import launch
from repertory.agents import impala
from repertory.components import checkpointing

_MEASURE = flags.DEFINE_list('measure', ['actor_restart', 'learner_kill'],
                             'What to measure.')
_CHECKPOINT_EVERY = flags.DEFINE_integer(
    'checkpoint_every_steps', 50, 'The learner checkpoint period (steps).')
_TIMEOUT = flags.DEFINE_float('timeout', 600.0,
                              'Seconds to wait for each event.')


def node_pids(nodes_logdir: str, unit: str) -> List[int]:
  """Processes whose stdout is `<nodes_logdir>/<unit>.log`."""
  target = os.path.join(nodes_logdir, f'{unit}.log')
  pids = []
  for process in psutil.process_iter():
    try:
      if os.readlink(f'/proc/{process.pid}/fd/1') == target:
        pids.append(process.pid)
    except OSError:
      continue
  return pids


def wait_for(predicate, what: str, timeout: float, period: float = 0.2):
  start = time.monotonic()
  while True:
    value = predicate()
    if value:
      return value
    if time.monotonic() - start > timeout:
      raise TimeoutError(f'Waited {timeout:.0f} s for {what}.')
    time.sleep(period)


def make_program(logdir: str, num_actors: int):
  config = impala.Config(
      unroll_length=10, batch_size=4, max_queue_size=16, hidden_sizes=(32,),
      learner_log_every=10)
  experiment = experiment_lib.ExperimentConfig(
      agent='impala', env='catch', num_actors=num_actors, envs_per_actor=4,
      max_actor_steps=10**12, logdir=logdir, launch_type='local_mp',
      progress_every_seconds=10.0,
      checkpoint=checkpointing.CheckpointSettings(
          every_steps=_CHECKPOINT_EVERY.value, every_minutes=None,
          replay_every_minutes=None))
  return impala.make_program(config, experiment)


def launch_with_retries(program, attempts: int = 3, **kwargs):
  """launch(); retries Ray's own start-up timeout (a fixed 30 s that an
  overloaded machine exceeds)."""
  for attempt in range(attempts):
    try:
      return launch.launch(program, launch_type='local_mp', block=False,
                           **kwargs)
    except Exception as e:  # pylint: disable=broad-except
      if 'timed out during startup' not in str(e) or attempt + 1 == attempts:
        raise
      print(f'Ray start-up timed out; retrying ({attempt + 1}).', flush=True)


def _learner_steps(counter) -> float:
  return counter.get_counts().get('learner_steps', 0)


def _inserts(replay) -> int:
  info = replay.server_info()['queue']
  return info.rate_limiter_info.insert_stats.completed


def actor_restart(workdir: str) -> None:
  logdir = os.path.join(workdir, 'actor_restart')
  nodes = os.path.join(logdir, 'nodes')
  program = make_program(logdir, num_actors=1)
  launched = launch_with_retries(program, logdir=nodes,
                                max_restarts={'actor': 3})
  try:
    counter = program.groups['counter'][0].create_handle().dereference()
    replay = program.groups['replay'][0].create_handle().dereference()
    wait_for(lambda: _learner_steps(counter) >= 5, 'learner steps',
             _TIMEOUT.value, 1.0)
    (pid,) = wait_for(lambda: node_pids(nodes, 'actor_0'), 'the actor', 60)
    steps_before = _learner_steps(counter)
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    psutil.Process(pid).wait(30) if psutil.pid_exists(pid) else None
    inserts_at_kill = _inserts(replay)
    new_pid = wait_for(
        lambda: [p for p in node_pids(nodes, 'actor_0') if p != pid],
        'a new actor process', _TIMEOUT.value)[0]
    process_back = time.monotonic() - killed
    wait_for(lambda: _inserts(replay) > inserts_at_kill,
             'the replacement actor to write an unroll', _TIMEOUT.value, 0.05)
    data_back = time.monotonic() - killed
    wait_for(lambda: _learner_steps(counter) >= steps_before + 5,
             'the learner to step on', _TIMEOUT.value, 1.0)
    assert launched.is_running() and launched.error is None
    print(f'actor_restart: killed pid {pid}; new actor process {new_pid} '
          f'after {process_back:.1f} s; its first unroll in the queue after '
          f'{data_back:.1f} s; learner stepped on '
          f'({steps_before:.0f} -> {_learner_steps(counter):.0f} steps).',
          flush=True)
  finally:
    launched.stop(timeout=120)


def _latest_checkpoint(logdir: str) -> Optional[tuple]:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  path = tf.train.latest_checkpoint(os.path.join(logdir, 'checkpoints',
                                                 'latest'))
  if path is None:
    return None
  reader = tf.train.load_checkpoint(path)
  return (int(reader.get_tensor('version/.ATTRIBUTES/VARIABLE_VALUE')),
          int(reader.get_tensor('step/.ATTRIBUTES/VARIABLE_VALUE')))


def learner_kill(workdir: str) -> None:
  logdir = os.path.join(workdir, 'learner_kill')
  nodes = os.path.join(logdir, 'nodes')
  program = make_program(logdir, num_actors=2)
  launched = launch_with_retries(program, logdir=nodes)
  try:
    counter = program.groups['counter'][0].create_handle().dereference()
    every = _CHECKPOINT_EVERY.value
    wait_for(lambda: (_latest_checkpoint(logdir) or (0, 0))[1] >= every,
             'a periodic checkpoint', _TIMEOUT.value, 1.0)
    # Kill somewhere between two checkpoints.
    target = _learner_steps(counter) + every // 2
    wait_for(lambda: _learner_steps(counter) >= target, 'more steps',
             _TIMEOUT.value, 0.2)
    (pid,) = node_pids(nodes, 'learner_0')
    os.kill(pid, signal.SIGKILL)
    steps_at_kill = _learner_steps(counter)
    version, step = _latest_checkpoint(logdir)
    print(f'learner_kill: killed the learner at about {steps_at_kill:.0f} '
          f'steps; latest checkpoint: version {version}, step {step}; lost '
          f'about {steps_at_kill - step:.0f} steps (checkpoint_every_steps='
          f'{every}).', flush=True)
    try:
      launched.wait(timeout=120)
    except launch.NodeError as e:
      print('learner_kill: the program stopped with: '
            f'{str(e).splitlines()[0]}', flush=True)
  finally:
    launched.stop(timeout=120)


def main(argv):
  del argv
  workdir = tempfile.mkdtemp(prefix='repertory_ft_')
  print(f'logs in {workdir}', flush=True)
  for what in _MEASURE.value:
    {'actor_restart': actor_restart, 'learner_kill': learner_kill}[what](
        workdir)


if __name__ == '__main__':
  app.run(main)
