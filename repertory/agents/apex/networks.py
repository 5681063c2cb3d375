"""Ape-X's feed-forward dueling Q network (Wang et al. 2016; Horgan et al.
2018)."""

from typing import Any, Optional, Sequence

import sonnet as snt
import tensorflow as tf

from repertory.components import networks
from repertory.components import specs


class DuelingQNetwork(snt.Module):
  """MLP (or MinAtar, `torso='minatar'`) torso -> dueling Q head;
  `[B, ...]` observations -> `[B, A]`."""

  def __init__(self, num_actions: int, obs_rank: int,
               torso_sizes: Sequence[int] = (64, 64),
               head_sizes: Sequence[int] = (64,),
               torso: str = 'mlp',
               name: Optional[str] = None):
    super().__init__(name=name)
    self._torso = (networks.MinAtarTorso() if torso == 'minatar' else
                   networks.MLPTorso(torso_sizes, obs_rank=obs_rank))
    self._head = networks.DuelingQHead(num_actions, head_sizes)
    self.num_actions = num_actions

  def __call__(self, observation: tf.Tensor) -> tf.Tensor:
    return self._head(self._torso(observation))


def make_network(environment_spec: Any, config: Any,
                 build: bool = True) -> DuelingQNetwork:
  """Builds the network for an `EnvironmentSpec` and an Ape-X `Config`, and
  creates its variables with one dummy call (unless `build` is False:
  `networks.GraphFunction` creates them in its graph)."""
  observation_spec = environment_spec.observations
  num_actions = getattr(environment_spec.actions, 'num_values', None)
  if num_actions is None:
    raise ValueError(f'Ape-X needs a discrete action spec (DiscreteArray), '
                     f'got {environment_spec.actions!r}.')
  network = DuelingQNetwork(int(num_actions),
                            obs_rank=max(1, len(observation_spec.shape)),
                            torso_sizes=config.torso_sizes,
                            head_sizes=config.head_sizes,
                            torso=specs.resolve_torso(config.torso,
                                                      observation_spec))
  if build:
    network(tf.zeros((1,) + tuple(observation_spec.shape), tf.float32))
  return network
