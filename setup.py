"""Install repertory: `pip install -e '.[test]'` (see README.md)."""

import setuptools

INSTALL_REQUIRES = [
    'tensorflow-cpu~=2.15.1',  # Reverb 0.14 is built against TF 2.15.
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
]

EXTRAS_REQUIRE = {
    'envs': ['bsuite==0.3.6', 'gymnasium==1.4.0', 'minatar==1.0.15'],
    'envpool': ['envpool==1.2.5'],
    'plot': ['matplotlib'],
    # N-player games (OpenSpiel, PettingZoo; pygame: PettingZoo's classic
    # games import it).
    'games': ['open-spiel==2.0.2', 'pettingzoo==1.27.0', 'pygame==2.6.1'],
}
EXTRAS_REQUIRE['test'] = sorted(
    set(EXTRAS_REQUIRE['envs'] + EXTRAS_REQUIRE['plot'] +
        EXTRAS_REQUIRE['games'] +
        ['pytest', 'pytest-xdist', 'pytest-timeout']))

setuptools.setup(
    name='repertory',
    version='0.1.0',
    description='Distributed reinforcement learning from small reusable '
    'components, in the style of Acme, Reverb and Launchpad.',
    packages=setuptools.find_packages(include=['repertory', 'repertory.*']),
    python_requires='>=3.9,<3.12',  # dm-reverb 0.14 wheels: CPython 3.9-3.11.
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
)
