"""Pickling a program's units for their Ray actors, and saying why not.

A unit's nodes travel to their process as cloudpickle bytes (`pickle_unit`);
functions defined in `__main__` travel by value and keep their file names,
so that tracebacks in the node's process show file and line. A node that
does not pickle is named with the deepest part of it that fails.
"""

import io
import types
from typing import Optional

import cloudpickle

from repertory.launch.api import errors
from repertory.launch.api import handles as handles_lib
from repertory.launch.api import nodes as nodes_lib
from repertory.launch.api import program as program_lib
from repertory.launch.process import cloudpickle_internals


class _Pickler(cloudpickle.Pickler):
  """cloudpickle that keeps the file names of functions pickled by value
  (`__main__` code): cloudpickle writes '<dynamic-code>', and tracebacks in
  the node's process would show neither file nor line."""

  def reducer_override(self, obj):
    if isinstance(obj, types.CodeType):
      reduced = _code_reduce(obj)
      if reduced is not NotImplemented:
        return reduced
    return super().reducer_override(obj)


def _code_reduce(code: types.CodeType):
  reduced = cloudpickle_internals.code_reduce(code)
  if reduced is NotImplemented:
    return reduced
  rebuild, args = reduced
  args = tuple(code.co_filename if a == '<dynamic-code>' else a for a in args)
  return rebuild, args


def _dumps(obj) -> bytes:
  with io.BytesIO() as f:
    _Pickler(f, protocol=cloudpickle.DEFAULT_PROTOCOL).dump(obj)
    return f.getvalue()


def pickle_unit(unit: program_lib.Unit) -> bytes:
  """cloudpickles a unit's nodes; names the culprit when that fails."""
  try:
    return _dumps(unit.nodes)
  except Exception as e:  # pylint: disable=broad-except
    for node in unit.nodes:
      _explain_pickling_failure(node)
    raise errors.NodePicklingError(
        f"Unit '{unit.unit_id}' cannot be pickled: {e!r}") from e


def _picklable(obj) -> Optional[Exception]:
  try:
    cloudpickle.dumps(obj)
    return None
  except Exception as e:  # pylint: disable=broad-except
    return e


def _find_culprit(obj, path: str):
  """The deepest (path, object, error) in `obj` that does not pickle."""
  error = _picklable(obj)
  if error is None:
    return None
  children = []
  if isinstance(obj, (list, tuple)):
    children = [(f'{path}[{i}]', x) for i, x in enumerate(obj)]
  elif isinstance(obj, dict):
    children = [(f'{path}[{k!r}]', v) for k, v in obj.items()]
  elif isinstance(obj, handles_lib.Deferred):
    children = [(f'{path}.ctor', obj.ctor), (f'{path}.args', obj.args),
                (f'{path}.kwargs', obj.kwargs)]
  elif hasattr(obj, '__dict__') and not isinstance(obj, type):
    children = [(f'{path}.{k}', v) for k, v in vars(obj).items()]
  for child_path, child in children:
    found = _find_culprit(child, child_path)
    if found is not None:
      return found
  return path, obj, error


def _explain_pickling_failure(node: nodes_lib.Node) -> None:
  if _picklable(node) is None:
    return
  parts = [('the callable', getattr(node, '_ctor', getattr(node, '_fn', None)))]
  args = node.arguments()
  if args:
    parts += [('args', args[0]), ('kwargs', args[1])]
  else:
    parts += [('node', node)]
  for name, value in parts:
    found = _find_culprit(value, name)
    if found is not None:
      path, obj, error = found
      raise errors.NodePicklingError(
          f"Node '{node.node_id}' ({node.description}) cannot be pickled to "
          f'start it in its own process: {path} = {repr(obj)[:200]} (type '
          f'{type(obj).__name__}) fails with {error!r}. Build such objects '
          'inside the node instead: pass launch.Deferred(make_it, *args) '
          '(e.g. an environment factory) in place of the object.')
