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
AGENTS = ('seed', 'ppo', 'r2d2')  # agents that serve remote environments


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


def add_node(program: launch.Program, logdir: str,
             options: Optional[options_lib.RemoteOptions],
             make_backend: Callable[..., Any], backend_args: tuple,
             backend_kwargs: dict, observation_spec: Any, action_spec: Any,
             counter: Any, monitor: Any) -> Any:
  """Adds the remote environment node (`node.RemoteEnvironmentNode` with
  `make_backend(*backend_args, **backend_kwargs)`; handles in the arguments
  are resolved in the node's process) to group 'actor' (restarted like an
  actor after a crash) and returns its handle. Without an `address_file` it
  writes `<logdir>/remote/address`."""
  from repertory.remote import node as node_lib  # pylint: disable=g-import-not-at-top
  options = options or options_lib.RemoteOptions()
  if not options.address_file:
    options = options_lib.dataclasses.replace(
        options, address_file=os.path.join(logdir or '.', 'remote',
                                           'address'))
  options = options.resolve_token()
  with program.group('actor'):
    return program.add_node(launch.CourierNode(
        node_lib.RemoteEnvironmentNode, make_backend, backend_args,
        backend_kwargs, observation_spec=observation_spec, action_spec=action_spec,
        options=options, counter=counter, monitor=monitor))


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
  """SEED (V-trace): the node with `node.make_vtrace_backend`."""
  from repertory.remote import node as node_lib  # pylint: disable=g-import-not-at-top
  return add_node(
      program, logdir, options, node_lib.make_vtrace_backend,
      (make_policy, learner, replay, table, unroll_length, observation_spec,
       action_spec),
      dict(extras_spec=extras_spec, core_state_spec=core_state_spec,
           variable_update_period=variable_update_period, seed=seed),
      observation_spec, action_spec, counter, monitor)


def add_round_service(program: launch.Program, logdir: str,
                      options: Optional[options_lib.RemoteOptions],
                      make_policy: Callable[[], Any], learner: Any,
                      replay: Any, table: str, spec: Any, unroll_length: int,
                      unrolls_per_round: int, extras_spec: Any,
                      round_timeout_s: float, counter: Any,
                      monitor: Any) -> Any:
  """PPO (synchronous rounds): the node with `rounds.RoundBackend`; the
  learner must expect one actor (id 0) writing `unrolls_per_round` unrolls
  per version."""
  from repertory.components import adders  # pylint: disable=g-import-not-at-top
  from repertory.remote import rounds  # pylint: disable=g-import-not-at-top
  from repertory_remote import wire as specs_lib  # pylint: disable=g-import-not-at-top
  return add_node(
      program, logdir, options, rounds.RoundBackend,
      (make_policy, learner, replay, table, unroll_length, unrolls_per_round,
       adders.EnvironmentSpec(spec.observations, spec.actions, None, None),
       extras_spec, specs_lib.Specs.from_dm_env(
           spec.observations, spec.actions).num_actions),
      dict(round_timeout_s=round_timeout_s),
      spec.observations, spec.actions, counter, monitor)


def add_sequence_service(program: launch.Program, logdir: str,
                         options: Optional[options_lib.RemoteOptions],
                         make_policy: Callable[[], Any], learner: Any,
                         replay: Any, table: str, oar_spec: Any,
                         config: Any, priority_fn: Callable[[Any], float],
                         num_epsilons: int, counter: Any, monitor: Any,
                         seed: int) -> Any:
  """R2D2 (recurrent Q-learning): the node with `sequences.SequenceBackend`.
  `oar_spec` is the OAR environment's spec (clients send the plain
  observation, `oar_spec.observations.observation`); `config` has
  lstm_size, sequence_length, sequence_period, epsilon, epsilon_alpha,
  variable_update_period, max_in_flight_items."""
  from repertory.remote import sequences  # pylint: disable=g-import-not-at-top
  from repertory_remote import wire as specs_lib  # pylint: disable=g-import-not-at-top
  observation_spec = oar_spec.observations.observation
  return add_node(
      program, logdir, options, sequences.SequenceBackend,
      (make_policy, learner, replay, table, oar_spec, config.lstm_size,
       config.sequence_length, config.sequence_period, priority_fn,
       config.epsilon, config.epsilon_alpha, num_epsilons,
       specs_lib.Specs.from_dm_env(observation_spec,
                                   oar_spec.actions).num_actions),
      dict(variable_update_period=config.variable_update_period,
           max_in_flight_items=config.max_in_flight_items, seed=seed),
      observation_spec, oar_spec.actions, counter, monitor)
