"""Node processes run NumPy's BLAS on one thread unless the user set one."""

import json
import os
import subprocess
import sys

import cloudpickle
import pytest

from repertory import launch

cloudpickle.register_pickle_by_value(sys.modules[__name__])

# Cores OpenBLAS would use by itself: the test means something only when
# that is more than one.
_CORES = len(os.sched_getaffinity(0))
needs_two_cores = pytest.mark.skipif(
    _CORES < 2, reason='OpenBLAS uses one thread on one core anyway')


def _blas_threads() -> list:
  import threadpoolctl  # pylint: disable=g-import-not-at-top
  import numpy  # pylint: disable=g-import-not-at-top,unused-import
  return [info['num_threads'] for info in threadpoolctl.threadpool_info()
          if info['user_api'] == 'blas']


def _in_fresh_python(env_extra: dict) -> dict:
  """Calls `limit_blas_threads` in a new interpreter; its result and the
  BLAS thread counts before and after."""
  code = (
      'import json, numpy, threadpoolctl\n'
      'from repertory import launch\n'
      'count = lambda: [i["num_threads"] for i in '
      'threadpoolctl.threadpool_info() if i["user_api"] == "blas"]\n'
      'before = count()\n'
      'limited = launch.limit_blas_threads()\n'
      'print(json.dumps({"before": before, "limited": limited, '
      '"after": count()}))\n')
  env = {k: v for k, v in os.environ.items()
         if k not in launch.process.blas_threads.USER_SETTINGS}
  env.update(env_extra)
  out = subprocess.run([sys.executable, '-c', code], env=env, check=True,
                       capture_output=True, text=True, timeout=120)
  return json.loads(out.stdout.strip().splitlines()[-1])


@needs_two_cores
def test_limits_numpy_s_blas_to_one_thread():
  result = _in_fresh_python({})
  assert result['before'] and max(result['before']) > 1
  assert result['limited'] is True
  assert result['after'] == [1] * len(result['after'])


@needs_two_cores
def test_a_thread_count_the_user_set_is_left_alone():
  result = _in_fresh_python({'OPENBLAS_NUM_THREADS': '2'})
  assert result['limited'] is False
  assert result['after'] == result['before'] == [2] * len(result['before'])


def _report(out_path: str) -> None:
  with open(out_path, 'w') as f:
    json.dump({'pid': os.getpid(), 'blas_threads': _blas_threads()}, f)


@needs_two_cores
def test_a_local_mp_node_process_runs_blas_on_one_thread(tmp_path):
  program = launch.Program('blas')
  with program.group('worker'):
    program.add_node(launch.PyNode(_report, str(tmp_path / 'node.json')))
  launch.launch(program, launch_type='local_mp',
                logdir=str(tmp_path / 'logs'), termination_notice_secs=5)
  node = json.loads((tmp_path / 'node.json').read_text())
  assert node['pid'] != os.getpid()
  assert node['blas_threads'] and node['blas_threads'] == [1] * len(
      node['blas_threads'])
