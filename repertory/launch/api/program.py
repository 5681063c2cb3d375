"""`Program`: a graph of nodes, grouped by label, launched with `launch()`."""

import collections
import contextlib
import dataclasses
import re
import uuid
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from repertory.launch.api import handles as handles_lib
from repertory.launch.api import nodes as nodes_lib

_LABEL_RE = re.compile(r'^[A-Za-z0-9_.-]+$')


@dataclasses.dataclass
class Unit:
  """What one backend process (Ray actor) hosts.

  Attributes:
    unit_id: unique id, e.g. 'actor/3'.
    label: the group label (resources are requested per label).
    nodes: the nodes run in this process (several for a
      MultiThreadingColocation).
    colocate_with: for the 2nd+ processes of a MultiProcessingColocation, the
      unit id of the first one (placed on the same machine, no resources of
      its own).
    restarts_in_thread: a node of the unit's own group that raises is
      rebuilt in its thread, as a node of another group is (`spread_group`:
      the other nodes of the process keep running); the process restarts
      only when it dies.
  """
  unit_id: str
  label: str
  nodes: List[nodes_lib.Node]
  colocate_with: Optional[str] = None
  restarts_in_thread: bool = False


class Program:
  """A program graph: nodes, their groups, and the handles between them.

  ```
  program = launch.Program('consumer_producers')
  with program.group('consumer'):
    consumer = program.add_node(launch.CourierNode(Consumer))
  with program.group('producer'):
    for i in range(3):
      program.add_node(launch.PyNode(produce, i, consumer))
  launch.launch(program)
  ```
  """

  def __init__(self, name: str):
    if not isinstance(name, str) or not _LABEL_RE.match(name):
      raise ValueError(f'Program name {name!r} must be a non-empty string of '
                       'letters, digits, "_", "." or "-".')
    self.name = name
    self.program_id = uuid.uuid4().hex
    self._groups: Dict[str, List[nodes_lib.Node]] = collections.OrderedDict()
    self._current_group: Optional[str] = None
    self._counts: Dict[str, int] = collections.Counter()
    self._units: List[Unit] = []
    # Unit id -> the handles whose calls go to that unit's process.
    self._unit_handles: Dict[str, List[handles_lib.Handle]] = (
        collections.defaultdict(list))

  @contextlib.contextmanager
  def group(self, label: str) -> Iterator[None]:
    """Nodes added inside `with program.group(label):` get this label."""
    self._check_label(label)
    if self._current_group is not None:
      raise ValueError(f'Groups cannot be nested: group {label!r} opened '
                       f'inside group {self._current_group!r}.')
    self._current_group = label
    try:
      yield
    finally:
      self._current_group = None

  @property
  def groups(self) -> Dict[str, List[nodes_lib.Node]]:
    """Label -> the nodes added with that label, in order."""
    return dict(self._groups)

  @property
  def units(self) -> List[Unit]:
    return list(self._units)

  def add_node(
      self, node: nodes_lib.Node, label: Optional[str] = None
  ) -> Union[handles_lib.Handle, List[handles_lib.Handle]]:
    """Adds `node`; returns its handle (a list of handles for a colocation).

    Args:
      node: a PyNode, PyClassNode, CourierNode, ReverbNode or a colocation.
      label: the node's group label; defaults to the enclosing
        `program.group(...)`, else to a name derived from the node.
    """
    if not isinstance(node, nodes_lib.Node):
      raise TypeError(f'add_node takes a node (PyNode, PyClassNode, '
                      f'CourierNode, ReverbNode, MultiThreadingColocation, '
                      f'MultiProcessingColocation), got {node!r}.')
    if node.node_id is not None:
      raise ValueError(f'{node.description} was already added as '
                       f'{node.node_id!r}.')
    if self._current_group is not None:
      if label is not None and label != self._current_group:
        raise ValueError(f'add_node(label={label!r}) inside group '
                         f'{self._current_group!r}: the label must match the '
                         'group (or be left out).')
      label = self._current_group
    elif label is None:
      # Launchpad refuses a node without a label; repertory derives one.
      label = node.default_label
    self._check_label(label)
    index = self._counts[label]
    self._counts[label] += 1
    node_id = f'{label}/{index}'
    self._groups.setdefault(label, []).append(node)
    if isinstance(node, nodes_lib.MultiThreadingColocation):
      self._assign(node, node_id, label, node_id)
      subs = [self._assign(n, f'{node_id}.{j}', label, node_id)
              for j, n in enumerate(node.nodes)]
      self._units.append(Unit(node_id, label, list(node.nodes)))
      return subs
    if isinstance(node, nodes_lib.MultiProcessingColocation):
      self._assign(node, node_id, label, None)
      subs = []
      first = None
      for j, n in enumerate(node.nodes):
        sub_id = f'{node_id}.{j}'
        subs.append(self._assign(n, sub_id, label, sub_id))
        self._units.append(Unit(sub_id, label, [n], colocate_with=first))
        first = first or sub_id
      return subs
    handle = self._assign(node, node_id, label, node_id)
    self._units.append(Unit(node_id, label, [node]))
    return handle

  def _assign(self, node, node_id, label, unit_id) -> handles_lib.Handle:
    if node.node_id is not None:
      raise ValueError(f'{node.description} was already added as '
                       f'{node.node_id!r}.')
    node.node_id = node_id
    node.label = label
    handle = node.create_handle()
    handle._program_id = self.program_id  # pylint: disable=protected-access
    handle._node_id = node_id  # pylint: disable=protected-access
    handle._unit_id = unit_id  # pylint: disable=protected-access
    handle._label = label  # pylint: disable=protected-access
    if unit_id is not None:
      self._unit_handles[unit_id].append(handle)
    return handle

  def add_program(self, other: 'Program',
                  groups: Optional[Sequence[str]] = None) -> None:
    """Adds the nodes of `other`'s groups `groups` (default: all) to this
    program, under the same labels; their handles, also those held by
    other nodes of `other`, then refer to the nodes here. So a part built
    as a program of its own (e.g. a second learner with its actors) joins
    another program::

      part = make_part()                      # a Program, not launched
      program.add_program(part, groups=['learner', 'actor'])

    Raises:
      ValueError: `other` was placed (`share_process`, `spread_group`) or
        launched, or a node added holds the handle of a node left out.
    """
    groups = list(other.groups if groups is None else groups)
    unknown = [g for g in groups if g not in other.groups]
    if unknown:
      raise ValueError(f'Program {other.name!r} has no groups {unknown}; it '
                       f'has {list(other.groups)}.')
    nodes = [n for g in groups for n in other.groups[g]]
    if len(other.units) != sum(len(n.nodes) if isinstance(
        n, nodes_lib.MultiProcessingColocation) else 1
                               for nodes in other.groups.values()
                               for n in nodes):
      raise ValueError(f'Program {other.name!r} was placed (processes '
                       'shared); add its nodes before placing it.')
    kept = {id(sub.create_handle()) for n in nodes  # Colocated nodes too.
            for sub in [n, *getattr(n, 'nodes', [])]}
    for node in nodes:
      for handle in _handles_in(node.arguments()):
        if id(handle) not in kept and handle._program_id == other.program_id:  # pylint: disable=protected-access
          raise ValueError(
              f'{node.description} of {other.name!r} holds the handle of '
              f'node {handle.node_id!r}, which is not added; reconfigure '
              'it without that handle first.')
    for group in groups:
      for node in other.groups[group]:
        for sub in [node, *getattr(node, 'nodes', [])]:
          sub.node_id = None
        self.add_node(node, group)

  def share_process(self, *labels: str) -> Optional[str]:
    """Runs the nodes of the groups `labels` (added so far) in one process.

    In local_mp / ray the units of these groups become one unit (one Ray
    actor, each node in its own thread, as a MultiThreadingColocation):
    one interpreter, one set of imports and one log file
    (`<first label>_0.log`) instead of one per node. The first label's
    group names the unit: its resources (`--lp_resources`) and
    `max_restarts` apply to the whole process, so a crash of any of its
    nodes restarts all of them. Nodes of a MultiProcessingColocation stay
    in their processes. Threads backends run every node in one process
    anyway. Returns the shared unit's id (None: fewer than two units).
    """
    for label in labels:
      self._check_label(label)
    order = {label: i for i, label in enumerate(labels)}
    chosen = sorted((u for u in self._movable_units() if u.label in order),
                    key=lambda u: order[u.label])
    if len(chosen) < 2:
      return None
    return self._merge(chosen)

  def spread_group(self, label: str, processes: int) -> List[str]:
    """Runs the nodes of group `label` in at most `processes` processes.

    In local_mp / ray, consecutive units of the group become one unit (as
    `share_process` makes them): e.g. 5 actors in 2 processes run as
    actors 0-2 and 3-4, each node in its own thread, one log file per
    process (named after its first node). A node that raises is restarted
    in its thread (its group's `max_restarts`) while the others of its
    process keep running; a process that dies restarts with all its nodes.
    A group with at most `processes` units, and the nodes of a
    MultiProcessingColocation, are left as they are. Returns the group's
    unit ids.
    """
    self._check_label(label)
    if not isinstance(processes, int) or processes < 1:
      raise ValueError(f'processes={processes!r} must be an int >= 1.')
    units = [u for u in self._movable_units() if u.label == label]
    if len(units) > processes:
      size, extra = divmod(len(units), processes)
      start = 0
      for i in range(processes):
        end = start + size + (1 if i < extra else 0)
        if end - start > 1:
          self._merge(units[start:end], restarts_in_thread=True)
        start = end
    return [u.unit_id for u in self._units if u.label == label]

  def _movable_units(self) -> List[Unit]:
    """The units that may share a process: not part of a
    MultiProcessingColocation."""
    return [u for u in self._units
            if u.colocate_with is None and
            not any(v.colocate_with == u.unit_id for v in self._units)]

  def _merge(self, chosen: List[Unit], restarts_in_thread: bool = False
             ) -> str:
    """Makes the units `chosen` one unit, named after the first, in the
    place of the first of them; returns its id."""
    first = chosen[0]
    shared = Unit(first.unit_id, first.label,
                  [n for u in chosen for n in u.nodes],
                  restarts_in_thread=restarts_in_thread)
    for unit in chosen[1:]:
      for handle in self._unit_handles.pop(unit.unit_id, []):
        handle._unit_id = first.unit_id  # pylint: disable=protected-access
        self._unit_handles[first.unit_id].append(handle)
    ids = {u.unit_id for u in chosen}
    position = min(i for i, u in enumerate(self._units) if u.unit_id in ids)
    rest = [u for u in self._units if u.unit_id not in ids]
    self._units = rest[:position] + [shared] + rest[position:]
    return first.unit_id

  def all_nodes(self) -> List[nodes_lib.Node]:
    """Every runnable node (colocations expanded)."""
    return [n for unit in self._units for n in unit.nodes]

  def get_all_nodes(self) -> List[nodes_lib.Node]:
    """Every node added, as added (a colocation is one node), as Launchpad."""
    return [n for nodes in self._groups.values() for n in nodes]

  @staticmethod
  def _check_label(label: str) -> None:
    if not isinstance(label, str) or not _LABEL_RE.match(label):
      raise ValueError(f'Group label {label!r} must be a non-empty string of '
                       'letters, digits, "_", "." or "-".')

  def __repr__(self) -> str:
    return (f'Program({self.name!r}, groups='
            f'{ {k: len(v) for k, v in self._groups.items()} })')


def _handles_in(nest: Any) -> Iterator[handles_lib.Handle]:
  """The handles in `nest`'s lists, tuples, dicts and partials."""
  if isinstance(nest, handles_lib.Handle):
    yield nest
  elif isinstance(nest, (list, tuple)):
    for x in nest:
      yield from _handles_in(x)
  elif isinstance(nest, dict):
    for x in nest.values():
      yield from _handles_in(x)
  elif isinstance(nest, handles_lib.Deferred):
    yield from _handles_in([nest.args, nest.kwargs])
  elif hasattr(nest, 'func') and hasattr(nest, 'keywords'):  # A partial.
    yield from _handles_in([nest.args, nest.keywords])


def make_program(*nodes: nodes_lib.Node, name: str = 'launchpad') -> Program:
  """A program of `nodes`, each in the group of its derived label:
  `launch.launch(launch.make_program(launch.PyNode(main)))`."""
  program = Program(name)
  for node in nodes:
    program.add_node(node)
  return program
