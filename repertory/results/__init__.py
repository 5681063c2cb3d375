r"""The results page, generated from run directories.

  python -m repertory.results runs/ --out=docs/results.md

Each argument is a run directory (the `--logdir` of `python -m
repertory.run`, holding its `config.json`) or a folder searched for them.
Finished runs with the same agent, environment and settings but for
`--seed` and `--logdir` are one row of the table: the final greedy
evaluation and the training return (mean and 95% Student-t interval over
seeds), frames, wall time, and a published reference where one is known
(`runs.MINATAR_REFERENCES`). Per task, one figure of learning curves
(`<out without .md>/<task>.png`: seeds, their mean and range, the
reference); per agent, each seed's figures, the machine's cores, load
and processor when it started, and the exact command of each attempt
(`attempts/<n>/attempt.json`).

The same run directories give the same page and figures, byte for byte:
nothing on the page comes from anywhere but the runs and the command line.
Bad input (a path that does not exist, no finished run, a corrupt run file)
is one line on stderr, before anything is written.

`--documented=docs/minatar.md,...` adds a column naming, for each row, the
page whose `python -m repertory.run` command its runs ran (`documented`).

`--archive=<folder>` first copies the files the page reads from each
finished run into the folder (`archive.keep`) and writes the page from
there, so the page can be rebuilt after the run directories are gone.

From Python: `write(paths, out, command, documented_pages)` returns the
paths it wrote.
"""

import os
from typing import List, Sequence

from repertory.results import documented
from repertory.results import figures
from repertory.results import page
from repertory.results import runs as runs_lib

ResultsError = runs_lib.ResultsError


def check_output(out: str, documented_pages: Sequence[str] = ()) -> None:
  """Raises `ResultsError` unless `out` names a Markdown file, the figures
  can be drawn and every documented page can be read."""
  if not out.endswith('.md'):
    raise ResultsError(f'--out={out} must name a Markdown file (.md).')
  figures.check_matplotlib()
  documented.read(documented_pages)


def write(paths: Sequence[str], out: str, command: str,
          documented_pages: Sequence[str] = ()) -> List[str]:
  """Writes the page `out` and its figures from the runs under `paths`;
  returns the files written (the page last).

  Args:
    paths: run directories or folders holding them.
    out: the Markdown page (its figures go to `<out without .md>/`).
    command: the command line the header shows.
    documented_pages: Markdown pages of the docs; a column names, for each
      row, the page whose `python -m repertory.run` command its runs ran
      (`documented`). None without pages.

  Raises:
    ResultsError, rundir.RunDirError: bad input (one line), before
      anything is written.
  """
  check_output(out, documented_pages)
  commands = documented.read(documented_pages)
  finished, unfinished = runs_lib.find_runs(paths)
  groups = runs_lib.group_runs([runs_lib.read_run(p) for p in finished])
  folder = os.path.splitext(out)[0]
  envs = sorted({g.env for g in groups}, key=runs_lib.task_order)
  pngs = {env: os.path.join(folder, f'{figures.slug(env)}.png')
          for env in envs}
  if len(set(pngs.values())) < len(pngs):
    raise ResultsError(f'Tasks {envs} give the same figure names; run the '
                       'command on each separately.')
  base = os.path.dirname(os.path.abspath(out))
  links = {env: _link(png, base) for env, png in pngs.items()}
  sources = None
  if documented_pages:
    sources = {}
    for group in groups:
      source = documented.source(group, commands)
      if source:
        sources[id(group)] = (source, _link(source, base))
  text = page.render(groups, unfinished, command, links, sources)
  written = []
  for env in envs:
    written.append(figures.draw(
        env, [g for g in groups if g.env == env], runs_lib.reference(env),
        pngs[env]))
  with open(out + '.tmp', 'w') as f:
    f.write(text)
  os.replace(out + '.tmp', out)
  return written + [out]


def _link(path: str, base: str) -> str:
  """`path` relative to the folder `base`, with forward slashes."""
  return os.path.relpath(os.path.abspath(path), base).replace(os.sep, '/')
