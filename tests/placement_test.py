"""Process placement is the experiment's: `run_experiment` and `python -m
repertory.run` place a program the same way (`placement.place`)."""

from repertory import experiment as experiment_lib
from repertory import placement
from repertory.agents import impala


def _units(tmp_path, **settings):
  settings.setdefault('launch_type', 'local_mp')
  experiment = experiment_lib.ExperimentConfig(
      agent='impala', env='catch', num_actors=4, logdir=str(tmp_path),
      **settings)
  program = impala.make_program(impala.Config(), experiment)
  placement.place(program, experiment)
  placement.place(program, experiment)  # Placing twice changes nothing.
  return [u.unit_id for u in program.units], program, experiment


def test_the_light_nodes_share_the_learner_s_process(tmp_path):
  units, program, experiment = _units(tmp_path)
  actor_units = placement.actor_processes(0)
  assert units[0] == 'learner/0'
  assert len(units) == 1 + min(4, actor_units)
  assert placement.actor_units(program) == min(4, actor_units)
  assert placement.max_restarts(program, experiment) == {
      'actor': 3, 'evaluator': 3}


def test_each_setting_as_its_flag(tmp_path):
  units, _, _ = _units(tmp_path, share_processes=False)
  assert len(units) == 5 + 4  # replay, counter, learner, monitor, evaluator.
  units, _, _ = _units(tmp_path / 'one', actor_processes=1)
  assert [u for u in units if u.startswith('actor')] == ['actor/0']
  _, program, experiment = _units(tmp_path / 'r', restart_learner=True,
                                  max_restarts=5)
  assert placement.max_restarts(program, experiment) == {
      'actor': 5, 'evaluator': 5, 'learner': 5}


def test_actor_processes_on_ray_only_when_asked(tmp_path):
  units, _, _ = _units(tmp_path, launch_type='ray')
  assert units == ['replay/0', 'counter/0', 'learner/0', 'monitor/0',
                   'evaluator/0', 'actor/0', 'actor/1', 'actor/2', 'actor/3']
  units, _, _ = _units(tmp_path / 'one', launch_type='ray', actor_processes=1)
  assert [u for u in units if u.startswith('actor')] == ['actor/0']
