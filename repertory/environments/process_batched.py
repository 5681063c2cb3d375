"""N environments in worker subprocesses, observations in shared memory.

The design of Gymnasium's `AsyncVectorEnv` and Stable-Baselines3's
`SubprocVecEnv`: each worker process owns a contiguous block of environments
(several environments may share one worker), steps them when the parent
sends their actions through a pipe, and writes step types, rewards,
discounts and observations straight into shared-memory arrays that the
parent reads. Workers start with the 'forkserver' (default) or 'spawn'
context, so a parent that runs threads (Reverb, TensorFlow) is safe. The
fork server preloads `repertory.environments`, so a worker starts in about
0.1 s instead of the seconds a fresh interpreter needs; like 'spawn', it
imports the main module, which must guard its entry point with
`if __name__ == '__main__':`.

Failures never hang: a Python error inside an environment, or a worker that
dies (segfault, `os._exit`, OOM kill), raises `WorkerError` naming the
environment(s) and the spec, and the whole batch is shut down. Workers are
shut down by `close()`, when the object is garbage-collected, at interpreter
exit, and on their own when the parent process dies.
"""

import logging
import multiprocessing
from multiprocessing import connection as mp_connection
from multiprocessing import shared_memory
import os
import signal
import time
import traceback
from typing import Any, Callable, List, Optional, Sequence
import weakref

import cloudpickle
import dm_env
import numpy as np
import tree

from repertory.environments import batched

CONTEXTS = ('forkserver', 'spawn')
_WAIT_LOG_SECONDS = 60.
_CLOSE_TIMEOUT_SECONDS = 5.


class WorkerError(RuntimeError):
  """An environment failed, or its worker process died."""


def _spec_layout(spec) -> List[tuple]:
  return [(tuple(s.shape), np.dtype(s.dtype).str) for s in tree.flatten(spec)]


def _worker_main(worker_index: int, env_ids: Sequence[int],
                 factories: bytes, conn) -> None:
  """Runs in the worker: builds its environments and serves commands.

  Protocol (parent -> worker): ('attach', (block names, N, layout)) once,
  then ('reset', None) | ('step', actions of this worker's environments) |
  ('close', None). Each command but 'close' gets ('ok', None) or
  ('error', (environment id, message, traceback)).
  """
  del worker_index  # Only in the process name.
  signal.signal(signal.SIGINT, signal.SIG_IGN)  # The parent handles Ctrl-C.
  envs, blocks, current = [], [], env_ids[0]
  try:
    for env_id, factory in zip(env_ids, cloudpickle.loads(factories)):
      current = env_id
      envs.append(factory())
    conn.send(('ready', (envs[0].observation_spec(), envs[0].action_spec())))
    command, (names, num_envs, layout) = conn.recv()
    assert command == 'attach', command
    blocks = [shared_memory.SharedMemory(name=name) for name in names]
    _serve(envs, env_ids, conn, [
        np.ndarray((num_envs,) + tuple(shape), dtype=np.dtype(dtype),
                   buffer=block.buf)
        for block, (shape, dtype) in zip(blocks, layout)])
  except (KeyboardInterrupt, BrokenPipeError, EOFError):
    pass  # The parent is gone or going.
  except Exception as e:  # pylint: disable=broad-except
    try:
      conn.send(('error', (current, f'{type(e).__name__}: {e}',
                           traceback.format_exc())))
    except (BrokenPipeError, OSError):
      pass
  finally:
    for env in envs:
      try:
        env.close()
      except Exception:  # pylint: disable=broad-except
        pass
    for block in blocks:
      try:
        block.close()
      except BufferError:  # A view outlived the loop; the OS frees it at exit.
        pass
    conn.close()


def _serve(envs, env_ids, conn, arrays) -> None:
  """The worker's command loop, writing timesteps into `arrays`."""
  step_type, reward, discount, *observation = arrays
  needs_reset = [True] * len(envs)
  conn.send(('ok', None))

  def write(j: int, timestep: dm_env.TimeStep) -> None:
    i = env_ids[j]
    step_type[i], reward[i], discount[i] = batched.timestep_fields(timestep)
    needs_reset[j] = timestep.last()
    leaves = ((timestep.observation,)
              if isinstance(timestep.observation, np.ndarray)
              else tree.flatten(timestep.observation))
    for buffer, leaf in zip(observation, leaves):
      buffer[i] = leaf

  while True:
    command, data = conn.recv()
    if command == 'close':
      return
    for j, env in enumerate(envs):
      try:
        if command == 'reset' or needs_reset[j]:
          write(j, env.reset())
        else:
          write(j, env.step(data[j] if isinstance(data, np.ndarray) else
                            tree.map_structure(lambda a, j=j: a[j], data)))
      except Exception as e:  # pylint: disable=broad-except
        conn.send(('error', (env_ids[j], f'{type(e).__name__}: {e}',
                             traceback.format_exc())))
        return
    conn.send(('ok', None))


