"""SEED's actor: steps environments only; the inference server acts.

This module must not import TensorFlow (tested): an actor process of SEED
holds environments and a client of the server, nothing else.
"""

import os
from typing import Any, Optional

import numpy as np

from repertory import core
from repertory import launch
from repertory.components.actor_critic import config as config_lib
from repertory.components.evaluation import episodes


class SeedActor(core.Worker):
  """Steps `num_envs` environments; one server call per batched step,
  over a direct TCP channel (default) or through the server's handle."""

  def __init__(self,
               actor_id: int,
               env_spec: str,
               num_envs: int,
               seed: int,
               server: Any,
               batched_env_kind: str = 'auto',
               report_every: int = 20,
               counter: Any = None,
               monitor: Any = None,
               transport: str = 'tcp'):
    """Builds the environments.

    Args:
      actor_id: this actor's id (unique among the server's actors).
      env_spec: an environment spec for `repertory.environments`.
      num_envs: environments stepped together (one server call per step).
      seed: environment i gets seed + i.
      server: the inference server's client (a dereferenced handle).
      batched_env_kind: see `ActorCriticConfig.batched_env_kind`.
      report_every: send steps and finished episodes every this many steps.
      counter: optional counter client (actor_steps).
      monitor: optional run monitor client (finished episodes).
      transport: 'tcp' (a `launch.ChannelClient` to the server's
        `channel_address()`) or 'handle' (`server.inference` itself).
    """
    if transport not in launch.TRANSPORTS:
      raise ValueError(f'SeedActor transport={transport!r}; choose one of '
                       f'{launch.TRANSPORTS}.')
    from repertory import environments  # pylint: disable=g-import-not-at-top
    self._actor_id = np.int64(actor_id)
    # A new id per actor process: the server resets this actor's states when
    # it sees a new one (a restarted actor).
    self._run_id = np.int64(int.from_bytes(os.urandom(7), 'little'))
    self._num_envs = num_envs
    self._env = environments.make_batched(
        env_spec, num_envs, seed=seed,
        kind=config_lib.batched_env_kind(batched_env_kind, env_spec))
    self._server = server
    self._transport = transport
    self._channel = None
    self._report_every = report_every
    self._reporter = episodes.ActorReporter(
        counter, monitor, min_interval_s=episodes.REPORT_INTERVAL_S)
    self._episodes = episodes.EpisodeTracker(num_envs)
    self._timestep = None
    self.steps = 0

  def run(self, num_steps: Optional[int] = None) -> None:
    """Acts until the program stops, or for `num_steps` more batched steps
    (then it can be called again and continues where it stopped)."""
    stop = launch.stop_event() if num_steps is None else None
    try:
      self._act(stop, num_steps)
    except Exception:  # pylint: disable=broad-except
      if stop is not None and stop.is_set():
        return  # The server went away while stopping: expected.
      raise
    finally:
      if num_steps is None:
        self.close()

  def close(self) -> None:
    self._env.close()
    if self._channel is not None:
      self._channel.close()

  def _inference_fn(self):
    if self._transport == 'handle':
      return self._server.inference
    if self._channel is None:
      self._channel = launch.ChannelClient(self._server.channel_address())
    return self._channel.call

  def _act(self, stop, num_steps: Optional[int]) -> None:
    inference = self._inference_fn()
    if self._timestep is None:
      self._timestep = self._env.reset()
      self._episodes.observe(self._timestep.step_type, self._timestep.reward)
    timestep = self._timestep
    end = None if num_steps is None else self.steps + num_steps
    every = self._report_every
    while (stop is None or not stop.is_set()) and (
        end is None or self.steps < end):
      action = inference(
          self._actor_id, self._run_id, timestep.step_type, timestep.reward,
          timestep.discount, timestep.observation)
      timestep = self._env.step(action)
      self._episodes.observe(timestep.step_type, timestep.reward)
      self.steps += 1
      if self.steps % every == 0:
        self._reporter.report(every * self._num_envs, *self._episodes.pop())
    self._timestep = timestep
    if end is None:  # Stopping: report the steps since the last report.
      self._reporter.report((self.steps % every) * self._num_envs,
                            *self._episodes.pop())
    self._reporter.flush()
