"""`--selfplay=<rule>`: self-play versions of IMPALA, SEED and PPO.

    python -m repertory.run --agent=impala --env=openspiel:kuhn_poker --selfplay=pfsp
    python -m repertory.run --agent=ppo --env=openspiel:kuhn_poker --selfplay=latest

runs the selfplay agent with the named agent's loss and acting:

| --agent | runs | policy_loss | inference |
|---|---|---|---|
| impala | selfplay | vtrace | local (actors play every policy) |
| seed | selfplay | vtrace | server (central inference, opponents too) |
| ppo | selfplay | ppo | local |
| selfplay | selfplay | (its --config.policy_loss) | (its --config.inference) |

and `--config.matchmaking=<rule>`. Other `--config.<field>` arguments are
the selfplay agent's (`repertory/agents/selfplay/config.py`), among them
IMPALA's recurrent options (`use_lstm`, `lstm_size`, `unroll_length`,
`hidden_sizes`); one of the named agent's options that self-play does not
take (e.g. IMPALA's `shared_torso`) is refused in one line naming those it
takes. Imports neither TensorFlow nor Reverb.
"""

import dataclasses
from typing import Dict, List, Sequence

from repertory.agents.selfplay import config as config_lib
from repertory.components import checkpointing
from repertory.agents.actor_critic import config as actor_critic_config

FLAG = 'selfplay'
# --agent -> the selfplay agent's settings that make it that agent's variant.
VARIANTS: Dict[str, Dict[str, str]] = {
    'impala': {'policy_loss': 'vtrace', 'inference': 'local'},
    'seed': {'policy_loss': 'vtrace', 'inference': 'server'},
    'ppo': {'policy_loss': 'ppo', 'inference': 'local'},
    'selfplay': {},
}


def _value(argv: Sequence[str], name: str):
  """(value of the last --name=value / --name value, argv without them)."""
  value, rest, skip = None, [], False
  for i, arg in enumerate(argv):
    if skip:
      skip = False
      continue
    if arg.startswith(f'--{name}='):
      value = arg.split('=', 1)[1]
      continue
    if arg == f'--{name}' and i + 1 < len(argv):
      value, skip = argv[i + 1], True
      continue
    rest.append(arg)
  return value, rest


def rewrite_argv(argv: Sequence[str], agent: str) -> List[str]:
  """`argv` with `--selfplay=<rule>` turned into the selfplay agent's flags
  (`argv` unchanged without it). `agent` is the `--agent` in effect.

  Raises:
    ValueError: a rule or agent without a self-play variant, or a
      `--config.<field>` that contradicts the variant (one line each).
  """
  rule, rest = _value(argv, FLAG)
  if rule is None:
    return list(argv)
  if rule not in config_lib.MATCHMAKING:
    raise ValueError(f'--selfplay={rule!r}; choose one of '
                     f'{", ".join(config_lib.MATCHMAKING)}.')
  if agent not in VARIANTS:
    raise ValueError(f'--selfplay works with --agent={", ".join(VARIANTS)}; '
                     f'got --agent={agent}.')
  settings = dict(VARIANTS[agent], matchmaking=rule)
  for field, value in settings.items():
    given, _ = _value(rest, f'config.{field}')
    if given is not None and given != value:
      raise ValueError(f'--agent={agent} --selfplay={rule} sets '
                       f'--config.{field}={value}; got --config.{field}='
                       f'{given}.')
  _check_fields(rest, agent, rule)
  _, rest = _value(rest, 'agent')
  return rest[:1] + ['--agent=selfplay'] + [
      f'--config.{k}={v}' for k, v in settings.items()] + rest[1:]


def _check_fields(argv: Sequence[str], agent: str, rule: str) -> None:
  """Refuses a `--config.<field>` the selfplay agent does not have, naming
  the named agent's options that it takes (IMPALA's and SEED's: those of
  `ActorCriticConfig` that the selfplay `Config` shares)."""
  fields = {f.name for f in dataclasses.fields(config_lib.Config)}
  for arg in argv:
    if not arg.startswith('--config.'):
      continue
    name = arg[len('--config.'):].split('=', 1)[0]
    rest, _ = checkpointing.split_overrides({name: ''})
    if not rest or name in fields:
      continue  # A checkpoint setting, or one of the selfplay agent's.
    if agent in ('impala', 'seed'):
      shared = sorted(fields & {f.name for f in dataclasses.fields(
          actor_critic_config.ActorCriticConfig)})
      takes = f"self-play takes these of {agent}'s: {', '.join(shared)}"
    else:
      takes = f"it takes the selfplay agent's: {', '.join(sorted(fields))}"
    raise ValueError(f'--config.{name} does not apply to --agent={agent} '
                     f'--selfplay={rule}; {takes} (see --agent=selfplay '
                     '--help).')