def _preload_in_fork_server() -> None:
  """Adds this package to what the fork server imports when it starts.

  Has no effect once the server runs (it starts with the first forkserver
  process of this interpreter); keeps any modules preloaded by others.
  """
  from multiprocessing import forkserver  # pylint: disable=g-import-not-at-top
  server = getattr(forkserver, '_forkserver', None)
  preload = list(getattr(server, '_preload_modules', ['__main__']))
  if 'repertory.environments' not in preload:
    forkserver.set_forkserver_preload(preload + ['repertory.environments'])


class _Resources:
  """What must be released: kept apart from the environment object so that
  `weakref.finalize` can release it without keeping that object alive."""

  def __init__(self):
    self.processes: List[multiprocessing.Process] = []
    self.conns: List[Any] = []
    self.blocks: List[shared_memory.SharedMemory] = []

  def release(self) -> None:
    for conn, process in zip(self.conns, self.processes):
      if process.is_alive():
        try:
          conn.send(('close', None))
        except (BrokenPipeError, OSError):
          pass
    deadline = time.monotonic() + _CLOSE_TIMEOUT_SECONDS
    for process in self.processes:
      process.join(max(0., deadline - time.monotonic()))
      if process.is_alive():
        process.terminate()
        process.join(1.)
      if process.is_alive():
        process.kill()
        process.join(1.)
    for conn in self.conns:
      conn.close()
    for block in self.blocks:
      block.close()
      try:
        block.unlink()
      except FileNotFoundError:
        pass
    self.processes, self.conns, self.blocks = [], [], []


