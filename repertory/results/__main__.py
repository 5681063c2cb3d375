"""`python -m repertory.results RUNS... --out=docs/results.md
[--archive=docs/results/runs]`: see repertory/results/__init__.py."""

import shlex
import sys
from typing import List

from absl import app
from absl import flags

from repertory import rundir
from repertory import results
from repertory.results import archive
from repertory.results import bsuite

_OUT = flags.DEFINE_string(
    'out', 'docs/results.md', 'The Markdown page to write; its figures go '
    'to the folder of the same name without .md (docs/results/).')
_DOCUMENTED = flags.DEFINE_list(
    'documented', [], 'Markdown pages of the docs (docs/minatar.md,...): a '
    'column names, for each row, the page whose `python -m repertory.run` '
    'command its runs ran (flags compared but for --seed, --logdir and the '
    'game).')
_ARCHIVE = flags.DEFINE_string(
    'archive', None, 'A folder to copy the files the page reads from each '
    'finished run into (config, counts, results, progress, attempt '
    'records, a bsuite run\'s episodes, a sweep\'s command lines); the '
    'page is then written from that folder, which gathers runs over '
    'machines and outlives the run directories.')


def main(argv: List[str]) -> None:
  if len(argv) < 2:
    sys.exit('repertory.results: error: pass run directories or folders '
             'holding them, e.g. python -m repertory.results runs/ '
             '--out=docs/results.md')
  paths = argv[1:]
  command = shlex.join(['python', '-m', 'repertory.results', *sys.argv[1:]])
  try:
    if _ARCHIVE.value:
      results.check_output(_OUT.value, _DOCUMENTED.value)
      for run, copy in archive.keep(paths, _ARCHIVE.value):
        print(f'kept {run} as {copy}')
      paths = [_ARCHIVE.value]  # The page's command rebuilds it from there.
      command = shlex.join(
          ['python', '-m', 'repertory.results', _ARCHIVE.value,
           f'--out={_OUT.value}'] +
          ([f'--documented={",".join(_DOCUMENTED.value)}']
           if _DOCUMENTED.value else []))
    written = results.write(paths, _OUT.value, command, _DOCUMENTED.value)
  except (results.ResultsError, rundir.RunDirError,
          bsuite.BsuiteError) as e:
    sys.exit(f'repertory.results: error: {e}')
  for path in written:
    print(f'wrote {path}')


if __name__ == '__main__':
  app.run(main)
