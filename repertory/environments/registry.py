"""`make(spec)`: the one front door to every environment suite.

Spec forms (see `SPEC_FORMS`):

  catch                  built-in numpy Catch, 10 rows x 5 columns
  catch:<rows>x<cols>    built-in Catch of another size, e.g. catch:5x5
  bsuite:<id>            a bsuite environment, e.g. bsuite:memory_len/3
  gym:<id>               a gymnasium environment, e.g. gym:CartPole-v1
  minatar:<game>         a MinAtar game, e.g. minatar:breakout
  atari:<Game>           Atari via EnvPool with the usual preprocessing
  envpool:<task>         any EnvPool task, e.g. envpool:CartPole-v1
  <registered name>      anything added with `register(name, factory)`

Optional suites are imported only when a spec asks for them, so importing
`repertory.environments` pulls in neither TensorFlow nor any suite.
"""

import inspect
import re
from typing import Any, Callable, Dict, Optional, Union

import dm_env

from repertory.environments import catch as catch_lib

SPEC_FORMS = (
    "'catch' or 'catch:<rows>x<columns>' (built in)",
    "'bsuite:<id>' (e.g. 'bsuite:catch/0'; pip install 'repertory[envs]')",
    "'gym:<id>' (e.g. 'gym:CartPole-v1'; pip install 'repertory[envs]')",
    "'minatar:<game>' (e.g. 'minatar:breakout'; pip install 'repertory[envs]')",
    "'atari:<Game>' (e.g. 'atari:Pong'; pip install 'repertory[envpool]')",
    "'envpool:<task>' (e.g. 'envpool:CartPole-v1'; "
    "pip install 'repertory[envpool]')",
    "'openspiel:<game>' (N players, e.g. 'openspiel:kuhn_poker'; "
    "pip install 'repertory[games]')",
    "'pettingzoo:<family>.<game>[/parallel]' (N players, e.g. "
    "'pettingzoo:classic.tictactoe_v3'; pip install 'repertory[games]')",
    "'remote:<spec>' (remote clients play; <spec> gives the specs, e.g. "
    "'remote:catch'; docs/remote.md)",
)

# suite prefix -> (python module it needs, pip extra that provides it).
_SUITE_REQUIREMENTS = {
    'bsuite': ('bsuite', 'repertory[envs]'),
    'gym': ('gymnasium', 'repertory[envs]'),
    'minatar': ('minatar', 'repertory[envs]'),
    'atari': ('envpool', 'repertory[envpool]'),
    'envpool': ('envpool', 'repertory[envpool]'),
    'openspiel': ('pyspiel', 'repertory[games]'),
    'pettingzoo': ('pettingzoo', 'repertory[games]'),
}

# Factories registered by users: exact names, and prefixes ending in ':'.
_REGISTRY: Dict[str, Callable[..., Any]] = {}

EnvironmentFactory = Callable[..., Any]
Spec = Union[str, EnvironmentFactory, dm_env.Environment]


class UnknownEnvironmentError(ValueError):
  """An environment spec that no suite or registration understands."""


class MissingSuiteError(ImportError):
  """A spec whose suite's pip extra is not installed."""


def register(name: str, factory: EnvironmentFactory) -> None:
  """Adds a custom spec to `make`.

  Args:
    name: an exact spec ('my_env'), or a prefix ending in ':' ('mysuite:')
      that handles every 'mysuite:<id>'.
    factory: for an exact name, `factory(seed=..., **kwargs)`; for a prefix,
      `factory(id, seed=..., **kwargs)`. It may return a
      `dm_env.Environment` or a `gymnasium.Env` (adapted automatically).
  """
  if not name or not isinstance(name, str):
    raise ValueError(f'register needs a non-empty string name, got {name!r}.')
  prefix = name.split(':', 1)[0]
  if prefix in _SUITE_REQUIREMENTS or name in ('catch', 'catch:'):
    raise ValueError(f'{name!r} is a built-in spec form and cannot be '
                     're-registered.')
  if not callable(factory):
    raise TypeError(f'register({name!r}, ...) needs a callable factory, got '
                    f'{factory!r}.')
  _REGISTRY[name] = factory


def registered() -> Dict[str, EnvironmentFactory]:
  """The custom specs added with `register`."""
  return dict(_REGISTRY)


# Launch types whose nodes run in other processes (which do not see this
# process's `register` calls).
OTHER_PROCESS_LAUNCH_TYPES = ('local_mp', 'ray')


def registered_factory(spec: str) -> Optional[EnvironmentFactory]:
  """The factory `register` added for `spec` (exact or prefix), else None."""
  if spec in _REGISTRY:
    return _REGISTRY[spec]
  prefix, sep, _ = spec.partition(':')
  return _REGISTRY.get(prefix + ':') if sep else None


