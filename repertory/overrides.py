"""The `--config` flag: an agent's `Config` and the run's checkpoint settings,
parsed once by `ml_collections.config_flags`.

    holder = overrides.define_config_flag(impala.Config(), argv)
    flags.FLAGS(argv)
    config, checkpoint = overrides.configs_from_flag(holder.value,
                                                     impala.Config)

`--config.<field>=<value>` sets a field of the agent's `Config` and
`--config.checkpoint.<field>=<value>` one of `CheckpointSettings`; an
`Optional` field takes `none`. The flag's value is a dataclass made from the
two (`flag_dataclass`); `configs_from_flag` turns it back into the agent's
`Config` and the `CheckpointSettings`, each validated by its
`__post_init__`. `apply` sets fields from text with the same parsers.
"""

import dataclasses
import inspect
import re
import typing
from typing import Any, Dict, Mapping, Sequence, Tuple, Type

from absl import flags
from ml_collections import config_flags
from ml_collections.config_flags import config_flags as config_flags_impl

from repertory.components import checkpointing

CHECKPOINT_FIELD = 'checkpoint'


class ConfigError(ValueError):
  """A `--config` value that cannot be used; the message is one line."""


class _NoneOrParser(flags.ArgumentParser):
  """Parses 'none' as None, anything else with the parser of the type."""

  def __init__(self, parser: flags.ArgumentParser):
    super().__init__()
    self._parser = parser

  def parse(self, argument: Any) -> Any:
    if argument is None or (isinstance(argument, str)
                            and argument.lower() == 'none'):
      return None
    return self._parser.parse(argument)

  def flag_type(self) -> str:
    return f'{self._parser.flag_type()} or none'


_NONE_OR: Dict[type, type] = {}


def _parser_for(annotation: Any) -> flags.ArgumentParser:
  """The ml_collections parser of a (non-Optional) field type."""
  # ml_collections' own parsers by type (its public API registers them).
  table = config_flags_impl._FIELD_TYPE_TO_PARSER  # pylint: disable=protected-access
  origin = typing.get_origin(annotation) or annotation
  if origin in table:
    return table[origin]
  raise ConfigError(f'fields of type {annotation} cannot be set from the '
                    'command line.')


def _flag_type(annotation: Any) -> Any:
  """The type a flag field is declared with: `Optional[X]` becomes a marker
  type whose registered parser also takes 'none' (ml_collections takes
  'none' only for dataclass fields)."""
  if typing.get_origin(annotation) is not typing.Union:
    return annotation
  inner = [a for a in typing.get_args(annotation) if a is not type(None)]
  if len(inner) != 1 or type(None) not in typing.get_args(annotation):
    return annotation
  base = typing.get_origin(inner[0]) or inner[0]
  if base not in _NONE_OR:
    marker = type(f'NoneOr{base.__name__.title()}', (), {})
    config_flags.register_flag_parser_for_type(
        marker, _NoneOrParser(_parser_for(inner[0])))
    _NONE_OR[base] = marker
  return _NONE_OR[base]


def _mirror(cls: Type[Any], extra: Sequence[Tuple[str, Any, Any]] = ()
            ) -> Type[Any]:
  """A dataclass with the init fields of `cls` (Optional ones marked) and
  `extra` fields, no validation: what the flag parses into."""
  hints = typing.get_type_hints(cls)
  fields = []
  for field in dataclasses.fields(cls):
    if not field.init:
      continue
    default = (field.default if field.default is not dataclasses.MISSING
               else dataclasses.MISSING)
    spec = (dataclasses.field(default=default)
            if default is not dataclasses.MISSING else
            dataclasses.field(default_factory=field.default_factory))
    fields.append((field.name, _flag_type(hints[field.name]), spec))
  fields += list(extra)
  return dataclasses.make_dataclass(f'{cls.__name__}Flag', fields)


def flag_dataclass(agent_config: Any) -> Any:
  """The value of `--config` for `agent_config`: its fields, with its values,
  and `checkpoint` (`CheckpointSettings` at its defaults)."""
  checkpoint_cls = _mirror(checkpointing.CheckpointSettings)
  if CHECKPOINT_FIELD in {f.name for f in dataclasses.fields(agent_config)}:
    raise ConfigError(f'{type(agent_config).__name__} has a field named '
                      f'{CHECKPOINT_FIELD!r}, which --config keeps for the '
                      'checkpoint settings.')
  cls = _mirror(type(agent_config), [(
      CHECKPOINT_FIELD, checkpoint_cls,
      dataclasses.field(default_factory=checkpoint_cls))])
  values = {f.name: getattr(agent_config, f.name)
            for f in dataclasses.fields(agent_config) if f.init}
  return cls(**values)


