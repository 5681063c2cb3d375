"""`python -m repertory.results RUNS... --out=docs/results.md`: see
repertory/results/__init__.py."""

import shlex
import sys
from typing import List

from absl import app
from absl import flags

from repertory import rundir
from repertory import results

_OUT = flags.DEFINE_string(
    'out', 'docs/results.md', 'The Markdown page to write; its figures go '
    'to the folder of the same name without .md (docs/results/).')


def main(argv: List[str]) -> None:
  if len(argv) < 2:
    sys.exit('repertory.results: error: pass run directories or folders '
             'holding them, e.g. python -m repertory.results runs/ '
             '--out=docs/results.md')
  command = shlex.join(['python', '-m', 'repertory.results', *sys.argv[1:]])
  try:
    written = results.write(argv[1:], _OUT.value, command)
  except (results.ResultsError, rundir.RunDirError) as e:
    sys.exit(f'repertory.results: error: {e}')
  for path in written:
    print(f'wrote {path}')


if __name__ == '__main__':
  app.run(main)
