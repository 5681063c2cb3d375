"""Resources a launch would wait for for ever are refused at once, in one
line naming the resource and what there is."""

import pytest
import ray

from repertory import launch
from repertory import testing
from repertory.launch.api import resources as resources_lib
from repertory.launch.backends import local_ray


def _program() -> launch.Program:
  program = launch.Program('resources')
  with program.group('learner'):
    program.add_node(launch.PyNode(lambda: None))
  return program


@pytest.mark.parametrize('launch_type', ['local_mp', 'test_mp'])
def test_a_custom_resource_in_local_mp_is_refused_before_ray_starts(
    launch_type):
  resources = launch.parse_resources('learner=cpu:1,gpux:1')
  with pytest.raises(ValueError) as e:
    launch.launch(_program(), launch_type=launch_type,
                  local_resources=resources)
  assert str(e.value) == (
      "Unknown resource 'gpux' for group 'learner': the local Ray instance "
      f"of {launch_type} has only ('cpu', 'gpu', 'memory', 'cpus') (custom "
      'resources need a cluster: --lp_launch_type=ray).')
  assert not ray.is_initialized()


def test_a_resource_no_node_has_is_named_with_the_cluster_s():
  with pytest.raises(ValueError) as e:
    resources_lib.check_cluster_resources(
        {'learner': {'num_cpus': 1, 'resources': {'gpux': 1.0}}},
        {'CPU': 2.0, 'memory': 1e9, 'node:127.0.0.1': 1.0, 'my_res': 1.0},
        '127.0.0.1:6379')
  assert str(e.value) == (
      "Unknown resource 'gpux' for group 'learner': no node of the Ray "
      "cluster at 127.0.0.1:6379 has it; its resources are ['CPU', 'memory', "
      "'my_res'].")
  resources_lib.check_cluster_resources(
      {'learner': {'resources': {'my_res': 1.0}}}, {'my_res': 1.0}, 'here')


@pytest.mark.slow
def test_a_ray_launch_refuses_a_resource_the_cluster_lacks(tmp_path):
  with testing.loopback_ray_cluster(num_cpus=1) as cluster:
    with pytest.raises(launch.LaunchError, match="Unknown resource 'gpux'"):
      launch.check_cluster({'learner': {'resources': {'gpux': 1.0}}},
                           cluster.address)
    assert not ray.is_initialized()  # Its connection was closed.
    launch.check_cluster({'learner': {'num_cpus': 1}}, cluster.address)
    try:
      assert ray.is_initialized()  # Kept for the launch.
      assert local_ray.take_checked_connection()
    finally:
      ray.shutdown()
