"""Nodes: the units of work of a program graph (Launchpad's node types)."""

import dataclasses
import re
import threading
from typing import Any, Callable, List, Mapping, Optional, Sequence

from absl import logging

from repertory.launch.api import handles as handles_lib


@dataclasses.dataclass
class BuildContext:
  """What a node needs to be built inside its process."""
  resolve: Callable[[Any], Any]     # dereferences handles / Deferreds in a nest
  host_ip: str                      # address other processes reach us at
  stop_event: threading.Event


@dataclasses.dataclass
class Built:
  """A node brought up inside its process."""
  instance: Any = None                        # what courier calls go to
  run: Optional[Callable[[], None]] = None    # the main loop, if any
  serves: bool = False                        # keeps serving after run()
  on_stop: Optional[Callable[[], None]] = None  # cleanup after run ended
  address: Optional[str] = None               # a Reverb server's address


def _label_of(fn: Any, fallback: str) -> str:
  name = re.sub(r'[^A-Za-z0-9_.-]+', '_', getattr(fn, '__name__', '')).strip('_')
  return name.lower() or fallback


def _name(fn: Any) -> str:
  return getattr(fn, '__qualname__', None) or getattr(
      fn, '__name__', None) or type(fn).__name__


class Node:
  """Base class of nodes. A node is added to a program with `add_node`."""

  kind = 'py'

  def __init__(self):
    self._handle: Optional[handles_lib.Handle] = None
    self.node_id: Optional[str] = None
    self.label: Optional[str] = None
    # The MultiThreadingColocation this node belongs to, if any.
    self.colocation: Optional['MultiThreadingColocation'] = None
    self.addresses: List[Any] = []  # launch.Address objects it serves on

  def allocate_address(self, address) -> None:
    """Makes this node the server of `address` (a `launch.Address`); its
    port is picked when the program is launched."""
    address.assign(self)

  @property
  def description(self) -> str:
    return type(self).__name__

  @property
  def default_label(self) -> str:
    return type(self).__name__.lower()

  def create_handle(self) -> handles_lib.Handle:
    """The node's handle (one per node; the same object on every call)."""
    if self._handle is None:
      self._handle = self._handle_class(self.kind, self.description)
    return self._handle

  _handle_class = handles_lib.Handle

  def arguments(self) -> List[Any]:
    """The (args, kwargs) nests that are dereferenced in the node's process."""
    return []

  def build(self, ctx: BuildContext) -> Built:
    raise NotImplementedError


class PyNode(Node):
  """Runs `fn(*args, **kwargs)` in its own thread or process."""

  def __init__(self, fn: Callable[..., Any], *args, **kwargs):
    super().__init__()
    if not callable(fn):
      raise TypeError(f'PyNode needs a callable, got {fn!r}.')
    self._fn = fn
    self._args = args
    self._kwargs = kwargs

  @property
  def description(self) -> str:
    return f'PyNode({_name(self._fn)})'

  @property
  def default_label(self) -> str:
    return _label_of(self._fn, 'py_node')

  def arguments(self) -> List[Any]:
    return [self._args, self._kwargs]

  def build(self, ctx: BuildContext) -> Built:
    args = ctx.resolve(self._args)
    kwargs = ctx.resolve(self._kwargs)
    return Built(run=lambda: self._fn(*args, **kwargs))


class PyClassNode(Node):
  """Builds `ctor(*args, **kwargs)` and calls its `run()` if it has one."""

  def __init__(self, ctor: Callable[..., Any], *args, **kwargs):
    super().__init__()
    if not callable(ctor):
      raise TypeError(f'{type(self).__name__} needs a callable, got {ctor!r}.')
    self._ctor = ctor
    self._args = args
    self._kwargs = kwargs
    self._run_enabled = True

  def disable_run(self) -> None:
    """Builds the object but does not call its `run()` (for tests)."""
    self._run_enabled = False

  def enable_run(self) -> None:
    """Undoes `disable_run()`: the object's `run()` is called."""
    self._run_enabled = True

  def configure(self, *args, **kwargs) -> None:
    """Replaces the constructor's arguments (they may hold handles): lets
    two nodes hold each other's handles::

      foo = launch.CourierNode(Foo)
      bar = launch.CourierNode(Bar, foo.create_handle())
      foo.configure(bar=bar.create_handle())
    """
    self._args = args
    self._kwargs = kwargs

  @property
  def description(self) -> str:
    return f'{type(self).__name__}({_name(self._ctor)})'

  @property
  def default_label(self) -> str:
    return _label_of(self._ctor, 'node')

  def arguments(self) -> List[Any]:
    return [self._args, self._kwargs]

  def build(self, ctx: BuildContext) -> Built:
    instance = self._ctor(*ctx.resolve(self._args), **ctx.resolve(self._kwargs))
    run = getattr(instance, 'run', None) if self._run_enabled else None
    return Built(instance=instance, run=run if callable(run) else None,
                 serves=self.kind == 'courier')


