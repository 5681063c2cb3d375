"""Install repertory: `pip install -e '.[test]'` (see README.md).

GPU learners: `REPERTORY_TF=cuda pip install -e '.[gpu]'` installs
TensorFlow with CUDA (`tensorflow[and-cuda]`) instead of `tensorflow-cpu`
(docs/performance.md). Both wheels provide the `tensorflow` package: never
install the two into one environment (without `REPERTORY_TF=cuda` the `gpu`
extra installs nothing, so the CUDA wheel never lands beside the CPU one).
"""

import os
import sys

import setuptools

# 'cpu' (default) or 'cuda': which TensorFlow wheel the install brings.
_TF = os.environ.get('REPERTORY_TF', 'cpu')
if _TF not in ('cpu', 'cuda'):
  sys.exit(f'setup.py: REPERTORY_TF={_TF!r}; choose cpu or cuda.')
_TF_VERSION = '~=2.15.1'  # Reverb 0.14 is built against TF 2.15.

INSTALL_REQUIRES = [
    ('tensorflow-cpu' if _TF == 'cpu' else 'tensorflow') + _TF_VERSION,
    'dm-reverb==0.14.0',
    'dm-sonnet==2.0.2',
    'dm-env>=1.6',
    'dm-tree',
    'numpy<2',
    'absl-py',
    'ml_collections',
    'ray==2.60.0',
    'portpicker',
    'cloudpickle',
    'psutil',
    'msgpack>=1.0',  # launch.codec: the channel's wire format (no pickle).
    'grpcio>=1.60',  # repertory.remote (already pulled in by TF and Ray)
    'protobuf>=4.25,<5',  # the runtime of repertory/remote/*_pb2.py
    'pandas',  # Results tables of sweeps, RunResult.progress().
    'tqdm',  # The progress bar on a terminal (loggers.ProgressDisplay).
    'threadpoolctl>=3.1',  # One BLAS thread in node processes.
]

EXTRAS_REQUIRE = {
    'envs': ['bsuite==0.3.6', 'gymnasium==1.4.0', 'minatar==1.0.15'],
    'envpool': ['envpool==1.2.5'],
    'plot': ['matplotlib'],
    # N-player games (OpenSpiel, PettingZoo; pygame: PettingZoo's classic
    # games import it).
    'games': ['open-spiel==2.0.2', 'pettingzoo==1.27.0', 'pygame==2.6.1'],
    # Side-by-side benchmarks only (benchmarks/sb3_side_by_side.py); never
    # imported by repertory.
    # py-spy: benchmarks/actor_profile.py and cpu_breakdown.py sample stacks.
    'bench': ['stable-baselines3==2.9.2', 'py-spy==0.4.3'],
    # Sweeps on a Ray cluster (repertory.sweep); pyarrow 19+ needs NumPy 2.
    'tune': ['ray[tune]==2.60.0', 'pyarrow<19'],
}
if _TF == 'cuda':
  EXTRAS_REQUIRE['gpu'] = ['tensorflow[and-cuda]' + _TF_VERSION]
else:
  # Without REPERTORY_TF=cuda the extra is empty (its marker never holds):
  # the CUDA wheel must not be installed beside tensorflow-cpu.
  EXTRAS_REQUIRE['gpu'] = [
      'tensorflow[and-cuda]' + _TF_VERSION + '; python_version < "0"']
EXTRAS_REQUIRE['test'] = sorted(
    set(EXTRAS_REQUIRE['envs'] + EXTRAS_REQUIRE['plot'] +
        EXTRAS_REQUIRE['games'] + EXTRAS_REQUIRE['tune'] +
        ['pytest', 'pytest-xdist', 'pytest-timeout',
         'cryptography']))  # tests/remote/tls_test.py makes certificates.

setuptools.setup(
    name='repertory',
    version='0.1.0',
    description='Distributed reinforcement learning from small reusable '
    'components, in the style of Acme, Reverb and Launchpad.',
    # repertory_remote: the remote environment client, also installable
    # alone (clients/python/setup.py: no TensorFlow, Reverb or Ray).
    packages=setuptools.find_packages(include=['repertory', 'repertory.*']) +
    ['repertory_remote'],
    package_dir={'repertory_remote': 'clients/python/repertory_remote'},
    package_data={'repertory.remote': ['environment.proto']},
    python_requires='>=3.9,<3.12',  # dm-reverb 0.14 wheels: CPython 3.9-3.11.
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
)
