"""`python -m repertory.run`: flag errors before anything starts, and a short
real run that writes results.json."""

import json
import os
import re
import signal
import subprocess
import sys

import portpicker
import pytest

from repertory import experiment as experiment_lib
from repertory import run
from repertory import testing

REQUIRED_RESULTS = ('agent', 'env', 'launch_type', 'num_actors', 'actor_steps',
                    'learner_steps', 'wall_seconds', 'actor_steps_per_second',
                    'episode_return_mean', 'eval_return_mean',
                    'policy_lag_mean')


def _run(*args, timeout=300):
  return subprocess.run([sys.executable, '-m', 'repertory.run', *args],
                        capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize('args, message', [
    (['--agent=nope'], "Unknown agent 'nope'; known agents: "),
    (['--env=nope'], "Unknown environment spec 'nope'"),
    (['--config.nope=1'], "Unknown config field 'nope' for agent 'impala'"),
    (['--config.unroll_length=x'], "--config.unroll_length=x: invalid"),
    (['--config.checkpoint.nope=1'], "Unknown config field 'checkpoint.nope'"),
    (['--config.checkpoint_every_steps=5'],
     'renamed --config.checkpoint.every_steps'),
    (['--config.checkpoint.to_keep=0'], 'to_keep must be a positive int'),
    (['--actor_processes=-1'], 'actor_processes=-1 must be >= 0'),
    (['--league_exploiters=1'], '--league_exploiters need --league=<rule>'),
    (['--env=openspiel:kuhn_poker', '--league=pfsp',
      '--league_exploiters=-2'], '--league_exploiters=-2: the number of main '
     'exploiters must be an int >= 0'),
    (['--env=openspiel:kuhn_poker', '--league=latest',
      '--league_exploiters=1'],
     '--league_exploiters=1 with --league=latest: main plays only'),
    (['--agent=seed', '--config.inference_placement=gpu'],
     "inference_placement='gpu'"),
    (['--config.max_queue_size=4'],  # The default batch_size is 8.
     'Config.batch_size=8 exceeds max_queue_size=4'),
    (['--agent=seed', '--envs_per_actor=3', '--config.env_groups=2'],
     'Config.env_groups=2 must divide envs_per_actor=3'),
    (['--lp_launch_type=local_mp', f'--lp_resources=actor=cpus:{10**6}'],
     "local_resources['actor']['cpus'] must be a list of CPU core ids from"),
    (['--lp_launch_type=local_mp', '--lp_resources=nope=cpu:1'],
     "local_resources names group 'nope', which is not in program"),
    (['--lp_launch_type=local_mp', '--lp_resources=learner=cpu:1,gpux:1'],
     "Unknown resource 'gpux' for group 'learner': the local Ray instance "
     "of local_mp has only ('cpu', 'gpu', 'memory', 'cpus')"),
])
def test_bad_input_is_one_clear_error_before_anything_starts(tmp_path, args,
                                                             message):
  logdir = os.path.join(tmp_path, 'run')
  result = _run(*args, f'--logdir={logdir}', timeout=120)
  assert result.returncode != 0
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line.startswith('repertory.run: error: ')
  assert message in last_line
  assert not os.path.exists(logdir)  # Nothing was started or written.


@pytest.mark.parametrize('sweep', [(), ('--seeds=2',)])
def test_no_ray_cluster_at_the_address_is_one_clear_error(tmp_path, sweep):
  address = f'127.0.0.1:{portpicker.pick_unused_port()}'
  result = _run('--lp_launch_type=ray', f'--ray_address={address}', *sweep,
                f'--logdir={tmp_path}/run', timeout=120)
  assert result.returncode == 1
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line.startswith(
      f'repertory.run: error: No Ray cluster answers at {address} ')
  assert 'ray start --head' in last_line
  assert not os.path.exists(f'{tmp_path}/run')  # No config.json, no attempt.


def test_config_overrides_are_checked_together(tmp_path):
  # Each alone breaks a rule of the Config (batch_size <= max_queue_size);
  # both together are valid and must not be refused one by one.
  logdir = os.path.join(tmp_path, 'run')
  result = _run('--lp_launch_type=test_mt', '--num_actors=1',
                '--envs_per_actor=1', '--max_actor_steps=40',
                '--eval_episodes=1', '--config.batch_size=4',
                '--config.max_queue_size=4', '--config.unroll_length=5',
                f'--logdir={logdir}', timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
  with open(os.path.join(logdir, 'config.json')) as f:
    config = json.load(f)['agent']
  assert (config['batch_size'], config['max_queue_size']) == (4, 4)


def test_help_shows_the_shared_flags_and_the_agents_fields():
  result = _run('--agent=ppo', '--help', timeout=120)
  assert result.returncode == 0, result.stderr[-2000:]
  text = result.stdout
  for flag in ('--lp_launch_type', '--max_actor_steps', '--eval_every_steps',
               '--stop_at_return', '--num_actors'):
    assert f'\n  {flag}: ' in text, flag
  # One default per setting: the flag's is the dataclass's.
  assert (f'(default: {experiment_lib.ExperimentConfig.max_actor_steps})'
          in text)
  assert "--config.<field> of agent 'ppo':" in text
  assert '  unroll_length (int, default 32): steps each environment' in text
  assert 'value_clip_epsilon (Optional[float], default None)' in text
  # The checkpoint settings every agent shares, under their flag names.
  assert '--config.checkpoint.<field> (every agent):' in text
  for field in ('every_steps', 'every_minutes', 'to_keep', 'max_bad_updates',
                'replay_every_minutes'):
    assert f'\n  checkpoint.{field} (' in text, field


def test_a_script_built_on_run_shows_the_same_help():
  script = os.path.join(os.path.dirname(__file__), '..', 'examples',
                        'custom_agent.py')
  result = subprocess.run([sys.executable, script, '--help'],
                          capture_output=True, text=True, timeout=120)
  assert result.returncode == 0, result.stderr[-2000:]
  assert '\n  --lp_launch_type: ' in result.stdout
  assert "--config.<field> of agent 'a2c':" in result.stdout


def test_unknown_flag_is_one_line():
  result = _run('--max_actor_step=10', timeout=120)
  assert result.returncode != 0
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line.startswith('repertory.run: error: ')
  assert 'max_actor_step' in last_line


@pytest.mark.timeout(900)  # A whole run (start-up, TF tracing) in a subprocess.
@pytest.mark.parametrize('agent', ['impala', 'seed'])
def test_short_run_writes_results(tmp_path, agent):
  logdir = os.path.join(tmp_path, 'run')
  result = _run(f'--agent={agent}', '--lp_launch_type=local_mt',
                '--num_actors=2', '--envs_per_actor=2',
                '--max_actor_steps=300', '--eval_episodes=2',
                f'--logdir={logdir}', '--config.unroll_length=5',
                '--config.batch_size=2', '--config.max_queue_size=8',
                '--config.hidden_sizes=16', '--config.clip_rho_threshold=none',
                timeout=800)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  with open(os.path.join(logdir, 'results.json')) as f:
    results = json.load(f)
  for key in REQUIRED_RESULTS:
    assert key in results, key
  assert results['agent'] == agent
  assert results['launch_type'] == 'local_mt'
  assert results['actor_steps'] >= 300
  assert results['learner_steps'] >= 1
  assert 'actor_steps=' in result.stdout  # Live progress was shown.
  with open(os.path.join(logdir, 'config.json')) as f:
    config = json.load(f)['agent']
  assert config['unroll_length'] == 5 and config['hidden_sizes'] == [16]
  assert config['clip_rho_threshold'] is None  # Optional fields take none.


@pytest.mark.timeout(900)
def test_ctrl_c_names_the_checkpoint_and_the_resume_command(tmp_path):
  logdir = os.path.join(tmp_path, 'run')
  args = ['--lp_launch_type=local_mt', '--num_actors=1', '--envs_per_actor=2',
          '--max_actor_steps=100000000', '--progress_every_seconds=1',
          '--eval_episodes=1', '--config.unroll_length=5',
          '--config.batch_size=2', '--config.hidden_sizes=16']
  process = subprocess.Popen(
      [sys.executable, '-m', 'repertory.run', *args, f'--logdir={logdir}'],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      preexec_fn=testing.like_a_shell)
  # Wait for a progress line with steps taken (on a loaded machine the first
  # lines can still say actor_steps=0, and a run stopped then has no steps
  # to resume at).
  seen = []
  for line in process.stdout:
    seen.append(line)
    taken = re.search(r'actor_steps=(\d+)', line)
    if taken and int(taken.group(1)) > 0:
      break
  process.send_signal(signal.SIGINT)
  stdout, stderr = process.communicate(timeout=300)
  # A shell's status for a command Ctrl-C ended (not a failure's 1).
  assert process.returncode == 130, (''.join(seen) + stdout)[-3000:] + (
      stderr[-3000:])
  assert 'Traceback' not in stderr, stderr[-3000:]
  assert f'Checkpoints are in {logdir}/checkpoints' in stderr
  resume = stderr.strip().splitlines()[-1].strip()
  assert resume.startswith('python -m repertory.run ')
  assert f'--logdir={logdir}' in resume and '--config.unroll_length=5' in resume
  del stdout
  # The rerun (with a budget a little above the steps taken: a spent budget
  # is refused, see rundir_test) says where it resumed.
  with open(os.path.join(logdir, 'counts.json')) as f:
    taken = int(json.load(f).get('actor_steps', 0))
  result = _run(*args[:3], f'--max_actor_steps={taken + 20}', *args[4:],
                f'--logdir={logdir}', timeout=800)
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'Resumed at actor_steps=' in result.stdout


_SCRIPT_WITH_A_REGISTERED_ENV = '''
import threading
from repertory import environments
from repertory import run
from repertory.environments import catch


def make(seed=None):
  """Builds in the launcher's main thread only (as a registration that does
  not reach the nodes)."""
  if threading.current_thread() is not threading.main_thread():
    raise ValueError("Unknown environment spec 'reacher' (in a node)")
  return catch.Catch(seed=seed)


environments.register('reacher', make)
if __name__ == '__main__':
  run.run()
'''


def _run_script(tmp_path, *args):
  script = os.path.join(tmp_path, 'reacher.py')
  with open(script, 'w') as f:
    f.write(_SCRIPT_WITH_A_REGISTERED_ENV)
  return subprocess.run(
      [sys.executable, script, '--env=reacher', '--num_actors=1',
       '--envs_per_actor=1', '--max_actor_steps=100', '--eval_every_steps=0',
       f'--logdir={os.path.join(tmp_path, "run")}', *args],
      capture_output=True, text=True, timeout=300)


def test_a_name_registered_in_the_launcher_is_refused_for_processes(tmp_path):
  result = _run_script(tmp_path, '--lp_launch_type=local_mp')
  assert result.returncode != 0
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line.startswith('repertory.run: error: Environment '
                              "'reacher' is registered in this process only")
  assert 'env=make' in last_line and 'local_mt' in last_line
  assert not os.path.exists(os.path.join(tmp_path, 'run', 'nodes'))


def test_a_node_constructor_error_is_one_line_and_not_restarted(tmp_path):
  result = _run_script(tmp_path, '--lp_launch_type=local_mt')
  assert result.returncode == 1
  last_line = result.stderr.strip().splitlines()[-1]
  assert re.fullmatch(
      r"repertory\.run: error: node '(actor|monitor)/0' failed in its "
      r"constructor: ValueError: Unknown environment spec 'reacher' "
      r'\(in a node\)', last_line), last_line
  assert 'restarting it' not in result.stderr  # --max_restarts=3 by default.
