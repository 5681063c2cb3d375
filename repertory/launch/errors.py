"""Errors raised by `repertory.launch`."""

from typing import Optional


class LaunchError(Exception):
  """Base class of every error raised by `repertory.launch`."""


class NodeError(LaunchError):
  """A node failed (its constructor or its `run()` raised, or its process died).

  Attributes:
    label: the label of the failed node (its group).
    node_id: the node's unique id in the program, e.g. 'actor/3'.
    node_traceback: the formatted traceback from the node's process.
  """

  def __init__(self, label: str, node_id: str, node_traceback: str,
               logfile: Optional[str] = None):
    self.label = label
    self.node_id = node_id
    self.node_traceback = node_traceback
    self.logfile = logfile
    where = f' (log: {logfile})' if logfile else ''
    super().__init__(
        f"Node '{node_id}' (group '{label}') failed{where}; the program was "
        f'stopped. Traceback from the node:\n{node_traceback}')

  def __reduce__(self):
    return (NodeError,
            (self.label, self.node_id, self.node_traceback, self.logfile))


class NodePicklingError(LaunchError):
  """A node (or one of its arguments) cannot be shipped to another process."""


class NotDereferencedError(AttributeError, LaunchError):
  """A handle was used as if it were the client of its node."""