def define_config_flag(agent_config: Any, argv: Sequence[str],
                       owner: str = 'the agent',
                       flag_values: flags.FlagValues = flags.FLAGS) -> Any:
  """Defines `--config` for `agent_config` (`argv`: the command line whose
  `--config.*` overrides it reads); returns the flag's holder.

  Raises:
    ConfigError: an override names an unknown field (one line naming it and
      the known ones).
  """
  try:
    return config_flags.DEFINE_config_dataclass(
        'config', flag_dataclass(agent_config),
        f'Fields of {owner}\'s Config: --config.<field>=<value>; the '
        'checkpoint settings: --config.checkpoint.<field>=<value>.',
        flag_values=flag_values, sys_argv=list(argv))
  except KeyError as e:
    raise ConfigError(_unknown_field(e, agent_config, owner)) from None


def _unknown_field(error: Exception, agent_config: Any, owner: str) -> str:
  match = re.search(r"Field (\S+) not found on dataclass .*?(\w+)Flag'",
                    str(error))
  name = match.group(1) if match else str(error).strip('"\'')
  if match and match.group(2) == 'CheckpointSettings':
    name, fields = f'checkpoint.{name}', _init_fields(
        checkpointing.CheckpointSettings)
    fields = [f'checkpoint.{f}' for f in fields]
  else:
    fields = _init_fields(type(agent_config)) + [f'{CHECKPOINT_FIELD}.*']
  if name in checkpointing.LEGACY_AGENT_FIELDS:
    return (f'--config.{name} was renamed --config.checkpoint.'
            f'{checkpointing.LEGACY_AGENT_FIELDS[name]}.')
  return (f'Unknown config field {name!r} for {owner}; known fields: '
          f'{", ".join(fields)}.')


def _init_fields(cls: Type[Any]) -> list:
  return sorted(f.name for f in dataclasses.fields(cls) if f.init)


def configs_from_flag(value: Any, config_cls: Type[Any],
                      owner: str = 'the agent'
                      ) -> Tuple[Any, checkpointing.CheckpointSettings]:
  """(the agent's `Config`, `CheckpointSettings`) from the `--config` value,
  each validated by its own `__post_init__` (`ConfigError`: one line)."""
  fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
  checkpoint = fields.pop(CHECKPOINT_FIELD)
  try:
    settings = checkpointing.CheckpointSettings(**dataclasses.asdict(
        checkpoint))
    config = config_cls(**fields)
  except (TypeError, ValueError) as e:
    raise ConfigError(f'{owner}: {e}') from None
  return config, settings


def parse_value(text: str, annotation: Any, field: str) -> Any:
  """Parses `text` as the type `annotation` with the `--config` parsers."""
  parser = _parser_for(_flag_type(annotation)) if typing.get_origin(
      annotation) is typing.Union else _parser_for(annotation)
  try:
    value = parser.parse(text)
  except (ValueError, TypeError, SyntaxError) as e:
    raise ConfigError(f'--config.{field}={text!r}: {e}') from None
  return value


def to_text(value: Any) -> str:
  """A field's value as `--config.<field>=` takes it back."""
  if value is None:
    return 'none'
  if isinstance(value, bool):
    return str(value).lower()
  if isinstance(value, (tuple, list)):
    return ','.join(to_text(v) for v in value) + (',' if len(value) == 1
                                                  else '')
  return str(value)


def apply(config: Any, overrides: Mapping[str, str], owner: str = 'config'
          ) -> Any:
  """A copy of dataclass `config` with fields set from text (as `--config`
  parses them); its `__post_init__` validates the result.

  Raises:
    ValueError: naming an unknown field and the known ones, or a value that
      does not parse as its field's type.
  """
  hints = typing.get_type_hints(type(config))
  fields = _init_fields(type(config))
  values: Dict[str, Any] = {}
  for name, text in overrides.items():
    if name not in fields:
      raise ConfigError(f'Unknown config field {name!r} for {owner}; known '
                        f'fields: {", ".join(fields)}.')
    values[name] = parse_value(text, hints[name], name)
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


def describe(config: Any, prefix: str = '') -> str:
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
    lines.append(f'  {prefix}{field.name} ({kind}, default '
                 f'{getattr(config, field.name)!r}): '
                 f'{docs.get(field.name, "(undocumented)")}')
  return '\n'.join(lines)

