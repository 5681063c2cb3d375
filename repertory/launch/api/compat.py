"""Launchpad's smaller names: launch types, addresses, process settings,
program stoppers. See docs/launch.md for what maps to what."""

import dataclasses
import enum
import os
from typing import Any, Dict, Optional, Union

from repertory.launch.api import context


class LaunchType(str, enum.Enum):
  """The launch types (`--lp_launch_type`); members compare equal to their
  strings, so `launch(program, launch_type=LaunchType.LOCAL_MULTI_THREADING)`
  and `launch_type='local_mt'` are the same."""
  LOCAL_MULTI_THREADING = 'local_mt'
  LOCAL_MULTI_PROCESSING = 'local_mp'
  TEST_MULTI_THREADING = 'test_mt'
  TEST_MULTI_PROCESSING = 'test_mp'
  RAY = 'ray'  # repertory's: an existing Ray cluster.

  def __str__(self) -> str:
    return self.value


def _launch_type(launch_type: Union[LaunchType, str]) -> LaunchType:
  try:
    return LaunchType(launch_type)
  except ValueError:
    raise ValueError(f'Unknown launch_type {launch_type!r}; valid launch types '
                     f'are {[t.value for t in LaunchType]}.') from None


def is_local_launch(launch_type: Union[LaunchType, str]) -> bool:
  """True for local_mt and local_mp."""
  return _launch_type(launch_type) in (LaunchType.LOCAL_MULTI_THREADING,
                                       LaunchType.LOCAL_MULTI_PROCESSING)


def is_local_launch_or_test(launch_type: Union[LaunchType, str]) -> bool:
  """True for local_mt, local_mp, test_mt and test_mp."""
  return _launch_type(launch_type) is not LaunchType.RAY


class _ProgramStopper:
  """Stops the program it runs in (picklable: pass it to a node)."""

  def __call__(self, mark_as_completed: bool = False) -> None:
    del mark_as_completed  # Launchpad's, for cloud jobs.
    context.stop()

  def __repr__(self) -> str:
    return 'ProgramStopper()'


def make_program_stopper(launch_type: Union[LaunchType, str]
                         ) -> _ProgramStopper:
  """A callable that stops the running program (as `launch.stop()`), for
  code written against Launchpad's `make_program_stopper(launch_type)`."""
  _launch_type(launch_type)
  return _ProgramStopper()


@dataclasses.dataclass
class PythonProcess:
  """Launchpad's per-group settings of a local_mp process, as a value of
  `local_resources`: `env` is set in the group's processes. Per-process
  flags (`args`, `interpreter_args`) are not supported: every node runs in
  a Ray worker, not in a command line of its own."""
  args: Optional[Dict[str, Any]] = None
  env: Optional[Dict[str, str]] = None
  interpreter_args: Optional[Dict[str, Any]] = None

  def as_resources(self, label: str) -> Dict[str, Any]:
    for name in ('args', 'interpreter_args'):
      if getattr(self, name):
        raise ValueError(
            f'local_resources[{label!r}] = PythonProcess({name}=...): '
            f'per-process {name} are not supported (nodes run in Ray '
            'workers); pass settings as node arguments, or env=...')
    return {'env': dict(self.env or {})}


class Address:
  """A host:port chosen at launch for a server a node opens itself.

  ```
  address = launch.Address()
  server_node = launch.PyNode(serve, address)
  server_node.allocate_address(address)
  program.add_node(launch.PyNode(use, address), label='client')
  ...
  def serve(address):
    port = launch.get_port_from_address(address.resolve())
  ```
  The port is picked (free on the launching machine) by `launch()`; the
  host is `localhost`, so it serves nodes of the same machine (all of them
  in test_mt, local_mt and local_mp).
  """

  def __init__(self, name: Optional[str] = None):
    self.name = name
    self._address: Optional[str] = None
    self._owner: Optional[str] = None

  def assign(self, node) -> None:
    """Makes `node` the owner (the server) of this address."""
    if self._owner is not None and self._owner != node.description:
      raise ValueError(f'This launch.Address already belongs to '
                       f'{self._owner}; one address, one node.')
    self._owner = node.description
    if self not in node.addresses:
      node.addresses.append(self)

  def bind(self, address: str) -> None:
    self._address = address

  def resolve(self) -> str:
    if self._address is None:
      raise RuntimeError(
          'This launch.Address has no port yet: give it to a node with '
          'node.allocate_address(address) and launch the program (launch() '
          'picks the port).')
    return self._address

  def __repr__(self) -> str:
    return f'Address({self._address or "unbound"})'


def get_port_from_address(address: str) -> int:
  """The port of 'host:port' (or of a named port 'host:NAME', read from the
  environment variable LP_PORT_NAME, as Launchpad)."""
  port = address.rsplit(':', 1)[-1]
  if port.isdigit():
    return int(port)
  value = os.environ.get('LP_PORT_' + port)
  if value is None:
    raise ValueError(f'Address {address!r} has no port number, and '
                     f'LP_PORT_{port} is not set.')
  return int(value)


def bind_addresses(nodes) -> None:
  """Picks a free loopback port for every Address a node allocated."""
  import portpicker  # pylint: disable=g-import-not-at-top
  for node in nodes:
    for address in getattr(node, 'addresses', []):
      if address._address is None:  # pylint: disable=protected-access
        address.bind(f'localhost:{portpicker.pick_unused_port()}')
