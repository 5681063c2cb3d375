"""The Python client of repertory's remote environment service.

A game in Python plays its episodes against an agent served by repertory
(docs/remote.md)::

  import repertory_remote as remote

  agent = remote.Client('127.0.0.1:50051', remote.Specs((10, 5), 'float32', 3))
  episode = agent.episode()
  action = episode.step(observation)

It needs grpcio, protobuf and numpy only: `pip install ./clients/python`
installs it without TensorFlow, Reverb or Ray.
"""

from repertory_remote.client import Client
from repertory_remote.client import Episode
from repertory_remote.client import RemoteError
from repertory_remote.client import SessionLost
from repertory_remote.wire import Specs

__all__ = ['Client', 'Episode', 'RemoteError', 'SessionLost', 'Specs']
