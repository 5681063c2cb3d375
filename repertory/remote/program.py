"""Remote environments in a program graph: `--env=remote:<spec>`.

`remote:<spec>` means: remote clients play the episodes; `<spec>` is a local
environment with the same specs (e.g. `remote:catch`), used for the networks'
specs and for the monitor's final evaluation (`--eval_episodes=0` skips it
for games that have no local counterpart; see docs/remote.md).
"""

import os
from typing import Any, Callable, Optional

from repertory import launch
from repertory.remote import options as options_lib

PREFIX = 'remote:'
AGENTS = ('seed',)  # agents whose program can serve remote environments


def is_remote(env: Any) -> bool:
  return isinstance(env, str) and env.startswith(PREFIX)


def local_spec(env: str) -> str:
  """'remote:catch' -> 'catch'."""
  return env[len(PREFIX):]


def check_agent(agent: str, env: Any) -> None:
  """Refuses a remote environment for an agent that cannot serve one."""
  if is_remote(env) and agent not in AGENTS:
    raise ValueError(f'--env={env} (remote clients act) needs --agent one of '
                     f'{AGENTS}, got --agent={agent}.')


def add_service(program: launch.Program,
                logdir: str,
                options: Optional[options_lib.RemoteOptions],
                make_policy: Callable[[], Any],
                learner: Any,
                replay: Any,
                table: str,
                observation_spec: Any,
                action_spec: Any,
                unroll_length: int,
                variable_update_period: int,
                extras_spec: Any,
                core_state_spec: Any,
                counter: Any,
                monitor: Any,
                seed: int) -> Any:
  """Adds the remote environment node to group 'actor' (restarted like an
  actor after a crash) and returns its handle. Without an `address_file` it
  writes `<logdir>/remote/address`."""
  from repertory.remote import node as node_lib  # pylint: disable=g-import-not-at-top
  options = options or options_lib.RemoteOptions()
  if not options.address_file:
    options = options_lib.dataclasses.replace(
        options, address_file=os.path.join(logdir, 'remote', 'address'))
  options = options.resolve_token()
  with program.group('actor'):
    return program.add_node(launch.CourierNode(
        node_lib.RemoteEnvironmentNode,
        make_policy=make_policy, variable_source=learner, replay=replay,
        table=table, unroll_length=unroll_length,
        observation_spec=observation_spec, action_spec=action_spec,
        options=options, extras_spec=extras_spec,
        core_state_spec=core_state_spec,
        variable_update_period=variable_update_period,
        counter=counter, monitor=monitor, seed=seed))
