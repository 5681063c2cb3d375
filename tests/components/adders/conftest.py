"""A real Reverb server per test, and readers of what it holds."""

import numpy as np
import pytest
import reverb
from dm_env import specs

from repertory.components import adders


ENV_SPEC = adders.EnvironmentSpec(
    observations=specs.Array((), np.float32),
    actions=specs.Array((), np.int32),
    rewards=specs.Array((), np.float32),
    discounts=specs.BoundedArray((), np.float32, 0.0, 1.0))


@pytest.fixture
def make_client():
  """make_client({table_name: signature}) -> client of a fresh server."""
  servers = []

  def make(signatures, max_size=1000):
    tables = [reverb.Table.queue(name, max_size, signature=sig)
              for name, sig in signatures.items()]
    server = reverb.Server(tables)
    servers.append(server)
    return reverb.Client(f'localhost:{server.port}')

  yield make
  for server in servers:
    server.stop()


def _read_all(client, table):
  """Every item of a queue table, in insertion order, as numpy nests."""
  size = client.server_info()[table].current_size
  if size == 0:
    return []
  return [s.data for s in client.sample(
      table, size, emit_timesteps=False, unpack_as_table_signature=True)]


@pytest.fixture
def read_all():
  return _read_all


@pytest.fixture
def env_spec():
  return ENV_SPEC