def check_reaches_nodes(spec: Any, launch_type: str) -> None:
  """Refuses, with the fix, a spec registered in this process only when the
  nodes run in other processes (where it would be unknown).

  Raises:
    ValueError: naming the spec, the launch type and the two fixes.
  """
  if (not isinstance(spec, str) or launch_type not in
      OTHER_PROCESS_LAUNCH_TYPES or registered_factory(spec) is None):
    return
  factory = registered_factory(spec)
  name = getattr(factory, '__qualname__', repr(factory))
  raise ValueError(
      f'Environment {spec!r} is registered in this process only, and '
      f'launch type {launch_type!r} builds environments in other processes. '
      f'Pass the factory itself as the environment (env={name}: it is '
      'pickled to every node), or use launch type local_mt.')


def _known_forms() -> str:
  forms = list(SPEC_FORMS)
  if _REGISTRY:
    forms.append('registered: ' + ', '.join(repr(n) for n in sorted(_REGISTRY)))
  return '; '.join(forms)


def _unknown(spec: str, why: str = '') -> UnknownEnvironmentError:
  return UnknownEnvironmentError(
      f'Unknown environment spec {spec!r}{": " + why if why else ""}. '
      f'Known forms: {_known_forms()}.')


def _require(spec: str, suite: str) -> None:
  module, extra = _SUITE_REQUIREMENTS[suite]
  try:
    __import__(module)
  except ImportError as e:
    raise MissingSuiteError(
        f'Environment spec {spec!r} needs the {module!r} package, which is not '
        f'installed: pip install \'{extra}\'. Known forms: {_known_forms()}.'
    ) from e


def _adapt(env: Any, seed: Optional[int], origin: Any) -> dm_env.Environment:
  """Returns `env` as a dm_env.Environment (adapting a gymnasium.Env)."""
  if isinstance(env, dm_env.Environment):
    return env
  try:
    import gymnasium  # pylint: disable=g-import-not-at-top
  except ImportError:
    gymnasium = None
  if gymnasium is not None and isinstance(env, gymnasium.Env):
    from repertory.environments import gym_adapter  # pylint: disable=g-import-not-at-top
    return gym_adapter.GymAdapter(env, seed=seed)
  raise TypeError(f'{origin!r} produced {env!r}, which is neither a '
                  'dm_env.Environment nor a gymnasium.Env.')


def _call_factory(factory: EnvironmentFactory, seed, *args, **kwargs):
  """Calls factory, passing `seed` only if its signature takes one."""
  try:
    parameters = inspect.signature(factory).parameters
  except (TypeError, ValueError):
    parameters = {}
  takes_seed = 'seed' in parameters or any(
      p.kind == inspect.Parameter.VAR_KEYWORD for p in parameters.values())
  if takes_seed:
    return factory(*args, seed=seed, **kwargs), True
  return factory(*args, **kwargs), False


def _make_catch(spec: str, rest: Optional[str], seed, **kwargs):
  if rest:
    match = re.fullmatch(r'(\d+)x(\d+)', rest)
    if not match:
      raise _unknown(spec, "catch sizes are written 'catch:<rows>x<columns>', "
                     "e.g. 'catch:5x5'")
    kwargs = dict(rows=int(match.group(1)), columns=int(match.group(2)),
                  **kwargs)
  return catch_lib.Catch(seed=seed, **kwargs)


def _make_bsuite(spec: str, bsuite_id: str, seed, **kwargs):
  from bsuite import bsuite as bsuite_lib  # pylint: disable=g-import-not-at-top
  from bsuite import sweep  # pylint: disable=g-import-not-at-top
  if bsuite_id not in sweep.SETTINGS:
    examples = ', '.join(list(sweep.SETTINGS)[::100][:5])
    raise _unknown(spec, f'bsuite has no id {bsuite_id!r} (ids look like '
                   f'{examples}; see bsuite.sweep.SWEEP)')
  name = bsuite_id.split('/')[0]
  load = bsuite_lib.EXPERIMENT_NAME_TO_ENVIRONMENT[name]
  settings = dict(sweep.SETTINGS[bsuite_id])
  if seed is not None and 'seed' in inspect.signature(load).parameters:
    settings['seed'] = seed
  settings.update(kwargs)
  return load(**settings)


def _make_gym(spec: str, gym_id: str, seed, **kwargs):
  import gymnasium  # pylint: disable=g-import-not-at-top
  from repertory.environments import gym_adapter  # pylint: disable=g-import-not-at-top
  if gym_id not in gymnasium.registry:
    raise _unknown(spec, f'gymnasium has no environment {gym_id!r} '
                   '(see gymnasium.registry)')
  return gym_adapter.GymAdapter(gymnasium.make(gym_id, **kwargs), seed=seed)


