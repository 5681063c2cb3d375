"""launch_type='ray' on a two-node Ray cluster (one machine, loopback).

The head and the worker node offer different custom resources; each group
asks for one of them and must land on the node that has it.
"""

import os
import sys

import cloudpickle
import pytest
import ray
from ray import cluster_utils

from repertory import launch

cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Where:

  def info(self):
    return {'ray_node_id': ray.get_runtime_context().get_node_id(),
            'pid': os.getpid()}


@pytest.fixture
def cluster():
  cluster = cluster_utils.Cluster(
      initialize_head=True,
      head_node_args={'num_cpus': 1, 'resources': {'head_res': 1},
                      'node_ip_address': '127.0.0.1',
                      'include_dashboard': False})
  cluster.add_node(num_cpus=1, resources={'worker_res': 1},
                   node_ip_address='127.0.0.1')
  yield cluster
  if ray.is_initialized():
    ray.shutdown()
  cluster.shutdown()


def test_groups_land_on_the_nodes_that_have_their_resources(cluster, tmp_path):
  program = launch.Program('placed')
  with program.group('on_head'):
    on_head = [program.add_node(launch.CourierNode(Where)) for _ in range(2)]
  with program.group('on_worker'):
    on_worker = [program.add_node(launch.CourierNode(Where)) for _ in range(2)]
  resources = launch.parse_resources(
      'on_head=head_res:0.5 on_worker=worker_res:0.5')
  launched = launch.launch(program, launch_type='ray',
                           ray_address=cluster.address,
                           local_resources=resources,
                           logdir=str(tmp_path), block=False)
  try:
    nodes = {n['NodeID']: n['Resources'] for n in ray.nodes() if n['Alive']}
    assert len(nodes) == 2
    for handle in on_head:
      assert 'head_res' in nodes[handle.dereference().info()['ray_node_id']]
    for handle in on_worker:
      assert 'worker_res' in nodes[handle.dereference().info()['ray_node_id']]
  finally:
    launched.stop(timeout=60)
  assert not ray.is_initialized()  # the launcher's connection is closed.
