"""A real Reverb server per test, and readers of what it holds."""

import numpy as np
import pytest
import reverb
from dm_env import specs

from repertory import testing
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




@pytest.fixture
def read_all():
  return testing.read_queue


@pytest.fixture
def env_spec():
  return ENV_SPEC
