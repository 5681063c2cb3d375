"""The environment-only actor of central inference: its environments act by
calls to an `InferenceServer`, in groups whose calls overlap its own work.

With one group (SEED RL's actor, Espeholt et al. 2020) each batched step is
one call, and the actor waits while the server acts. With G groups each
group is a call of its own, sent as soon as that group has stepped, so the
actor steps one group while the server acts for the others (the
double-buffered sampling of Sample Factory, Petrenko et al. 2020,
arXiv:2006.11751, is G = 2):

```
 actor:   step A | send A | step B | send B | receive A, step A | ...
 server:          | act A           | act B                     | ...
```

The server sees each group as an actor of its own: group g of actor i is
actor `i * G + g`, with the group's environments (`envs_per_actor / G` for
the server). The groups' environments count as one batch, in order, for
the actor's episodes and reports (SEED's actor seeds them as one batch).

This module must not import TensorFlow: SEED's actor processes run it.
"""

from typing import Any, Sequence

import numpy as np

from repertory.components.actors.batched import BatchedActor
from repertory.components.inference.client import ServerPolicy


class _EnvironmentGroups:
  """The groups' environments: the one batch `BatchedActor` counts and
  closes."""

  def __init__(self, environments: Sequence[Any]):
    self.groups = list(environments)
    self.num_envs = sum(e.num_envs for e in self.groups)

  def close(self) -> None:
    for environment in self.groups:
      environment.close()


class ServerActor(BatchedActor):
  """Steps G groups of batched environments; each group acts by its own
  calls to the server (see the module doc).

  Example (SEED's actor, 64 environments in two groups)::

    groups = [environments.make_batched('catch', 32, seed=32 * g)
              for g in range(2)]
    actor = inference.ServerActor(groups, actor_id=0, server=server,
                                  counter=counter, monitor=monitor)
    actor.run()      # In a PyClassNode: until launch.stop().

  Args:
    environments: G batched, auto-resetting environments of one size.
    actor_id: this actor's id; the server knows its groups as
      `actor_id * G + g`.
    server: the inference server's client (a dereferenced handle).
    transport: 'tcp' or 'handle' (see `ServerPolicy`; through the handle a
      group's call is made when its actions are needed, so G > 1 overlaps
      nothing).
    counter, monitor, report_every, min_report_interval_s: as for
      `BatchedActor`; a batched step steps every group once.
  """

  def __init__(self,
               environments: Sequence[Any],
               actor_id: int,
               server: Any,
               transport: str = 'tcp',
               counter: Any = None,
               monitor: Any = None,
               report_every: int = 20,
               min_report_interval_s: float = 0.0):
    sizes = sorted({e.num_envs for e in environments})
    if len(sizes) != 1:
      raise ValueError('ServerActor: the groups must hold as many '
                       f'environments each (the server serves one size), got '
                       f'sizes {[e.num_envs for e in environments]}.')
    num_groups = len(environments)
    self._policies = [ServerPolicy(actor_id * num_groups + g, server,
                                   transport) for g in range(num_groups)]
    super().__init__(_EnvironmentGroups(environments), None, None, counter,
                     monitor, report_every=report_every,
                     min_report_interval_s=min_report_interval_s)

  def close(self) -> None:
    self._environment.close()
    for policy in self._policies:
      policy.close()

  def _start(self) -> None:
    timesteps = []
    for environment, policy in zip(self._environment.groups, self._policies):
      timesteps.append(environment.reset())
      policy.send(timesteps[-1])
    self._observe_episodes(timesteps)

  def _step(self) -> None:
    """Every group once: its actions, its step, its next call."""
    timesteps = []
    for environment, policy in zip(self._environment.groups, self._policies):
      timesteps.append(environment.step(policy.receive()))
      policy.send(timesteps[-1])
    self._observe_episodes(timesteps)
    self.steps += 1

  def _observe_episodes(self, timesteps: Sequence[Any]) -> None:
    self._timestep = timesteps
    if len(timesteps) == 1:
      self._episodes.observe(timesteps[0].step_type, timesteps[0].reward)
    else:
      self._episodes.observe(
          np.concatenate([t.step_type for t in timesteps]),
          np.concatenate([t.reward for t in timesteps]))
