"""The progress display: a tqdm bar when stderr is a terminal (a real pty),
the monitor's plain lines otherwise; a resumed run says where it resumed and
shows only its own progress."""

import fcntl
import io
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios

from repertory.components import loggers
from repertory.components.loggers import progress_display

PROGRESS = ('[   12.3s] actor_steps=20480 [20.5% of 100000, ETA 0m48s] '
            '(1662/s) learner_steps=64 episodes=812 return(last 100)=0.450 '
            'policy_lag=1.20 dropped=0 queue=6')
EVALUATION = ('[   14.0s] evaluation at actor_steps=20000: return=0.450 over '
              '20 episodes')


def test_without_a_terminal_the_lines_are_printed_as_they_are():
  out = io.StringIO()
  display = loggers.ProgressDisplay(100_000, out=out,
                                    bar_stream=io.StringIO())
  assert not display.has_bar  # A StringIO is not a terminal.
  display.show(PROGRESS)
  display.show(EVALUATION + '\n')
  display.close()
  assert out.getvalue() == PROGRESS + '\n' + EVALUATION + '\n'


def test_the_bar_follows_the_actor_steps_and_keeps_the_other_lines():
  out, bar = io.StringIO(), io.StringIO()
  display = loggers.ProgressDisplay(100_000, initial=10_000, bar=True,
                                    out=out, bar_stream=bar)
  display.show(PROGRESS)
  display.show(EVALUATION)
  display.close()
  drawn = bar.getvalue()
  assert ' 10%|' in drawn  # Resumed at 10,000 of 100,000.
  assert ' 20%|' in drawn and '20.5k/100k' in drawn
  assert 'learner_steps=64 return=0.450 lag=1.20 queue=6' in drawn
  assert out.getvalue() == EVALUATION + '\n'  # Printed above the bar.


def test_interactive_is_false_for_pipes_and_true_for_a_pty():
  assert not progress_display.interactive(io.StringIO())
  read, write = os.pipe()
  with os.fdopen(read) as r, os.fdopen(write, 'w') as w:
    del r
    assert not progress_display.interactive(w)
  master, slave = pty.openpty()
  with os.fdopen(slave, 'w') as s:
    assert progress_display.interactive(s)
  os.close(master)


_FLAGS = ('--lp_launch_type=local_mt', '--num_actors=1', '--envs_per_actor=2',
          '--eval_every_steps=0', '--eval_episodes=1', '--stop_at_return=never',
          '--progress_every_seconds=0.5', '--config.unroll_length=5',
          '--config.batch_size=2', '--config.hidden_sizes=16')


def _run_in_pty(args) -> str:
  """Runs `python -m repertory.run args` with stdout and stderr on a pty
  (120 columns); returns what it wrote."""
  master, slave = pty.openpty()
  fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack('HHHH', 40, 120, 0, 0))
  process = subprocess.Popen(
      [sys.executable, '-m', 'repertory.run', *args], stdout=slave,
      stderr=slave, stdin=subprocess.DEVNULL)
  os.close(slave)
  chunks = []
  while True:
    try:
      chunk = os.read(master, 65536)
    except OSError:  # EIO: the child closed the pty.
      break
    if not chunk:
      break
    chunks.append(chunk)
  os.close(master)
  assert process.wait(timeout=300) == 0, b''.join(chunks)[-3000:]
  return b''.join(chunks).decode(errors='replace')


def test_a_run_shows_lines_in_a_pipe_and_a_bar_on_a_terminal(tmp_path):
  logdir = str(tmp_path / 'run')
  first = subprocess.run(
      [sys.executable, '-m', 'repertory.run', *_FLAGS,
       '--max_actor_steps=1000', f'--logdir={logdir}'],
      capture_output=True, text=True, timeout=300)
  assert first.returncode == 0, first.stderr[-3000:]
  # Not a terminal: the monitor's lines, no bar.
  lines = [l for l in first.stdout.splitlines() if 'actor_steps=' in l]
  assert lines and all(re.match(r'\[\s*[\d.]+s\] ', l) for l in lines)
  assert '%|' not in first.stdout + first.stderr
  with open(os.path.join(logdir, 'progress.log')) as f:  # Its progress lines
    # (a results line can repeat to the letter: same path, same elapsed time).
    earlier = [l.strip() for l in f if 'actor_steps=' in l]
  with open(os.path.join(logdir, 'counts.json')) as f:
    taken = int(json.load(f)['actor_steps'])

  # The same run resumed with a larger budget, on a terminal.
  text = _run_in_pty([*_FLAGS, f'--max_actor_steps={2 * taken}',
                      f'--logdir={logdir}'])
  assert f'Resumed at actor_steps={taken}, learner_steps=' in text
  assert ' 50%|' in text  # The bar starts where the first run ended.
  assert '100%|' in text
  assert 'results: eval_return_mean=' in text  # Other lines stay.
  # Only its own progress: none of the first run's lines, no plain lines.
  for line in earlier:
    assert line not in text
  assert not re.search(r'\] actor_steps=\d+ \[', text)
