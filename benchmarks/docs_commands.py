r"""Runs every `python -m repertory.<module>` command of docs/*.md and README.md
briefly, and prints a table: each command's file and line, its status and
its last line.

  python benchmarks/docs_commands.py                   # every command
  python benchmarks/docs_commands.py --only=experiments --steps=3000
  python benchmarks/docs_commands.py --full --timeout=1800   # as written

With `--full`, training commands run with their own budget, as written (only
their `--logdir` moves), and a command passes only if it learns what it
claims: every run it made (one per seed of a sweep) ends with a final
evaluation (`eval_return_mean` of results.json) at or above the run's target
return (`stop_at_return` in its config.json: the command's
`--stop_at_return`, or the environment's solved return); a run without a
target passes on its exit status and its final evaluation is shown.

A command is taken from a ```sh (or ```bash, ```console) block, or a block
without a language that starts with a command (not output), with its `\`-continued lines joined: what follows
the last ` && ` (README's install comes first), a shell loop's variable as 0.
Training commands (`repertory.run`) run with
`--max_actor_steps` cut to `--steps` and their `--logdir` moved under a
temporary directory; each runs at most `--timeout` seconds, and passes if it
exits 0 (or on time, for a command that serves until stopped). Commands that
need something this script does not start (a Ray cluster, a remote
environment service, another program's output) are listed as skipped, with
the reason.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

from absl import app
from absl import flags

from repertory.results.documented import extract

_ONLY = flags.DEFINE_string('only', '', 'Only docs files whose name has this.')
_STEPS = flags.DEFINE_integer('steps', 2000, 'The --max_actor_steps of a '
                              'training command.')
_TIMEOUT = flags.DEFINE_integer('timeout', 300, 'Seconds per command.')
_FULL = flags.DEFINE_bool('full', False, 'Run training commands with their '
                          'own budget and check that each reaches its target '
                          'return.')

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What a command needs that this script does not provide: skipped.
NEEDS = {
    '--lp_launch_type=ray': 'a Ray cluster',
    'RAY_ADDRESS': 'a Ray cluster',
    'remote:': 'a remote environment service',
    '--ray_address': 'a Ray cluster',
    '<': 'a placeholder to fill in',
    '=... ': 'a placeholder to fill in',
}


def prepare(command: str, workdir: str) -> Tuple[Optional[List[str]],
                                                  Dict[str, str], str]:
  """(argv to run or None to skip, environment additions, why skipped)."""
  if command.startswith('python3 -m venv '):  # README's install, then it.
    command = command.rsplit(' && ', 1)[-1]
  command = re.sub(r'\$[a-z]\b', '0', command)  # A loop's variable: its first.
  words = shlex.split(command, comments=True)
  for needle, what in NEEDS.items():
    if needle in ' '.join(words) + ' ':
      return None, {}, f'needs {what}'
  if any('runs/' in w for w in words if not w.startswith('--logdir=')):
    return None, {}, "needs another command's run directory"
  env = {}
  while words and '=' in words[0] and not words[0].startswith('-'):
    name, _, value = words.pop(0).partition('=')
    env[name] = value
  if words[:1] != ['python']:
    return None, {}, 'not a plain python command'
  argv = [sys.executable, *words[1:]]
  if words[1:3] == ['-m', 'repertory.run'] and not any(
      w in ('--help', '--helpfull', '-h') for w in words):
    cut = ('--logdir=',) if _FULL.value else ('--max_actor_steps=',
                                               '--logdir=')
    argv = [a for a in argv if not a.startswith(cut)]
    if not _FULL.value:
      argv.append(f'--max_actor_steps={_STEPS.value}')
    argv.append(
        f'--logdir={os.path.join(workdir, str(len(os.listdir(workdir))))}')
  return argv, env, ''


def run_one(argv: List[str], env: Dict[str, str]) -> Tuple[str, str]:
  """(status, last line of output)."""
  try:
    result = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT,
                            timeout=_TIMEOUT.value,
                            env={**os.environ, **env})
  except subprocess.TimeoutExpired:
    return 'timeout', ''
  lines = (result.stdout + result.stderr).strip().splitlines()
  return ('ok' if result.returncode == 0 else f'exit {result.returncode}',
          lines[-1][:100] if lines else '')


def judge(logdir: str) -> Tuple[bool, str]:
  """(learned what it claims, summary) of the runs under a command's logdir.

  Each run directory (the logdir itself, or one per seed of a sweep) holds a
  config.json and, once it finished, a results.json.
  """
  runs = []
  for top, folders, names in os.walk(logdir):
    if 'config.json' in names:
      runs.append(top)
      folders.clear()  # a run's own folders (attempts/) are not runs
  runs.sort()
  if not runs:
    return False, 'no run directory written'
  learned, parts = True, []
  for run in runs:
    with open(os.path.join(run, 'config.json')) as f:
      target = json.load(f)['experiment'].get('stop_at_return')
    try:
      with open(os.path.join(run, 'results.json')) as f:
        final = json.load(f).get('eval_return_mean')
    except FileNotFoundError:
      final = None
    reached = final is not None and (target is None or final >= target)
    learned &= reached
    parts.append(f'{final if final is None else round(final, 3)}'
                 f'{"" if target is None else f" (target {target})"}')
  return learned, 'final evaluation ' + ', '.join(parts)


def main(argv: List[str]) -> None:
  del argv
  docs = [os.path.join(ROOT, 'README.md')] + sorted(
      os.path.join(ROOT, 'docs', name)
      for name in os.listdir(os.path.join(ROOT, 'docs'))
      if name.endswith('.md'))
  failed = 0
  with tempfile.TemporaryDirectory() as workdir:
    for path in docs:
      if _ONLY.value and _ONLY.value not in os.path.basename(path):
        continue
      for line, command in extract(path):
        where = f'{os.path.relpath(path, ROOT)}:{line}'
        prepared, env, why = prepare(command, workdir)
        if prepared is None:
          print(f'{where}\tskipped ({why})\t{command}', flush=True)
          continue
        status, last = run_one(prepared, env)
        logdir = next((a.split('=', 1)[1] for a in prepared
                       if a.startswith('--logdir=')), None)
        if _FULL.value and logdir and status == 'ok':
          learned, last = judge(logdir)
          status = 'learned' if learned else 'did not learn'
        failed += status not in ('ok', 'learned')
        print(f'{where}\t{status}\t{command}\t{last}', flush=True)
  sys.exit(1 if failed else 0)


if __name__ == '__main__':
  app.run(main)
