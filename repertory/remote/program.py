"""Remote environments around any agent: `--env=remote:<spec>`.

    program = remote.program.make_program(impala.make_program, config,
                                          experiment, options)

is what `python -m repertory.run --agent=impala --env=remote:catch` launches:
the agent's own program, built unchanged with `experiment.env` replaced by
a `environment.SlotFactory`, plus one node (group 'environment') serving the
remote clients (`node.RemoteEnvironmentNode`). Every environment the
agent's actors make attaches to that node over loopback and plays the
clients' episodes; the agent's acting, adders and learner are its own.

`<spec>` is a local environment of the same specs (e.g. `remote:catch`):
the networks are built from its specs, and evaluation (the run monitor's
and the evaluator's) plays it locally.
"""

import contextlib
import dataclasses
import os
import secrets
from typing import Any, Callable, Optional

from repertory import launch
from repertory.remote import environment as environment_lib
from repertory.remote import options as options_lib

PREFIX = 'remote:'
GROUP = 'environment'  # restarted after a crash, like actors


def is_remote(env: Any) -> bool:
  return isinstance(env, str) and env.startswith(PREFIX)


def local_spec(env: str) -> str:
  """'remote:catch' -> 'catch'."""
  return env[len(PREFIX):]


def make_program(make_agent_program: Callable[..., launch.Program],
                 config: Any, experiment: Any,
                 options: Optional[options_lib.RemoteOptions] = None,
                 **program_kwargs: Any) -> launch.Program:
  """The agent's program (`make_agent_program(config, experiment,
  **program_kwargs)`) acting in the remote clients' episodes of
  `experiment.env` ('remote:<spec>').

  Without `options.address_file` the node writes the clients' address to
  `<logdir>/remote/address`; the slot address goes beside it ('slots').

  Raises:
    ValueError: `experiment.env` is not 'remote:<spec>', or <spec> is not
      an environment of discrete actions and one observation array.
  """
  if not is_remote(experiment.env):
    raise ValueError(f'remote.make_program needs env=remote:<spec>, got '
                     f'{experiment.env!r}.')
  options = options or options_lib.RemoteOptions()
  if not options.address_file:
    options = dataclasses.replace(options, address_file=os.path.join(
        experiment.logdir or '.', 'remote', 'address'))
  options = options.resolve_token()
  spec = local_spec(experiment.env)
  specs = _specs(spec)
  slot_address_file = environment_lib.slot_address_file(options.address_file)
  if os.path.exists(slot_address_file):  # A resumed run's: a dead address.
    os.remove(slot_address_file)
  token = secrets.token_urlsafe(24)  # the slots' own: never leaves the run
  factory = environment_lib.SlotFactory(spec, specs, slot_address_file, token)
  program = make_agent_program(
      config, dataclasses.replace(experiment, env=factory), **program_kwargs)
  from repertory.remote import node as node_lib  # pylint: disable=g-import-not-at-top
  with program.group(GROUP):
    program.add_node(launch.CourierNode(
        node_lib.RemoteEnvironmentNode, specs[0], specs[1], options,
        slot_address_file, token, reward_spec=specs[2]))
  return program


def _specs(spec: str) -> tuple:
  """(observation, action, reward, discount) specs of the local `spec`;
  refuses what the wire cannot carry, naming it."""
  from repertory import environments  # pylint: disable=g-import-not-at-top
  from repertory_remote import wire  # pylint: disable=g-import-not-at-top
  with contextlib.closing(environments.make(spec, seed=0)) as env:
    specs = (env.observation_spec(), env.action_spec(), env.reward_spec(),
             env.discount_spec())
  try:
    wire.Specs.from_dm_env(specs[0], specs[1])
  except (ValueError, TypeError, AttributeError) as e:
    raise ValueError(f'--env=remote:{spec}: {spec!r} must have one '
                     f'observation array and discrete actions ({e}).'
                     ) from None
  return specs
