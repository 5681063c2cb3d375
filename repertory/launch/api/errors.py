"""Errors raised by `repertory.launch`.

A node that fails makes `LaunchedProgram.wait()` (and a blocking `launch()`)
raise the node's *own* exception, as Launchpad does: `except RuntimeError`
catches a node's `RuntimeError`. The exception raised is also a `NodeError`
(it carries `node_id`, `label`, `node_traceback` and `logfile`) and a note
names the node and shows its traceback from the node's thread or process.
"""

from typing import Any, Dict, Optional


class LaunchError(Exception):
  """Base class of every error raised by `repertory.launch`."""


class NodeError(LaunchError):
  """A node failed (its constructor or its `run()` raised, or its process died).

  Attributes:
    label: the label of the failed node (its group).
    node_id: the node's unique id in the program, e.g. 'actor/3'.
    node_traceback: the formatted traceback from the node's process.
    logfile: the node's log (local_mp / ray with output_to_files), or None.
    phase: 'build' if the node's constructor raised, 'run' if its `run()`
      or a method did, None if its process died.
  """

  def __init__(self, label: str, node_id: str, node_traceback: str,
               logfile: Optional[str] = None, phase: Optional[str] = None):
    self.label = label
    self.node_id = node_id
    self.node_traceback = node_traceback
    self.logfile = logfile
    self.phase = phase
    super().__init__(_describe(label, node_id, node_traceback, logfile))

  def __reduce__(self):
    return (NodeError, (self.label, self.node_id, self.node_traceback,
                        self.logfile, self.phase))


class NodeStartError(LaunchError):
  """A node another node depends on failed to start.

  Raised in the node that called (or dereferenced) the failed one; the
  program reports the failed node itself, not its caller.
  """

  def __init__(self, node_id: str, label: str, description: str,
               node_traceback: Optional[str], exception: Any = None):
    self.node_id = node_id
    self.label = label
    self.node_traceback = node_traceback
    self.exception = exception
    super().__init__(f"Node '{node_id}' ({description}) failed to start:\n"
                     f'{node_traceback or "(no traceback)"}')

  def __reduce__(self):
    return (_rebuild_start_error,
            (self.node_id, self.label, str(self), self.node_traceback,
             dumps_or_none(self.exception)))


def _rebuild_start_error(node_id, label, message, node_traceback, exception):
  error = NodeStartError.__new__(NodeStartError)
  LaunchError.__init__(error, message)
  error.node_id = node_id
  error.label = label
  error.node_traceback = node_traceback
  error.exception = loads_or_none(exception)
  return error


def dumps_or_none(obj: Any) -> Optional[bytes]:
  """cloudpickle of `obj`, or None where it does not pickle."""
  if obj is None:
    return None
  import cloudpickle  # pylint: disable=g-import-not-at-top
  try:
    return cloudpickle.dumps(obj)
  except Exception:  # pylint: disable=broad-except
    return None


def loads_or_none(data: Optional[bytes]) -> Any:
  if data is None:
    return None
  import cloudpickle  # pylint: disable=g-import-not-at-top
  try:
    return cloudpickle.loads(data)
  except Exception:  # pylint: disable=broad-except
    return None


class NodePicklingError(LaunchError):
  """A node (or one of its arguments) cannot be shipped to another process."""


class NotDereferencedError(AttributeError, LaunchError):
  """A handle was used as if it were the client of its node."""


def _describe(label, node_id, node_traceback, logfile) -> str:
  where = f' (log: {logfile})' if logfile else ''
  return (f"Node '{node_id}' (group '{label}') failed{where}; the program was "
          f'stopped. Traceback from the node:\n{node_traceback}')


_failure_classes: Dict[type, type] = {}


