"""local_mp starts Ray again when Ray's fixed 30 s start-up wait runs out.

The first `ray.init` is made to fail the way a busy machine makes it fail
(Ray's own message); the second is the real one and the program runs.
"""

import sys

import cloudpickle
import pytest
import ray

from repertory import launch
from repertory.launch.backends import ray_backend

cloudpickle.register_pickle_by_value(sys.modules[__name__])

_TIMEOUT_MESSAGE = ('The current node timed out during startup. This could '
                    'happen because some of the raylet failed to startup or '
                    'the GCS has become overloaded.')


def write(path: str) -> None:
  with open(path, 'w') as f:
    f.write('ran')


def _failing_init(monkeypatch, error, failures):
  real_init = ray.init
  calls = []

  def init(*args, **kwargs):
    calls.append(kwargs.get('address'))
    if len(calls) <= failures:
      raise error
    return real_init(*args, **kwargs)
  monkeypatch.setattr(ray_backend.ray, 'init', init)
  return calls


def test_a_start_up_timeout_is_retried(monkeypatch, tmp_path):
  calls = _failing_init(monkeypatch, Exception(_TIMEOUT_MESSAGE), failures=1)
  program = launch.Program('retry')
  out = tmp_path / 'out'
  program.add_node(launch.PyNode(write, str(out)), label='writer')
  launched = launch.launch(program, launch_type='local_mp',
                           logdir=str(tmp_path / 'logs'),
                           termination_notice_secs=5)
  assert not launched.is_running()
  assert out.read_text() == 'ran'
  assert calls == ['local', 'local']
  assert not ray.is_initialized()


def test_other_start_errors_are_not_retried(monkeypatch, tmp_path):
  calls = _failing_init(monkeypatch, ValueError('bad option'), failures=3)
  program = launch.Program('no_retry')
  program.add_node(launch.PyNode(write, str(tmp_path / 'out')),
                   label='writer')
  with pytest.raises(ValueError, match='bad option'):
    launch.launch(program, launch_type='local_mp',
                  logdir=str(tmp_path / 'logs'), termination_notice_secs=5)
  assert calls == ['local']
  assert not ray.is_initialized()
