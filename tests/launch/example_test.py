"""examples/program_graph.py runs, choosing its launch type by flag."""

import os
import re
import subprocess
import sys

EXAMPLE = os.path.join(os.path.dirname(__file__), '..', '..', 'examples',
                       'program_graph.py')


def test_example_runs_with_the_launch_type_flag():
  result = subprocess.run(
      [sys.executable, EXAMPLE, '--lp_launch_type=local_mt'],
      capture_output=True, text=True, timeout=120)
  assert result.returncode == 0, result.stdout + result.stderr
  # Nodes print from threads: a line's text and its newline may interleave
  # with another node's, so find the messages rather than split lines.
  lines = sorted(re.findall(r'consumer got \d+ from producer \d+',
                            result.stdout))
  assert lines == ['consumer got 0 from producer 0',
                   'consumer got 1 from producer 1',
                   'consumer got 4 from producer 2']


def test_a_bad_launch_type_flag_names_the_choices():
  result = subprocess.run(
      [sys.executable, EXAMPLE, '--lp_launch_type=threads'],
      capture_output=True, text=True, timeout=120)
  assert result.returncode != 0
  assert 'test_mt' in result.stderr and 'local_mp' in result.stderr


def test_launch_flags_are_read_when_launch_type_is_none():
  result = subprocess.run(
      [sys.executable, EXAMPLE, '--lp_launch_type=local_mt',
       '--lp_termination_notice_secs=-1'],
      capture_output=True, text=True, timeout=120)
  assert result.returncode != 0
  assert 'termination_notice_secs must be >= 0, got -1' in result.stderr
