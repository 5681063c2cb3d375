"""The driver (`python -m repertory.run`) imports no TensorFlow: it reads the
agent's Config, checks the environment and builds the program graph with
TensorFlow, Sonnet and Reverb made unimportable, and every process's part
of the graph unpickles without them (each node imports what it builds)."""

import subprocess
import sys
import textwrap

import pytest

from repertory import agents
from repertory import run


def _run_blocked(code: str, tmp_path) -> str:
  code = textwrap.dedent('''
      import sys
      for name in ('tensorflow', 'sonnet', 'reverb'):
        sys.modules[name] = None  # Any import of them now fails loudly.
  ''') + textwrap.dedent(code)
  result = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, timeout=180, check=False, cwd=tmp_path)
  assert result.returncode == 0, result.stdout + result.stderr
  return result.stdout


def _build(tmp_path, agent: str, after: str, *extra_flags: str) -> str:
  """`run.build()` of `--agent=agent` in local_mp with TensorFlow blocked,
  then `after` (code that reads `program`); returns what it printed."""
  build = textwrap.dedent(f'''
      from absl import flags
      from repertory import run
      argv = ['run', '--agent={agent}', '--env=gym:CartPole-v1',
              '--lp_launch_type=local_mp', *{list(extra_flags)!r},
              '--logdir={tmp_path}/run']
      argv = run.define_config_flag('{agent}', argv)
      flags.FLAGS(argv)
      config, experiment, program = run.build()
  ''')
  return _run_blocked(build + textwrap.dedent(after), tmp_path)


def test_every_agent_config_is_read_without_tensorflow(tmp_path):
  out = _run_blocked(f'''
      from repertory import agents, run
      for name in {sorted(agents.AGENTS)!r}:
        agents.get(name).Config()
        print('CONFIG', name)
  ''', tmp_path)
  assert out.count('CONFIG') == len(agents.AGENTS), out


@pytest.mark.parametrize('agent', ['ppo', 'impala', 'seed'])
def test_driver_builds_and_pickles_the_program_without_tensorflow(
    agent, tmp_path):
  out = _build(tmp_path, agent, '''
      import cloudpickle
      from repertory.launch.backends import pickling
      for unit in program.units:
        # What each node process receives; it unpickles without TensorFlow.
        nodes = cloudpickle.loads(pickling.pickle_unit(unit))
        print('UNIT', unit.unit_id, sorted(n.label for n in nodes))
      print('HEAVY', [m for m in ('tensorflow', 'sonnet', 'reverb')
                      if sys.modules.get(m) is not None])
  ''')
  assert 'HEAVY []' in out, out
  # local_mp's default: the light nodes in the learner's process.
  learner_labels = {'ppo': "['counter', 'evaluator', 'learner', 'monitor', "
                           "'replay']",
                    'impala': "['counter', 'evaluator', 'learner', "
                              "'monitor', 'replay']",
                    'seed': "['counter', 'evaluator', 'learner', 'learner', "
                            "'monitor', 'replay']"}[agent]
  assert f'UNIT learner/0 {learner_labels}' in out, out
  # On this machine's cores: one actor process per core beyond the first.
  processes = run.actor_processes(0)
  if processes == 1:
    assert "UNIT actor/0 ['actor', 'actor']" in out, out
  else:
    assert "UNIT actor/0 ['actor']" in out, out
  assert out.count('UNIT') == 1 + min(processes, 2), out


def test_share_processes_off_keeps_a_process_per_node(tmp_path):
  out = _build(tmp_path, 'ppo', '''
      print('UNITS', [u.unit_id for u in program.units])
  ''', '--noshare_processes')
  assert ("UNITS ['replay/0', 'counter/0', 'learner/0', 'monitor/0', "
          "'evaluator/0', 'actor/0', 'actor/1']") in out, out


@pytest.mark.parametrize('processes,units', [
    (1, "[('actor/0', 3)]"),
    (2, "[('actor/0', 2), ('actor/2', 1)]"),
    (3, "[('actor/0', 1), ('actor/1', 1), ('actor/2', 1)]")])
def test_actor_processes_spreads_the_actors(processes, units, tmp_path):
  out = _build(tmp_path, 'ppo', '''
      print('ACTORS', [(u.unit_id, len(u.nodes)) for u in program.units
                       if u.label == 'actor'])
  ''', '--num_actors=3', f'--actor_processes={processes}')
  assert f'ACTORS {units}' in out, out


def test_actor_processes_on_ray_only_when_asked(tmp_path):
  code = '''
      print('ACTORS', [(u.unit_id, len(u.nodes)) for u in program.units
                       if u.label == 'actor'])
  '''
  flags = ('--num_actors=3', '--lp_launch_type=ray')
  out = _build(tmp_path, 'ppo', code, *flags)
  assert "ACTORS [('actor/0', 1), ('actor/1', 1), ('actor/2', 1)]" in out, out
  out = _build(tmp_path, 'ppo', code, *flags, '--actor_processes=1')
  assert "ACTORS [('actor/0', 3)]" in out, out


def test_actor_processes_auto_is_one_per_core_beyond_the_first():
  assert [run.actor_processes(0, cores=c) for c in (1, 2, 3, 16)] == [
      1, 1, 2, 15]
  assert run.actor_processes(4, cores=2) == 4


def test_restart_learner_keeps_the_learner_and_replay_apart(tmp_path):
  out = _build(tmp_path, 'ppo', '''
      print('UNITS', [(u.unit_id, len(u.nodes)) for u in program.units])
  ''', '--restart_learner', '--actor_processes=2')
  # The shared unit takes the place of the first of its units (counter/0).
  assert ("UNITS [('replay/0', 1), ('monitor/0', 3), ('learner/0', 1), "
          "('actor/0', 1), ('actor/1', 1)]") in out, out


def test_constants_named_without_importing_their_modules_match():
  # pylint: disable=g-import-not-at-top
  from repertory.agents.ppo import acting as ppo_acting
  from repertory.agents.ppo import program as ppo_program
  from repertory.agents.seed import program as seed_program
  from repertory.agents.actor_critic import networks
  # pylint: enable=g-import-not-at-top
  assert ppo_program.QUEUE == ppo_acting.QUEUE
  assert seed_program._POLICY == networks.POLICY  # pylint: disable=protected-access
