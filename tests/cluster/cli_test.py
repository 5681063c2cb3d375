"""`python -m repertory.cluster`: bad input refused in one line, nothing
made."""

import os
import subprocess
import sys

import pytest

from repertory.cluster import netns


def _cli(*args: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, '-m', 'repertory.cluster', *args],
                        capture_output=True, text=True, timeout=60,
                        check=False)


def _state():
  """The clusters' state directories."""
  if not os.path.isdir(netns.STATE_ROOT):
    return []
  return sorted(os.listdir(netns.STATE_ROOT))


def test_an_unknown_command_names_the_choices():
  result = _cli('frob')
  assert result.returncode == 1
  assert result.stderr.strip() == (
      "repertory.cluster: error: command 'frob'; choose one of up, down, "
      'list.')


@pytest.mark.skipif(netns.unavailable() is not None,
                    reason=f'network namespaces: {netns.unavailable()}')
@pytest.mark.parametrize('flag, said', [
    ('--hosts=0', '--hosts=0: a cluster needs at least 1 host.'),
    ('--subnet=foo', "subnet='foo' is not an IPv4 network"),
    ('--subnet=10.77.9.0/30', "subnet='10.77.9.0/30' has no room for 3"),
])
def test_bad_up_flags_are_refused_before_anything_is_made(flag, said):
  before = _state()
  result = _cli('up', flag)
  assert result.returncode == 1, result.stderr
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and said in lines[0], result.stderr
  assert _state() == before
