"""`--config.<field>=<value>` overrides of a config dataclass, type-checked;
the fields of a config dataclass with their defaults and docs."""

import ast
import dataclasses
import inspect
import re
import typing
from typing import Any, Dict, Mapping

_TRUE = ('true', 'yes', '1')
_FALSE = ('false', 'no', '0')


def _parse(text: str, annotation: Any, field: str) -> Any:
  """Parses `text` as a value of the type `annotation`."""
  origin = typing.get_origin(annotation)
  args = typing.get_args(annotation)
  if origin is typing.Union:  # Optional[X] and X | None.
    if text.lower() == 'none' and type(None) in args:
      return None
    (annotation,) = [a for a in args if a is not type(None)][:1]
    return _parse(text, annotation, field)
  if annotation is bool:
    if text.lower() in _TRUE:
      return True
    if text.lower() in _FALSE:
      return False
    raise ValueError(f'--config.{field}={text!r}: expected true or false.')
  if annotation in (int, float):
    try:
      value = float(text) if annotation is float else int(float(text))
    except ValueError:
      raise ValueError(f'--config.{field}={text!r}: expected '
                       f'{annotation.__name__}.') from None
    if annotation is int and float(text) != value:
      raise ValueError(f'--config.{field}={text!r}: expected an integer.')
    return value
  if annotation is str:
    return text
  if origin in (tuple, list) or annotation in (tuple, list):
    try:
      value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
      raise ValueError(f'--config.{field}={text!r}: expected a '
                       'comma-separated sequence, e.g. 64,64.') from None
    value = value if isinstance(value, (tuple, list)) else (value,)
    return (origin or annotation)(value)
  raise ValueError(f'--config.{field}: fields of type {annotation} cannot be '
                   'set from the command line.')


def apply(config: Any, overrides: Mapping[str, str], owner: str = 'config'
          ) -> Any:
  """Returns a copy of dataclass `config` with the overrides applied.

  Raises:
    ValueError: naming the unknown field and the known ones, or the value that
      does not parse as the field's type. The dataclass's own validation
      (`__post_init__`) runs on the result.
  """
  hints = typing.get_type_hints(type(config))
  fields = {f.name for f in dataclasses.fields(config) if f.init}
  values: Dict[str, Any] = {}
  for name, text in overrides.items():
    if name not in fields:
      raise ValueError(f'Unknown config field {name!r} for {owner}; known '
                       f'fields: {", ".join(sorted(fields))}.')
    values[name] = _parse(text, hints[name], name)
  return dataclasses.replace(config, **values)


def field_docs(cls: type) -> Dict[str, str]:
  """{field: its text} from the 'Attributes:' sections of a dataclass's
  docstring and its dataclass bases' (Google style: `name: text`, continued
  on indented lines)."""
  docs: Dict[str, str] = {}
  for base in reversed(cls.__mro__[1:]):
    if dataclasses.is_dataclass(base):
      docs.update(_own_field_docs(base))
  docs.update(_own_field_docs(cls))
  return docs


def _own_field_docs(cls: type) -> Dict[str, str]:
  docs: Dict[str, str] = {}
  lines = inspect.cleandoc(cls.__doc__).splitlines() if cls.__doc__ else []
  inside, name, indent, docs_depth = False, None, 0, 0
  for line in lines:
    stripped = line.strip()
    if stripped == 'Attributes:':
      inside, indent = True, len(line) - len(line.lstrip()) + 1
      continue
    if not inside:
      continue
    if stripped and len(line) - len(line.lstrip()) < indent:
      break  # The section ended.
    match = re.match(r'\s*([A-Za-z_][\w, ]*):\s*(.*)', line)
    depth = len(line) - len(line.lstrip())
    if match and (name is None or depth <= docs_depth):
      docs_depth = depth
      names = [n.strip() for n in match.group(1).split(',')]
      for n in names:
        docs[n] = match.group(2)
      name = names
    elif name and stripped:
      for n in name:
        docs[n] += ' ' + stripped
  return docs


def describe(config: Any) -> str:
  """One line per field of dataclass `config`: name, type, default, doc."""
  docs = field_docs(type(config))
  hints = typing.get_type_hints(type(config))
  lines = []
  for field in dataclasses.fields(config):
    if not field.init:
      continue
    hint = hints[field.name]
    kind = (hint.__name__ if isinstance(hint, type)
            else str(hint).replace('typing.', ''))
    lines.append(f'  {field.name} ({kind}, default '
                 f'{getattr(config, field.name)!r}): '
                 f'{docs.get(field.name, "(undocumented)")}')
  return '\n'.join(lines)
