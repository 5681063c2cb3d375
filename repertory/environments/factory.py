"""`make_batched(spec, num_envs)`: a batch of environments of one spec."""

import functools
from typing import Optional

from repertory.environments import batched
from repertory.environments import registry

BATCHED_KINDS = ('serial', 'process', 'envpool')


def _envpool_task(spec) -> Optional[tuple]:
  """(task, extra options) for specs EnvPool can batch natively, else None."""
  if not isinstance(spec, str):
    return None
  prefix, _, rest = spec.partition(':')
  if prefix == 'envpool' and rest:
    return rest, {}
  if prefix == 'atari' and rest:
    from repertory.environments import envpool_adapter  # pylint: disable=g-import-not-at-top
    return envpool_adapter.atari_task(rest), {'atari': True}
  if prefix == 'gym' and rest:
    from repertory.environments import envpool_adapter  # pylint: disable=g-import-not-at-top
    if rest in envpool_adapter.all_tasks():
      return rest, {}
  return None


def make_batched(spec: registry.Spec,
                 num_envs: int,
                 seed: Optional[int] = None,
                 kind: str = 'serial',
                 num_workers: Optional[int] = None,
                 num_threads: int = 1,
                 context: str = 'forkserver',
                 **kwargs) -> batched.BatchedEnvironment:
  """Creates `num_envs` environments of `spec` behind one batched interface.

  Args:
    spec: anything `make` takes except an environment instance (a string
      spec, or a factory).
    num_envs: N.
    seed: environment i gets seed + i; None gives each a random seed.
    kind: 'serial' (in this process), 'process' (worker subprocesses with
      shared-memory observations) or 'envpool' (EnvPool's C++ thread pool;
      only for 'envpool:<task>', 'atari:<Game>' and 'gym:<id>' ids that
      EnvPool also provides).
    num_workers: 'process' only: worker processes (default min(N, CPUs)).
    num_threads: 'envpool' only: EnvPool threads.
    context: 'process' only: 'forkserver' (default) or 'spawn'.
    **kwargs: passed to `make` for every environment (or to EnvPool).

  Returns:
    A `BatchedEnvironment`.
  """
  if kind not in BATCHED_KINDS:
    raise ValueError(f'Unknown batched environment kind {kind!r}; choose one '
                     f'of {BATCHED_KINDS}.')
  if not isinstance(num_envs, int) or num_envs < 1:
    raise ValueError(f'num_envs must be a positive int, got {num_envs!r}.')
  if kind == 'envpool':
    if isinstance(spec, str):
      prefix = spec.partition(':')[0]
      if prefix in ('envpool', 'atari', 'gym'):
        registry._require(spec, 'envpool')  # pylint: disable=protected-access
    task = _envpool_task(spec)
    if task is None:
      raise ValueError(
          f"kind='envpool' cannot batch {spec!r}: it takes 'envpool:<task>', "
          "'atari:<Game>' or a 'gym:<id>' that EnvPool provides; use "
          "kind='serial' or kind='process'.")
    from repertory.environments import envpool_adapter  # pylint: disable=g-import-not-at-top
    task, extra = task
    if extra.get('atari'):
      channels_last = kwargs.pop('channels_last', True)
      kwargs = envpool_adapter.atari_kwargs(**kwargs)
      kwargs['channels_last'] = channels_last
    return envpool_adapter.EnvPoolBatchedEnvironment(
        task, num_envs, seed=seed, num_threads=num_threads, **kwargs)
  if not callable(spec) and not isinstance(spec, str):
    raise TypeError(f'make_batched needs a spec string or a factory, got '
                    f'{spec!r} (an instance cannot be copied {num_envs} '
                    'times).')
  # Build the first environment here for 'serial' so that a bad spec fails
  # at once with make's message; 'process' workers report it likewise.
  factories = [
      functools.partial(registry.make, spec,
                        None if seed is None else seed + i, **kwargs)
      for i in range(num_envs)]
  if kind == 'serial':
    return batched.SerialBatchedEnvironment(factories)
  if isinstance(spec, str):
    # Fail fast, in this process, on specs that cannot work anywhere.
    registry.check_spec(spec)
  from repertory.environments import process_batched  # pylint: disable=g-import-not-at-top
  return process_batched.ProcessBatchedEnvironment(
      factories, num_workers=num_workers, context=context,
      name=spec if isinstance(spec, str) else getattr(spec, '__name__',
                                                      repr(spec)))