class CourierNode(PyClassNode):
  """A `PyClassNode` whose public methods are callable through its handle.

  `run()` (if present and not disabled) runs meanwhile; as in Launchpad, the
  node stops serving when `run()` returns (a node without `run()` serves
  until the program stops).

  Args:
    ctor, *args, **kwargs: what builds the object.
    courier_kwargs: Launchpad's options of its Courier server. Accepted and
      not used: there is no Courier server here (threads call the object
      directly; other processes reach it through Ray).
    courier_client_kwargs: Launchpad's options of the clients of this node;
      accepted and not used, for the same reason.
  """

  kind = 'courier'

  def __init__(self, ctor: Callable[..., Any], *args,
               courier_kwargs: Optional[Mapping[str, Any]] = None,
               courier_client_kwargs: Optional[Mapping[str, Any]] = None,
               **kwargs):
    super().__init__(ctor, *args, **kwargs)
    self.courier_kwargs = dict(courier_kwargs or {})
    self.courier_client_kwargs = dict(courier_client_kwargs or {})

  _handle_class = handles_lib.CourierHandle


class ReverbNode(Node):
  """A real `reverb.Server` on a free port; its handle becomes a
  `reverb.Client`.

  Args:
    priority_tables_fn: returns the list of `reverb.Table`s to serve.
    checkpoint_ctor: returns a `reverb.checkpointers` checkpointer (optional;
      without one Reverb uses its default, a temporary directory).
    checkpoint_time_delta_minutes: if set, checkpoint this often. With
      either argument a final checkpoint is written when the program stops.
  """

  kind = 'reverb'

  def __init__(self, priority_tables_fn: Callable[[], Sequence[Any]],
               checkpoint_ctor: Optional[Callable[[], Any]] = None,
               checkpoint_time_delta_minutes: Optional[float] = None):
    super().__init__()
    if (checkpoint_time_delta_minutes is not None and
        not checkpoint_time_delta_minutes > 0):
      raise ValueError('checkpoint_time_delta_minutes must be > 0, got '
                       f'{checkpoint_time_delta_minutes!r}.')
    self._priority_tables_fn = priority_tables_fn
    self._checkpoint_ctor = checkpoint_ctor
    self._checkpoint_time_delta_minutes = checkpoint_time_delta_minutes

  @property
  def default_label(self) -> str:
    return 'reverb'

  def build(self, ctx: BuildContext) -> Built:
    import reverb  # pylint: disable=g-import-not-at-top  # imports TF: lazily.
    tables = self._priority_tables_fn()
    checkpointer = self._checkpoint_ctor() if self._checkpoint_ctor else None
    server = reverb.Server(list(tables), port=None, checkpointer=checkpointer)
    address = f'{ctx.host_ip}:{server.port}'
    logging.info('Reverb server of %s serving %s on %s', self.node_id,
                 [t.name for t in tables], address)
    run = None
    checkpoints = (checkpointer is not None or
                   self._checkpoint_time_delta_minutes is not None)
    if self._checkpoint_time_delta_minutes:
      period = 60.0 * self._checkpoint_time_delta_minutes
      client = reverb.Client(address)

      def run():
        while not ctx.stop_event.wait(period):
          logging.info('Reverb checkpoint written to %s', client.checkpoint())

    def on_stop():
      if checkpoints:
        try:
          path = reverb.Client(address).checkpoint()
          logging.info('Final Reverb checkpoint written to %s', path)
        except Exception:  # pylint: disable=broad-except
          logging.exception('Final Reverb checkpoint of %s failed.',
                            self.node_id)
      server.stop()

    return Built(instance=server, run=run, serves=True, on_stop=on_stop,
                 address=address)


class _Colocation(Node):
  """Several nodes started together as one unit."""

  def __init__(self, nodes: Sequence[Node]):
    super().__init__()
    flat = []
    for node in nodes:
      if (isinstance(node, MultiThreadingColocation) and
          isinstance(self, MultiThreadingColocation)):
        flat.extend(node.nodes)  # Threads in threads: the same threads.
      else:
        flat.append(node)
    if not flat:
      raise ValueError(f'{type(self).__name__} needs at least one node.')
    for node in flat:
      self._check(node)
    self.nodes = flat

  def _check(self, node) -> None:
    if not isinstance(node, Node) or isinstance(node, _Colocation):
      raise TypeError(f'{type(self).__name__} takes nodes (not colocations), '
                      f'got {node!r}.')
    if node.node_id is not None:
      raise ValueError(f'{node.description} was already added to the program '
                       f'as {node.node_id!r}; a colocation takes nodes not '
                       'yet added.')

  def add_node(self, node: Node) -> handles_lib.Handle:
    """Adds `node` to this colocation (before the colocation is added to
    the program); returns its handle."""
    if self.node_id is not None:
      raise ValueError(f'{self.description} was already added to the program '
                       f'as {self.node_id!r}; add nodes to it before that.')
    self._check(node)
    self.nodes.append(node)
    if isinstance(self, MultiThreadingColocation):
      node.colocation = self
    return node.create_handle()

  @property
  def description(self) -> str:
    return f'{type(self).__name__}({[n.description for n in self.nodes]})'

  @property
  def default_label(self) -> str:
    return self.nodes[0].default_label


class MultiThreadingColocation(_Colocation):
  """Nodes run in threads of one process (one Ray actor in Ray modes).

  Args:
    nodes: the nodes (not colocations).
    return_on_first_completed: the colocation counts as finished (for
      `wait()` and for the program ending by itself) as soon as one of its
      nodes finished; the others keep running until the program stops.
      Default: when all of them finished.
  """

  def __init__(self, nodes: Sequence[Node],
               return_on_first_completed: bool = False):
    super().__init__(nodes)
    self.return_on_first_completed = bool(return_on_first_completed)
    for node in self.nodes:
      node.colocation = self


class MultiProcessingColocation(_Colocation):
  """Nodes run in separate processes placed together (same machine, the
  group's resources requested once)."""
