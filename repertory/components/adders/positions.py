"""Writes positions: single items with no time axis, e.g. AlphaZero's
(observation, legal moves, search policy, outcome) once a game is over.

    adder = PositionAdder(client, 'positions')
    adder.set_policy_version(version)
    adder.add_position({'observation': o, 'legal_actions': m,
                        'search_policy': pi, 'outcome': np.float32(z)})

Each item is the given fields plus `policy_version` and `actor_id` (as every
adder's items), one step, inserted with priority 1. A table over them is
sampled a position at a time, so a batch mixes positions of many games.
"""

from typing import Any, Mapping

from repertory.components.adders import base


def position_signature(example: Mapping[str, Any]) -> dict:
  """The table signature of `PositionAdder` items whose fields are like
  `example` (numpy arrays or specs)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  signature = {name: base.tensor_spec(value)
               for name, value in example.items()}
  signature['policy_version'] = tf.TensorSpec((), tf.int64)
  signature['actor_id'] = tf.TensorSpec((), tf.int32)
  return signature


class PositionAdder(base.ReverbAdder):
  """One item per `add_position`; positions are not timesteps, so the
  timestep interface (`add_first`, `add`) is refused."""

  signature = staticmethod(position_signature)

  def __init__(self, client: Any, table: str, actor_id: int = 0,
               max_in_flight_items: int = 16, flush_timeout_s: float = 30.0):
    super().__init__(client, table, 1, actor_id,
                     max_in_flight_items=max_in_flight_items,
                     flush_timeout_s=flush_timeout_s)

  def add_position(self, position: Mapping[str, Any]) -> None:
    """Writes `position` (name -> numpy value) as one item."""
    step = dict(position, policy_version=self._policy_version,
                actor_id=self._actor_id)
    self._writer.append(step)
    self._create_item({name: column[-1] for name, column
                       in self._writer.history.items()})

  def add_first(self, timestep: Any) -> None:
    raise TypeError('PositionAdder writes positions: call add_position.')

  def add(self, action: Any, next_timestep: Any, extras: Any = ()) -> None:
    raise TypeError('PositionAdder writes positions: call add_position.')

  def _reset_episode(self) -> None:
    pass