def _failure_class(cls: type) -> Optional[type]:
  """`cls` mixed with NodeError (cached); None where Python refuses it."""
  if cls in _failure_classes:
    return _failure_classes[cls]
  try:
    mixed = type(cls.__name__, (cls, NodeError), {
        '__module__': cls.__module__,
        '__qualname__': getattr(cls, '__qualname__', cls.__name__),
        '__init__': BaseException.__init__,
        '__str__': cls.__str__,
        '__repr__': cls.__repr__,
        '__reduce__': _reduce_failure,
        '__doc__': cls.__doc__,
    })
  except TypeError:  # e.g. a layout conflict between two C exception types.
    mixed = None
  _failure_classes[cls] = mixed
  return mixed


def _reduce_failure(self):
  base = type(self).__mro__[1]
  return (_rebuild_failure, (base, self.args, dict(self.__dict__)))


def _rebuild_failure(base, args, state):
  cls = _failure_class(base)
  error = cls.__new__(cls, *args)
  error.args = args
  error.__dict__.update(state)
  return error


def failure_key(error: Optional[BaseException]) -> Optional[tuple]:
  """(type, message) of a node's exception: two failures with the same key
  are the same error repeating."""
  if error is None:
    return None
  return (type(error).__module__, type(error).__qualname__, str(error))


def one_line(error: BaseException) -> str:
  """A failed node in one line: its id, where it failed, its exception's
  type and first line, and its log."""
  node_id = getattr(error, 'node_id', None)
  if node_id is None:
    return f'{type(error).__name__}: {_first_line(str(error))}'
  if type(error) is NodeError:  # pylint: disable=unidiomatic-typecheck
    cause = error.__cause__
    lines = [l.strip() for l in (error.node_traceback or '').splitlines()
             if l.strip()] or ['(no traceback)']
    if cause is not None:
      what = f'{type(cause).__name__}: {_first_line(str(cause))}'
    elif lines[0].startswith('Traceback'):
      what = _first_line(lines[-1])  # 'SomeError: message'
    else:  # e.g. 'The process of unit ... died ...:' and Ray's reason.
      what = _first_line(' '.join(lines[:2]))
  else:  # The node's own exception (see node_failure).
    what = f'{type(error).__name__}: {_first_line(str(error))}'
  where = {'build': ' in its constructor', 'run': ''}.get(
      getattr(error, 'phase', None), '')
  log = getattr(error, 'logfile', None)
  return (f"node '{node_id}' failed{where}: {what}"
          + (f' (log: {log})' if log else ''))


def _first_line(text: str, limit: int = 300) -> str:
  lines = [l.strip() for l in text.splitlines() if l.strip()]
  line = lines[0] if lines else '(no message)'
  return line if len(line) <= limit else line[:limit - 3] + '...'


def node_failure(label: str, node_id: str, node_traceback: str,
                 exception: Optional[BaseException] = None,
                 logfile: Optional[str] = None,
                 phase: Optional[str] = None) -> NodeError:
  """The error `wait()` raises for a failed node.

  With the node's `exception` (an `Exception`), a copy of it whose class is
  also a `NodeError`: `except ValueError` and `except launch.NodeError` both
  catch it and `str()` is the node's own message; a note names the node.
  Without one (the process died), a plain `NodeError`.
  """
  cls = None
  if isinstance(exception, Exception) and not isinstance(exception,
                                                          LaunchError):
    cls = _failure_class(type(exception))
  if cls is None:
    error = NodeError(label, node_id, node_traceback, logfile, phase)
    if exception is not None:
      error.__cause__ = exception
    return error
  error = cls.__new__(cls, *exception.args)
  error.args = exception.args
  error.__dict__.update(getattr(exception, '__dict__', {}))
  error.label = label
  error.node_id = node_id
  error.node_traceback = node_traceback
  error.logfile = logfile
  error.phase = phase
  error.__traceback__ = exception.__traceback__
  error.__cause__ = exception.__cause__
  error.__context__ = exception.__context__
  error.__suppress_context__ = exception.__suppress_context__
  error.__notes__ = list(getattr(exception, '__notes__', [])) + [
      _describe(label, node_id, node_traceback, logfile)]
  return error