def _make_minatar(spec: str, game: str, seed, **kwargs):
  from repertory.environments import minatar_adapter  # pylint: disable=g-import-not-at-top
  if game not in minatar_adapter.GAMES:
    raise _unknown(spec, f'MinAtar games are {", ".join(minatar_adapter.GAMES)}')
  return minatar_adapter.MinAtarEnvironment(game, seed=seed, **kwargs)


def _make_atari(spec: str, game: str, seed, **kwargs):
  from repertory.environments import envpool_adapter  # pylint: disable=g-import-not-at-top
  try:
    task = envpool_adapter.atari_task(game)
  except ValueError as e:
    raise _unknown(spec, str(e)) from None
  channels_last = kwargs.pop('channels_last', True)
  return envpool_adapter.EnvPoolEnvironment(
      task, seed=seed, channels_last=channels_last,
      **envpool_adapter.atari_kwargs(**kwargs))


def _make_envpool(spec: str, task: str, seed, **kwargs):
  from repertory.environments import envpool_adapter  # pylint: disable=g-import-not-at-top
  if task not in envpool_adapter.all_tasks():
    raise _unknown(spec, f'EnvPool has no task {task!r} (see '
                   'envpool.list_all_envs())')
  return envpool_adapter.EnvPoolEnvironment(task, seed=seed, **kwargs)


def _make_multiagent(spec: str, rest: str, seed, **kwargs):
  from repertory.environments import multiagent  # pylint: disable=g-import-not-at-top
  make_game = (multiagent.make_openspiel if spec.startswith('openspiel:')
               else multiagent.make_pettingzoo)
  try:
    return make_game(rest, seed=seed, **kwargs)
  except ValueError as e:
    raise _unknown(spec, str(e).rstrip('.')) from None


_SUITES = {
    'bsuite': _make_bsuite,
    'gym': _make_gym,
    'minatar': _make_minatar,
    'atari': _make_atari,
    'envpool': _make_envpool,
    'openspiel': _make_multiagent,
    'pettingzoo': _make_multiagent,
}


def make(spec: Spec, seed: Optional[int] = None,
         **kwargs) -> dm_env.Environment:
  """Creates one environment as a `dm_env.Environment`.

  Args:
    spec: a spec string (see the module docstring), or a callable returning a
      `dm_env.Environment` / `gymnasium.Env` (called with `seed=seed` if it
      takes a `seed` argument), or an environment instance (returned as is;
      a `gymnasium.Env` is adapted and seeded on its first reset).
    seed: the environment's random seed; None for a random one.
    **kwargs: options for the suite (e.g. `sticky_actions=True` for atari,
      gymnasium.make's keyword arguments for gym).

  Returns:
    A dm_env.Environment.

  Raises:
    UnknownEnvironmentError: the spec names no known form; the message lists
      the forms.
    MissingSuiteError: the spec's suite is not installed; the message names
      the pip extra.
  """
  if not isinstance(spec, str):
    if isinstance(spec, dm_env.Environment):
      return spec
    if callable(spec) and not _is_gym_env(spec):
      env, took_seed = _call_factory(spec, seed, **kwargs)
      return _adapt(env, None if took_seed else seed, spec)
    return _adapt(spec, seed, spec)
  if spec in _REGISTRY:
    env, took_seed = _call_factory(_REGISTRY[spec], seed, **kwargs)
    return _adapt(env, None if took_seed else seed, spec)
  prefix, sep, rest = spec.partition(':')
  if sep and prefix + ':' in _REGISTRY:
    env, took_seed = _call_factory(_REGISTRY[prefix + ':'], seed, rest,
                                   **kwargs)
    return _adapt(env, None if took_seed else seed, spec)
  if prefix == 'remote' and sep and rest:  # Specs/evaluation: repertory.remote
    return make(rest, seed=seed, **kwargs)
  if prefix == 'catch':
    return _make_catch(spec, rest if sep else None, seed, **kwargs)
  if prefix in _SUITES and sep and rest:
    _require(spec, prefix)
    return _SUITES[prefix](spec, rest, seed, **kwargs)
  raise _unknown(spec)


def check_spec(spec: str) -> None:
  """Raises as `make` would for a spec of an unknown form or a suite that is
  not installed, without creating an environment."""
  if spec in _REGISTRY:
    return
  prefix, sep, rest = spec.partition(':')
  if sep and prefix + ':' in _REGISTRY:
    return
  if prefix == 'remote' and sep and rest:
    return check_spec(rest)
  if prefix == 'catch':
    if sep and not re.fullmatch(r'(\d+)x(\d+)', rest):
      raise _unknown(spec, "catch sizes are written 'catch:<rows>x<columns>', "
                     "e.g. 'catch:5x5'")
    return
  if prefix in _SUITES and sep and rest:
    _require(spec, prefix)
    return
  raise _unknown(spec)


def _is_gym_env(obj: Any) -> bool:
  try:
    import gymnasium  # pylint: disable=g-import-not-at-top
  except ImportError:
    return False
  return isinstance(obj, gymnasium.Env)
