"""The actor nodes of a program graph, one per actor of the experiment."""

from typing import Any, Callable, List


def add_actor_nodes(program: Any, experiment: Any,
                    node_type: Callable[..., Any], actor: Callable[..., Any],
                    config: Any, *args: Any, **kwargs: Any) -> List[Any]:
  """Adds `experiment.num_actors` nodes to the group 'actor' (whose crashed
  nodes the run restarts) and returns their handles; node i is

    node_type(actor, i, config, experiment.env, experiment.envs_per_actor,
              experiment.actor_seed(i), *args, **kwargs)

  (e.g. `launch.CourierNode`, `launch.PyClassNode`)."""
  with program.group('actor'):
    return [program.add_node(node_type(
        actor, i, config, experiment.env, experiment.envs_per_actor,
        experiment.actor_seed(i), *args, **kwargs))
            for i in range(experiment.num_actors)]
