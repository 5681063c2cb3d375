"""Runs `python -m repertory.run <flags>` on a Ray cluster started for it on
127.0.0.1 (Ray's token authentication on, as `--lp_launch_type=ray` needs;
the tests' `repertory.testing.loopback_ray_cluster`), then shuts the cluster
down. Exits with the run's exit status.

    python benchmarks/on_loopback_ray.py --agent=neurd --league=pfsp \\
        --env=openspiel:kuhn_poker \\
        --logdir=/tmp/neurd_ray
"""

import os
import subprocess
import sys
import time

from repertory import testing


def main(flags) -> int:
  with testing.loopback_ray_cluster(num_cpus=8) as cluster:
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, '-m', 'repertory.run', '--lp_launch_type=ray',
         f'--ray_address={cluster.address}', *flags], check=False,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    print(f'on_loopback_ray: exit {result.returncode} after '
          f'{time.monotonic() - start:.1f} s (the cluster started before).',
          flush=True)
  return result.returncode


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
