"""A league node around a learner's store of MLP weights, for the tests of
what the node measures (exploitability, the sampled rating). Its imports
wait for the fixture, so the folder's other tests import no TensorFlow."""

import functools

import pytest


@pytest.fixture
def mlp_league_node(tmp_path):
  """`mlp_league_node(game, **node_args)` -> `(node, publish)`: a LeagueNode
  under `tmp_path` snapshotting every version of a store that holds a fresh
  MLP (widths (8,)) for `game`'s seat; `publish()` stores another freshly
  initialised MLP as the next version."""
  # pylint: disable=g-import-not-at-top
  from repertory import experiment as experiment_lib
  from repertory.components import actors
  from repertory.components import league
  from repertory.components import networks
  from repertory.components.variables import store as store_lib
  # pylint: enable=g-import-not-at-top

  def make(game: str, **node_args):
    spec = experiment_lib.environment_spec(
        functools.partial(league.against_random_seat, game))
    make_network = functools.partial(networks.mlp_policy_value_network, spec,
                                     (8,))
    weights = lambda: {'policy': networks.get_variables(make_network())}
    learner = store_lib.VariableStore(weights())
    node = league.LeagueNode(
        str(tmp_path), learner,
        functools.partial(actors.FeedForwardActor, make_network),
        snapshot_every_versions=1, poll_seconds=0.01, **node_args)
    return node, lambda: learner.publish(weights())

  return make