class ProcessBatchedEnvironment(batched.BatchedEnvironment):
  """N environments in `num_workers` subprocesses (see module docstring)."""

  def __init__(self,
               env_factories: Sequence[Callable[[], dm_env.Environment]],
               num_workers: Optional[int] = None,
               context: str = 'forkserver',
               name: str = 'environment',
               step_timeout: Optional[float] = None):
    """Starts the workers and builds the environments in them.

    Args:
      env_factories: one no-argument callable per environment, returning a
        `dm_env.Environment`; pickled with cloudpickle, so lambdas work.
      num_workers: processes to spread the environments over (contiguous
        blocks); default min(N, number of CPUs).
      context: multiprocessing start method, 'forkserver' or 'spawn'.
      name: what the environments are (e.g. their spec), used in errors.
      step_timeout: seconds to wait for the workers in one call before
        raising `WorkerError`; None waits for ever, logging every 60 s.
    """
    num_envs = len(env_factories)
    if num_envs < 1:
      raise ValueError('ProcessBatchedEnvironment needs at least 1 factory.')
    if context not in CONTEXTS:
      raise ValueError(f'Unknown multiprocessing context {context!r}; '
                       f'choose one of {CONTEXTS}.')
    num_workers = num_workers or min(num_envs, os.cpu_count() or 1)
    if not 1 <= num_workers <= num_envs:
      raise ValueError(f'num_workers must be in [1, num_envs={num_envs}], '
                       f'got {num_workers}.')
    self._num_envs = num_envs
    self._name = name
    self._step_timeout = step_timeout
    self._blocks_of = [list(block) for block in
                       np.array_split(np.arange(num_envs), num_workers)]
    self._resources = _Resources()
    self._finalizer = weakref.finalize(self, self._resources.release)
    self._closed = False
    self._broken: Optional[str] = None
    payloads = []
    for env_ids in self._blocks_of:
      try:
        payloads.append(cloudpickle.dumps([env_factories[i] for i in env_ids]))
      except Exception as e:  # pylint: disable=broad-except
        raise TypeError(
            f'Cannot send the factories of environments {env_ids[0]}-'
            f'{env_ids[-1]} of {name!r} to a worker process; they must be '
            f'picklable with cloudpickle: {type(e).__name__}: {e}') from e
    ctx = multiprocessing.get_context(context)
    if context == 'forkserver':
      _preload_in_fork_server()
    try:
      self._start_workers(ctx, payloads)
      self._attach_shared_memory()
    except BaseException:
      self.close()
      raise

  def _start_workers(self, ctx: Any, payloads: List[bytes]) -> None:
    """Starts one worker per block of environments; reads their specs."""
    for w, env_ids in enumerate(self._blocks_of):
      parent_conn, child_conn = ctx.Pipe()
      process = ctx.Process(
          target=_worker_main, name=f'{self._name} worker {w}', daemon=True,
          args=(w, env_ids, payloads[w], child_conn))
      process.start()
      child_conn.close()
      self._resources.processes.append(process)
      self._resources.conns.append(parent_conn)
    replies = self._gather('start')
    self._observation_spec, self._action_spec = replies[0]
    layout = _spec_layout(self._observation_spec)
    for w, (observation_spec, _) in enumerate(replies):
      if _spec_layout(observation_spec) != layout:
        raise WorkerError(
            f'Environments of {self._name!r} disagree on the observation '
            f'spec: environment {self._blocks_of[w][0]} has '
            f'{observation_spec}, environment 0 has '
            f'{self._observation_spec}.')

  def _attach_shared_memory(self) -> None:
    """One shared block per timestep field, [N, ...], which the workers
    write their environments' rows of."""
    num_envs = self._num_envs
    buffer_layout = [((), np.dtype(np.int8).str),
                     ((), np.dtype(np.float32).str),
                     ((), np.dtype(np.float32).str)] + _spec_layout(
                         self._observation_spec)
    arrays = []
    for shape, dtype in buffer_layout:
      size = max(1, num_envs * int(np.prod(shape, dtype=np.int64)) *
                 np.dtype(dtype).itemsize)
      block = shared_memory.SharedMemory(create=True, size=size)
      self._resources.blocks.append(block)
      arrays.append(np.ndarray((num_envs,) + shape, dtype=np.dtype(dtype),
                               buffer=block.buf))
    self._step_type, self._reward, self._discount, *self._observation = (
        arrays)
    names = [block.name for block in self._resources.blocks]
    for conn in self._resources.conns:
      conn.send(('attach', (names, num_envs, buffer_layout)))
    self._gather('attach')

  @property
  def num_envs(self) -> int:
    return self._num_envs

  @property
  def num_workers(self) -> int:
    return len(self._blocks_of)

  def observation_spec(self):
    return self._observation_spec

  def action_spec(self):
    return self._action_spec

  def reset(self) -> batched.BatchedTimeStep:
    self._check_usable()
    for conn in self._resources.conns:
      self._send(conn, ('reset', None))
    self._gather('reset')
    return self._timestep()

  def step(self, actions) -> batched.BatchedTimeStep:
    self._check_usable()
    batched.check_actions(actions, self._num_envs)
    flat = isinstance(actions, np.ndarray)
    for conn, env_ids in zip(self._resources.conns, self._blocks_of):
      lo, hi = env_ids[0], env_ids[-1] + 1
      part = actions[lo:hi] if flat else tree.map_structure(
          lambda a, lo=lo, hi=hi: a[lo:hi], actions)
      self._send(conn, ('step', part))
    self._gather('step')
    return self._timestep()

  def close(self) -> None:
    if not self._closed:
      self._closed = True
      # Drop our views of the shared memory before it is closed.
      self._step_type = self._reward = self._discount = None
      self._observation = []
      self._finalizer()

  def _timestep(self) -> batched.BatchedTimeStep:
    observation = [x.copy() for x in self._observation]
    return batched.BatchedTimeStep(
        self._step_type.copy(), self._reward.copy(), self._discount.copy(),
        tree.unflatten_as(self._observation_spec, observation))

  def _check_usable(self) -> None:
    if self._broken:
      raise WorkerError(f'This batch of {self._name!r} is unusable: '
                        f'{self._broken}')
    if self._closed:
      raise WorkerError(f'This batch of {self._name!r} is closed.')

  def _send(self, conn, message) -> None:
    try:
      conn.send(message)
    except (BrokenPipeError, OSError):
      pass  # The worker died; `_gather` reports it with its exit code.

  def _fail(self, message: str) -> WorkerError:
    self._broken = message
    self.close()
    return WorkerError(message)

  def _describe(self, w: int) -> str:
    env_ids = self._blocks_of[w]
    envs = (f'environment {env_ids[0]}' if len(env_ids) == 1 else
            f'environments {env_ids[0]}-{env_ids[-1]}')
    return f'worker {w} ({envs} of {self._name!r})'

  def _gather(self, what: str) -> List[Any]:
    """Waits for one reply from every worker; raises on any failure."""
    conns = self._resources.conns
    index_of = {id(conn): w for w, conn in enumerate(conns)}
    replies: List[Any] = [None] * len(conns)
    pending = list(conns)
    start = last_log = time.monotonic()
    while pending:
      ready = mp_connection.wait(pending, timeout=1.)
      for conn in ready:
        w = index_of[id(conn)]
        try:
          status, payload = conn.recv()
        except (EOFError, OSError):
          process = self._resources.processes[w]
          process.join(1.)
          raise self._fail(
              f'{self._describe(w)} died with exit code {process.exitcode} '
              f'during {what}.') from None
        if status == 'error':
          env_id, error, trace = payload
          raise self._fail(
              f'environment {env_id} of {self._name!r} (in worker {w}) raised '
              f'{error} during {what}.\nWorker traceback:\n{trace}')
        replies[w] = payload
        pending.remove(conn)
      now = time.monotonic()
      for conn in pending:
        w = index_of[id(conn)]
        process = self._resources.processes[w]
        if not process.is_alive() and not conn.poll():
          raise self._fail(f'{self._describe(w)} died with exit code '
                           f'{process.exitcode} during {what}.')
      if pending and now - last_log > _WAIT_LOG_SECONDS:
        last_log = now
        logging.warning('Still waiting %.0f s for %s to finish %s.',
                        now - start, ', '.join(
                            self._describe(index_of[id(c)]) for c in pending),
                        what)
      if (pending and self._step_timeout is not None and
          now - start > self._step_timeout):
        raise self._fail(
            f'{", ".join(self._describe(index_of[id(c)]) for c in pending)} '
            f'did not finish {what} within step_timeout='
            f'{self._step_timeout} s.')
    return replies
