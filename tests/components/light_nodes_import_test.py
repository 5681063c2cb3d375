"""The light nodes of every program (counter, run monitor, episode
bookkeeping, environments) neither import nor need TensorFlow: a node process
that hosts only them pays no TensorFlow start-up."""

import subprocess
import sys
import textwrap


def test_counter_and_monitor_work_without_tensorflow(tmp_path):
  code = textwrap.dedent(f'''
      import sys
      sys.modules['tensorflow'] = None  # Any import of it now fails loudly.
      from repertory.components import counting
      from repertory.components import evaluation
      from repertory.components.evaluation import monitor as monitor_lib
      from repertory import environments
      from repertory import experiment

      counter = counting.Counter()
      monitor = monitor_lib.RunMonitor(
          counter=counter, make_environment=None, make_eval_actor=None,
          variable_source=None, logdir={str(tmp_path)!r},
          max_actor_steps=10)
      tracker = evaluation.EpisodeTracker(num_envs=1)
      del tracker  # Importable and constructible: the actors' bookkeeping.
      counter.increment(actor_steps=12)
      monitor.record_episodes(returns=[3.0], lengths=[12])
      summary = monitor.summary()
      monitor._files.progress(summary)  # progress.csv (+ TensorBoard).
      monitor._files.close()
      env = environments.make('catch', seed=0)
      env.reset()
      print('COUNTS', counter.get_counts()['actor_steps'],
            summary['episodes'])
      print('HEAVY', [m for m in ('tensorflow', 'sonnet', 'reverb')
                      if sys.modules.get(m) is not None])
  ''')
  result = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, timeout=120, check=False)
  assert result.returncode == 0, result.stdout + result.stderr
  assert 'COUNTS 12 1' in result.stdout, result.stdout + result.stderr
  assert 'HEAVY []' in result.stdout, result.stdout + result.stderr
  assert (tmp_path / 'episodes.csv').read_text().count('\n') == 2
