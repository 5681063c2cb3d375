r"""Where an actor's time goes beyond the raw loop, and a model of the
fraction of the raw ceiling on more cores, fitted from measurements.

  # measure (one locked run per agent; each writes its JSON)
  python benchmarks/actor_profile.py --agent=impala --envs=catch \
      --out=/tmp/impala.json
  python benchmarks/actor_profile.py --agent=seed --envs=catch \
      --out=/tmp/seed.json
  # the model from the JSON files, validated and extrapolated
  python benchmarks/actor_profile.py --model=/tmp/impala.json,/tmp/seed.json
  # IMPALA's acting path piece by piece in one process (no Ray)
  python benchmarks/actor_profile.py --inprocess --envs=catch --seconds=6

A full run (learner off and on, 1, 2 and 4 actors) takes several minutes;
`--train=0` and `--train=1` split it.

For each number of actors A (and learner off / on) it runs, like
`agent_throughput.py`, A raw-loop processes (the ceiling), the same raw
loop as A nodes of a `local_mp` program (what Ray's worker processes cost
the loop itself; `--noraw_in_ray` skips it) and the agent's program in
`local_mp`, and within the program's measurement window reads:

* the CPU seconds (`/proc/<pid>/stat`, user + system, all threads) of every
  node process (grouped by the node's group label: actor, replay, learner,
  counter, monitor, ...), of the rest of the process tree (Ray's GCS,
  raylet, the driver: `ray`) and of the whole machine (the rest is other
  users' load: `others`), each per env step the program took;
* the CPU seconds of actor 0's threads (the loop's thread against Reverb's
  and Ray's own);
* after the window, a `py-spy` sample of actor 0's loop (its CPU per batched
  step split into environment, policy or inference round trip, adder and
  Reverb writes, episode bookkeeping, weights, reports and the loop itself)
  and, for SEED, of the learner's process (the inference server's CPU by
  part).

The model (`--model`, learner off) is fitted on the 1- and 2-actor runs,
checked against every run (with the cores other users left free in it) and
then fitted on all runs and extrapolated to more cores.

IMPALA: an actor steps alone at 1 / t env steps/s, and every process's CPU
shares the C cores:

  X = min(A / t, C / (u_a + u_s))

t: an actor's wall time per env step with the machine to itself (the
1-actor run); u_a: an actor's CPU seconds per env step (its loop and
Reverb's client threads); u_s: the CPU seconds per env step of every other
process of the program (Reverb server, counter, monitor, Ray).

SEED, per call (one actor's batched step of N environments), with K
servers of m = A / K actors each on c = C / K cores: a: an actor's CPU per
call; o: the other processes' (Reverb, counter, monitor, Ray) per call;
s_b + b s_c: the server process's CPU per batch of b calls (least squares
over the runs' mean batch sizes, from the servers' `stats()`); d: the
1-actor cycle beyond a + s_b + s_c (wake-ups, transfers). A server that
runs the calls that are ready (`batch_timeout_ms=0`, the default) makes
the least of three bounds per server (with the default `max_batch_size`,
all of a server's actors), in calls per second:

  min(m / (a + d + s_b + s_c), m / (s_b + m s_c), c / (a + o + s_b / m + s_c))

(its actors cycling alone; its thread busy with batches of all m; the
group's CPU at those batches), and X = K N times that. With a timeout and
batches of all m (the earlier default: `lockstep`), a cycle is the actors'
compute on the group's cores, d, then the batch:

  cycle = max(max(a, m (a + o) / c) + d + s_b + m s_c, (m (a + o) + s_b + m s_c) / c)
  X = K m N / cycle

The raw ceiling is min(A, C) / r, r the raw loop's CPU seconds per env
step.

Needs `py-spy` (the `bench` extra); without it, `--no_pyspy`.
"""

import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

from absl import app
from absl import flags
import numpy as np
import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pylint: disable=g-import-not-at-top,wrong-import-position
import agent_throughput
# pylint: enable=g-import-not-at-top,wrong-import-position

_AGENT = flags.DEFINE_enum('agent', 'impala', ['impala', 'seed'],
                           'Agent to measure.')
_TRAIN = flags.DEFINE_list('train', ['0', '1'],
                           'Learner off (0) and/or on (1).')
# --envs, --num_actors, --envs_per_actor, --seconds, --warmup_seconds and
# --out are agent_throughput.py's flags (defaults there).
_PROFILE_SECONDS = flags.DEFINE_float('profile_seconds', 6.0,
                                      'py-spy sampling after the window.')
_PYSPY = flags.DEFINE_bool('pyspy', True, 'Sample stacks with py-spy.')
_INPROCESS = flags.DEFINE_bool(
    'inprocess', False, "Measure IMPALA's acting path in one process, piece "
    'by piece, instead of launching programs.')
_RAW_IN_RAY = flags.DEFINE_bool(
    'raw_in_ray', True, 'Also run the raw loop in node processes of a '
    'local_mp program (where the actors run).')
_MODEL = flags.DEFINE_list('model', [],
                           'JSON files of earlier runs: fit, validate and '
                           'extrapolate the model instead of measuring.')
_CORES = flags.DEFINE_list('cores', ['2', '4', '8', '16'],
                           'Core counts to extrapolate to.')


# --- CPU accounting -----------------------------------------------------------


def _cpu_seconds(pid: int) -> Optional[float]:
  try:
    times = psutil.Process(pid).cpu_times()
  except psutil.Error:
    return None
  return times.user + times.system


def _tid_cpu(pid: int) -> Dict[str, float]:
  """CPU seconds of each thread of a process, by thread id."""
  try:
    return {str(t.id): t.user_time + t.system_time
            for t in psutil.Process(pid).threads()}
  except psutil.Error:
    return {}


def _thread_cpu(pid: int) -> Dict[str, float]:
  """CPU seconds of a process's threads, summed by thread name (the main
  thread is 'main')."""
  out = collections.defaultdict(float)
  try:
    threads = psutil.Process(pid).threads()
  except psutil.Error:
    return {}
  for thread in threads:
    try:
      with open(f'/proc/{pid}/task/{thread.id}/comm') as f:
        name = f.read().strip()
    except OSError:
      continue
    name = 'main' if thread.id == pid else re.sub(r'[-_:]?\d+$', '', name)
    out[name] += thread.user_time + thread.system_time
  return dict(out)


def _machine_busy_seconds() -> float:
  times = psutil.cpu_times()
  return sum(times) - times.idle - getattr(times, 'iowait', 0.0)


class CpuProbe:
  """CPU seconds of each node process (by group label), of the rest of the
  launcher's process tree and of the machine, over the window; then py-spy
  samples (see module doc)."""

  def __init__(self, agent: str, profile_seconds: float, pyspy: bool):
    self._agent = agent
    self._profile_seconds = profile_seconds
    self._pyspy = pyspy and shutil.which('py-spy') is not None
    self._pids: Dict[str, Tuple[str, int]] = {}
    self._start: Dict[int, float] = {}

  def _node_pids(self, launched) -> Dict[str, Tuple[str, int]]:
    backend = launched._backend  # pylint: disable=protected-access
    pids = {}
    for unit in launched.program.units:
      pid = backend._pid_of(unit.unit_id)  # pylint: disable=protected-access
      if pid is not None:
        pids[unit.unit_id] = (unit.label, pid)
    return pids

  def _snapshot(self) -> Dict[int, float]:
    me = psutil.Process()
    tree = [me.pid] + [c.pid for c in me.children(recursive=True)]
    out = {}
    for pid in set(tree) | {pid for _, pid in self._pids.values()}:
      cpu = _cpu_seconds(pid)
      if cpu is not None:
        out[pid] = cpu
    out[-1] = _machine_busy_seconds()
    return out

  def _server_stats(self, launched) -> List[Dict[str, Any]]:
    """`stats()` of each of SEED's inference servers (calls and batches
    served so far); [] for IMPALA."""
    if self._agent != 'seed':
      return []
    if self._servers is None:
      self._servers = []
      for node in launched.program.units:  # Colocations hold their nodes.
        for inner in getattr(node, 'nodes', [node]):
          if getattr(inner, '_ctor', None) is not None and (
              inner._ctor.__name__ == 'InferenceServer'):  # pylint: disable=protected-access
            self._servers.append(inner.create_handle().dereference())
    return [server.stats() for server in self._servers]

  def start(self, launched) -> None:
    self._pids = self._node_pids(launched)
    self._servers = None
    self._stats0 = self._server_stats(launched)
    self._start = self._snapshot()
    self._actor_pid = self._pids.get('actor/0', (None, None))[1]
    self._threads0 = _thread_cpu(self._actor_pid) if self._actor_pid else {}
    self._tids0 = _tid_cpu(self._actor_pid) if self._actor_pid else {}
    self._t0 = time.monotonic()

  def stop(self, launched) -> Dict[str, Any]:
    end = self._snapshot()
    stats = self._server_stats(launched)
    threads = _thread_cpu(self._actor_pid) if self._actor_pid else {}
    tids = _tid_cpu(self._actor_pid) if self._actor_pid else {}
    dt = time.monotonic() - self._t0
    actor0_threads = {k: v - self._threads0.get(k, 0.0)
                      for k, v in threads.items()}
    node_pids = {pid for _, pid in self._pids.values()}
    cpu = collections.defaultdict(float)
    actors = []
    for unit_id, (label, pid) in sorted(self._pids.items()):
      if pid in self._start and pid in end:
        used = end[pid] - self._start[pid]
        cpu[label] += used
        if label == 'actor':
          actors.append(used)
    for pid in end:
      if pid >= 0 and pid not in node_pids and pid in self._start:
        cpu['ray'] += end[pid] - self._start[pid]
    ours = sum(cpu.values())
    cpu['others'] = max(end[-1] - self._start[-1] - ours, 0.0)
    return {'cpu_seconds': dict(cpu), 'cpu_window_seconds': dt,
            'actor_cpu_seconds': actors,
            'actor0_thread_cpu_seconds': {
                k: v for k, v in actor0_threads.items() if v > 0},
            'actor0_tid_cpu_seconds': {
                k: v - self._tids0.get(k, 0.0) for k, v in tids.items()
                if v - self._tids0.get(k, 0.0) > 0},
            'cores': psutil.cpu_count(),
            # SEED: calls and batches the inference servers served in it.
            'inference_servers': len(self._servers or []),
            'server_calls': sum(b['num_calls'] - a['num_calls']
                                for a, b in zip(self._stats0, stats)),
            'server_batches': sum(b['num_batches'] - a['num_batches']
                                  for a, b in zip(self._stats0, stats)),
            'loadavg': open('/proc/loadavg').read().split()[:3]}

  def after(self, launched) -> Dict[str, Any]:
    if not self._pyspy:
      return {}
    targets = {'actor': self._pids.get('actor/0', (None, None))[1]}
    if self._agent == 'seed':  # The first server's process.
      first = {}
      for _, (label, pid) in sorted(self._pids.items()):
        first.setdefault(label, pid)
      targets['server'] = first.get('inference', first.get('learner'))
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
      procs = {}
      for name, pid in targets.items():
        if pid is None:
          continue
        path = os.path.join(tmp, name + '.txt')
        # Active samples only: a Ray worker holds ~300 threads, most idle,
        # which py-spy cannot sample much faster than this.
        cmd = ['py-spy', 'record', '--pid', str(pid), '--duration',
               str(int(self._profile_seconds)), '--rate', '40', '--format',
               'raw', '--threads', '--nonblocking', '-o', path]
        procs[name] = (subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL), path)
      for name, (proc, path) in procs.items():
        proc.wait(timeout=self._profile_seconds + 60)
        if os.path.exists(path):
          with open(path) as f:
            out['pyspy_' + name] = f.read()
    del launched
    return out


# --- stack classification -----------------------------------------------------

# Where the policies' step lives (TensorFlow's networks, numpy's policies).
_POLICY_FILES = ('networks', 'numpy_policy', 'numpy_mlp', 'mlp_policy',
                 'lstm_policy')
_FRAME = re.compile(r'^(?P<func>.*) \((?P<file>[^:()]*)(?::\d+)?\)$')


def _frames(stack: str) -> List[Tuple[str, str]]:
  out = []
  for part in stack.split(';'):
    m = _FRAME.match(part)
    # py-spy qualifies methods ('BatchedActor._act'): keep the last name.
    out.append((m.group('func').rpartition('.')[2], m.group('file'))
               if m else (part, ''))
  return out


# py-spy's samples of a thread asleep in a system call look like work.
_WAITING = 'inference: waiting for the server'


def _category_below(frames, i) -> str:
  """The category of a sample whose frame i is `_step` (batched.py)."""
  rest = frames[i + 1:]
  if not rest:
    return 'actor loop'
  func, path = rest[0]
  deeper = ' '.join(p for _, p in rest)
  if 'environments' in path:
    return 'environment'
  if 'inference/client' in path:
    funcs = [f for f, _ in rest]
    if funcs[-1] in ('_readable', '_poll') or any(
        f in ('recv_into', '_recv_exactly', 'recv', '_read', 'read')
        for f in funcs) or 'selectors' in deeper:
      return _WAITING
    return 'inference: encode/send/decode'
  if any(name in path for name in _POLICY_FILES):
    return 'policy'
  if 'adders' in path:
    if 'reverb' in deeper or any(f in ('_flush', '_insert_step', 'flush')
                                 for f, _ in rest):
      return 'adder: Reverb writes'
    return 'adder: buffers'
  if 'episodes' in path:
    return 'episode bookkeeping'
  return 'actor loop'


def loop_thread(raw: str) -> Optional[str]:
  """The id of the thread that runs `BatchedActor._act` (py-spy raw)."""
  for line in raw.splitlines():
    if 'BatchedActor._act (' in line:
      m = re.match(r'thread \((?:0x)?(\w+)\)', line)
      if m:
        return m.group(1)
  return None


def classify_actor(raw: str) -> Dict[str, int]:
  """Samples of an actor's loop thread by category (py-spy raw format)."""
  counts = collections.Counter()
  for line in raw.splitlines():
    stack, _, n = line.rpartition(' ')
    if not stack:
      continue
    frames = _frames(stack)
    names = [(f, p.rsplit('/', 1)[-1]) for f, p in frames]
    try:
      i = names.index(('_act', 'batched.py'))
    except ValueError:
      continue  # Another thread, or before/after the loop.
    child = frames[i + 1][0] if i + 1 < len(frames) else ''
    if child == '_step':
      category = _category_below(frames, i + 1)
    elif child == '_refresh_weights':
      category = 'weights (variable client)'
    elif child in ('report', 'acquire'):
      category = 'reports and step budget'
    else:
      category = 'actor loop'
    counts[category] += int(n)
  return dict(counts)


_IDLE = 'idle: the serving thread waiting in poll'


def classify_server(raw: str) -> Dict[str, int]:
  """CPU samples of the process of SEED's first inference server (the
  learner's by default)."""
  counts = collections.Counter()
  for line in raw.splitlines():
    stack, _, n = line.rpartition(' ')
    if not stack:
      continue
    paths = [p for _, p in _frames(stack)]
    funcs = [f for f, _ in _frames(stack)]
    if funcs[-1] == '_poll':  # py-spy cannot tell this sleep from work.
      category = _IDLE
    elif '_inference' in funcs:
      i = funcs.index('_inference')
      below = ' '.join(paths[i + 1:])
      if 'adders' in below:
        category = 'server: adder and Reverb writes'
      elif any(name in below for name in _POLICY_FILES):
        category = 'server: policy'
      elif 'variables' in below:
        category = 'server: weights'
      else:
        category = 'server: batching and per-actor state'
    elif any('batching' in p for p in paths):
      category = 'server: dynamic batching (stack/split)'
    elif any('channel' in p or 'codec' in p for p in paths):
      category = 'server: channel (receive, decode, encode, send)'
    elif any('learning' in p or 'learners' in p for p in paths):
      category = 'learner'
    else:
      category = 'other threads'
    counts[category] += int(n)
  return dict(counts)


# --- one process ------------------------------------------------------------


def inprocess(env_spec: str, num_envs: int, seconds: float
              ) -> Dict[str, Dict[str, float]]:
  """IMPALA's acting path in this process, piece by piece: the raw loop,
  a `BatchedActor` writing nothing, and one writing unrolls through an
  `UnrollAdder` to a Reverb server in this process (its queue as IMPALA's
  with the learner off). Per env step: wall, this process's CPU and the
  main thread's CPU (microseconds)."""
  # pylint: disable=g-import-not-at-top
  import reverb
  from repertory import environments
  from repertory import experiment as experiment_lib
  from repertory import launch
  from repertory.agents.impala import config as config_lib
  from repertory.components import actors
  from repertory.components import adders
  from repertory.agents.actor_critic import config as ac_config
  from repertory.agents.actor_critic import networks
  from repertory.agents.actor_critic import tables
  # pylint: enable=g-import-not-at-top
  actors.limit_tf_threads()
  launch.limit_blas_threads()  # As in the programs' node processes.
  config = config_lib.Config(train=False)
  spec = experiment_lib.environment_spec(env_spec)
  server = reverb.Server(tables.make_tables(config, spec,
                                            envs_per_actor=num_envs))
  client = reverb.Client(f'localhost:{server.port}')
  kind = ac_config.batched_env_kind(config.batched_env_kind, env_spec)
  results = {}

  def timed(name, step, per_call=1):
    for _ in range(200 // per_call):
      step()
    steps, w0 = 0, time.perf_counter()
    c0, t0 = time.process_time(), time.thread_time()
    while time.perf_counter() - w0 < seconds:
      step()
      steps += num_envs * per_call
    wall = time.perf_counter() - w0
    results[name] = {'wall_us': 1e6 * wall / steps,
                     'process_cpu_us': 1e6 * (time.process_time() - c0) / steps,
                     'main_thread_cpu_us':
                         1e6 * (time.thread_time() - t0) / steps}
    print(f'   {name}: ' + ', '.join(f'{k} {v:.2f}'
                                     for k, v in results[name].items()),
          flush=True)

  for variant in ('raw', 'actor_no_adder', 'actor'):
    env = environments.make_batched(env_spec, num_envs, seed=0, kind=kind)
    policy = agent_throughput.actor_policy(config, env, seed=0)
    if variant == 'raw':
      state = {'timestep': env.reset(), 'state': policy.initial_state(
          num_envs)}

      def raw_step(env=env, policy=policy, state=state):
        timestep = state['timestep']
        action, _, state['state'] = policy.step(
            timestep.observation, state['state'], timestep.first())
        state['timestep'] = env.step(action)
      timed(variant, raw_step)
      env.close()
      continue
    adder = None
    if variant == 'actor':
      adder = adders.UnrollAdder(
          client, tables.TABLE, unroll_length=config.unroll_length,
          num_envs=num_envs, actor_id=0,
          environment_spec=adders.EnvironmentSpec(
              spec.observations, spec.actions, None, None),
          extras_spec={'logits': np.zeros((networks.num_actions(
              spec.actions),), np.float32)},
          core_state_spec=networks.state_spec(config),
          batched_items=config.batched_items)
    actor = actors.BatchedActor(env, policy, adder,
                                report_every=config.unroll_length)
    timed(variant, lambda actor=actor: actor.run(num_steps=100), 100)
    actor.close()
    if adder is not None:
      adder.close()
  server.stop()
  return results


# --- the raw loop in Ray workers ----------------------------------------------


def _raw_loop_node(env_spec: str, num_envs: int, seed: int, seconds: float,
                   out_path: str) -> None:
  """A `PyNode` body: the raw loop, in a node process of local_mp."""
  # pylint: disable=g-import-not-at-top,redefined-outer-name,reimported
  import json
  import os
  import time
  from repertory import environments
  from repertory.agents.impala import config as config_lib
  from repertory.components import actors
  from repertory.components import networks
  from repertory.agents.actor_critic import acting
  from repertory.agents.actor_critic import config as ac_config
  from repertory.agents.actor_critic import networks as actor_critic_nets
  # pylint: enable=g-import-not-at-top,redefined-outer-name,reimported
  actors.limit_tf_threads()  # The network that gives the initial weights.
  config = config_lib.Config()
  env = environments.make_batched(
      env_spec, num_envs, seed=seed,
      kind=ac_config.batched_env_kind(config.batched_env_kind, env_spec))
  # agent_throughput.actor_policy (this runs in a Ray worker, which imports
  # repertory but not the benchmarks).
  policy, _ = acting.make_policy(config, seed)
  with networks.seeded(seed):
    policy.set_weights(networks.get_variables(actor_critic_nets.make_network(
        config, env.observation_spec(), env.action_spec())))
  state, timestep = policy.initial_state(num_envs), env.reset()
  steps, start, cpu = 0, None, None
  begin = time.perf_counter()
  while True:
    now = time.perf_counter()
    if start is None and now - begin > 2.0:  # Warm-up.
      steps, start, cpu = 0, now, time.thread_time()
    if start is not None and now - start >= seconds:
      break
    action, _, state = policy.step(timestep.observation, state,
                                   timestep.first())
    timestep = env.step(action)
    steps += num_envs
  with open(out_path, 'w') as f:
    json.dump([steps / (now - start), (time.thread_time() - cpu) / steps,
               os.nice(0)], f)
  env.close()


def measure_raw_in_ray(env_spec: str, num_actors: int, num_envs: int,
                       seconds: float) -> List[Any]:
  """(env steps/s, CPU seconds per env step, niceness) of the raw loop in
  each of `num_actors` node processes of a local_mp program (Ray workers):
  what the same loop costs where the framework's actors run."""
  from repertory import launch  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory() as tmp:
    program = launch.Program('raw_in_ray')
    paths = [os.path.join(tmp, f'{i}.json') for i in range(num_actors)]
    with program.group('actor'):
      for i, path in enumerate(paths):
        program.add_node(launch.PyNode(_raw_loop_node, env_spec, num_envs,
                                       i * num_envs, seconds, path))
    launched = launch.launch(program, launch_type='local_mp', block=False,
                             logdir=os.path.join(tmp, 'nodes'),
                             termination_notice_secs=5)
    launched.wait(timeout=300)
    out = []
    for path in paths:
      with open(path) as f:
        out.append(tuple(json.load(f)))
    return out


# --- measuring ----------------------------------------------------------------


def measure(agent: str, env_spec: str, runs: List[Dict[str, Any]]) -> None:
  """Appends a run per number of actors and learner setting to `runs`."""
  num_envs = agent_throughput._ENVS_PER_ACTOR.value
  seconds = agent_throughput._SECONDS.value
  for num_actors in [int(a) for a in agent_throughput._NUM_ACTORS.value]:
    loops = agent_throughput.measure_raw_loops(env_spec, num_actors,
                                               num_envs, seconds)
    in_ray = []
    if _RAW_IN_RAY.value:
      in_ray = measure_raw_in_ray(env_spec, num_actors, num_envs, seconds)
      print(f'   raw loop in Ray workers: {in_ray}', flush=True)
    for train in [bool(int(t)) for t in _TRAIN.value]:
      print(f'== {agent} {env_spec} actors={num_actors} train={train}',
            flush=True)
      probe = CpuProbe(agent, _PROFILE_SECONDS.value, _PYSPY.value)
      result = agent_throughput.measure_program(
          agent, env_spec, num_actors, num_envs, train, seconds,
          agent_throughput._WARMUP.value, probe=probe)
      result.update(agent=agent, env=env_spec, num_actors=num_actors,
                    train=train, envs_per_actor=num_envs,
                    raw_loops=loops, raw_loops_in_ray=in_ray,
                    ceiling=sum(rate for rate, _ in loops))
      for key in ('pyspy_actor', 'pyspy_server'):
        if key in result:
          classify = classify_actor if key == 'pyspy_actor' else (
              classify_server)
          result[key.replace('pyspy', 'samples')] = classify(result[key])
          # The most frequent stacks stay in the JSON (to classify again).
          lines = sorted(result[key].splitlines(),
                         key=lambda l: -int(l.rpartition(' ')[2] or 0))
          result[key] = '\n'.join(lines[:300])
      print('   ' + summary_line(result), flush=True)
      runs.append(result)
      if agent_throughput._OUT.value:  # After every run: a timeout keeps them.
        with open(agent_throughput._OUT.value, 'w') as f:
          json.dump(runs, f, indent=1)


def per_step(run: Dict[str, Any]) -> Dict[str, float]:
  """CPU microseconds per env step of each process group."""
  steps = run['actor_steps_per_second'] * run['cpu_window_seconds']
  return {k: 1e6 * v / steps for k, v in run['cpu_seconds'].items()}


def summary_line(run: Dict[str, Any]) -> str:
  x = run['actor_steps_per_second']
  us = per_step(run)
  parts = ', '.join(f'{k} {v:.1f}' for k, v in sorted(us.items()))
  ceiling = run['ceiling']
  return (f'{x:,.0f} steps/s ({x / ceiling:.2f} of {ceiling:,.0f})'
          f'; CPU us/step: {parts}')


# --- the model ----------------------------------------------------------------

_SHARED_EXCLUDE = ('actor', 'others')
# SEED: the processes that hold the inference servers (and, idle with the
# learner off, the learner).
_SERVER_GROUPS = ('learner', 'inference')


def fit(runs: List[Dict[str, Any]]) -> Dict[str, float]:
  """IMPALA's t, u_a, u_s and r (seconds per env step) from the runs."""
  t, u_a, u_s, r = [], [], [], []
  for run in runs:
    x = run['actor_steps_per_second']
    steps = x * run['cpu_window_seconds']
    cpu = run['cpu_seconds']
    u_a.append(cpu.get('actor', 0.0) / steps)
    u_s.append(sum(v for k, v in cpu.items() if k not in _SHARED_EXCLUDE) /
               steps)
    if run['num_actors'] == 1:  # An actor's wall time per env step, alone.
      t.append(1.0 / x)
    r.extend(cpu_per_step for _, cpu_per_step in run['raw_loops'])
  return {'t': _mean(t), 'u_a': _mean(u_a), 'u_s': _mean(u_s), 'r': _mean(r)}


def predict(params: Dict[str, float], cores: float, num_actors: int
            ) -> Tuple[float, float]:
  """IMPALA: (program env steps/s, raw ceiling env steps/s) on `cores`."""
  program = min(num_actors / params['t'],
                cores / (params['u_a'] + params['u_s']))
  ceiling = min(num_actors, cores) / params['r']
  return program, ceiling


def _mean(values: List[float]) -> float:
  return sum(values) / len(values) if values else 0.0


def fit_seed(runs: List[Dict[str, Any]],
             server_runs: Optional[List[Dict[str, Any]]] = None
             ) -> Dict[str, float]:
  """SEED's per-call parameters (seconds; a call is one actor's batched
  step of N environments) from runs with the learner off.

  a: an actor's CPU per call; o: the other processes' (replay, counter,
  monitor, Ray) per call; s_b + b * s_c: the server process's CPU per
  batch of b calls (least squares over the runs' mean batch sizes); d: the
  1-actor cycle beyond a + s_b + s_c (wake-ups and transfers); r: the raw
  loop's CPU per env step; n: N. The server's line is fitted on
  `server_runs` (default: `runs`), which need mean batch sizes at least 0.5
  apart (a server that batches what is ready batches little with 1 or 2
  actors).
  """
  a, o, d, r, sizes, per_batch = [], [], [], [], [], []
  for run in runs:
    calls = run['server_calls']
    cpu = run['cpu_seconds']
    a.append(cpu.get('actor', 0.0) / calls)
    o.append(sum(v for k, v in cpu.items()
                 if k not in _SHARED_EXCLUDE + _SERVER_GROUPS) / calls)
    r.extend(cpu_per_step for _, cpu_per_step in run['raw_loops'])
  for run in server_runs or runs:
    calls, batches = run['server_calls'], run['server_batches']
    sizes.append(calls / batches)
    per_batch.append(sum(run['cpu_seconds'].get(k, 0.0)
                         for k in _SERVER_GROUPS) / batches)
  if max(sizes) - min(sizes) < 0.5:
    raise ValueError(f'mean batch sizes {sizes} are too close to fit the '
                     "server's CPU per batch: add runs with more actors.")
  s_c, s_b = np.polyfit(sizes, per_batch, 1)
  for run, actor_cpu in zip(runs, a):
    if run['num_actors'] == 1:
      cycle = run['envs_per_actor'] / run['actor_steps_per_second']
      d.append(max(cycle - actor_cpu - s_b - s_c, 0.0))
  return {'a': _mean(a), 'o': _mean(o), 's_b': float(s_b),
          's_c': float(s_c), 'd': _mean(d), 'r': _mean(r),
          'n': runs[0]['envs_per_actor']}


def predict_seed(params: Dict[str, float], cores: float, num_actors: int,
                 servers: int = 1, lockstep: bool = False
                 ) -> Tuple[float, float]:
  """SEED, learner off: (program env steps/s, raw ceiling env steps/s).

  K = `servers` servers of m = A / K actors each, each server's group on
  its own c = C / K cores. By default (`batch_timeout_ms=0`) a server runs
  the calls that are ready, and the program makes the least of three
  bounds per server: m actors each cycling alone (a + d + s_b + s_c per
  call), the server's thread busy with batches of all m (m / (s_b + m
  s_c) calls per second) and the group's CPU at those batches. `lockstep`
  (a timeout and batches of all m, the earlier default): a cycle is the
  actors' compute on the group's cores, then d, then the batch of m.
  """
  a, o, d, s_b, s_c = (params[k] for k in ('a', 'o', 'd', 's_b', 's_c'))
  m = num_actors / servers
  c = cores / servers
  if lockstep:
    batch = s_b + m * s_c
    cycle = max(max(a, m * (a + o) / c) + d + batch,
                (m * (a + o) + batch) / c)
    calls = m / cycle
  else:
    calls = min(m / (a + d + s_b + s_c), m / (s_b + m * s_c),
                c / (a + o + s_b / m + s_c))
  program = servers * calls * params['n']
  return program, min(num_actors, cores) / params['r']


def free_cores(run: Dict[str, Any]) -> float:
  """The cores other users left to the run (measured)."""
  return run['cores'] - run['cpu_seconds'].get('others', 0.0) / run[
      'cpu_window_seconds']


def _params_line(name: str, params: Dict[str, float]) -> str:
  return name + ', '.join(
      f'{k} {v * 1e6:.2f} us' if k != 'n' else f'n {v}'
      for k, v in params.items())


def _count(count: Any, cores: int) -> int:
  """A row's count of actors or servers: a number, or 'C', 'C-1', 'C/2'."""
  return {'C': cores, 'C-1': max(cores - 1, 1),
          'C/2': max(cores // 2, 1)}.get(count, count)


def model_report(runs: List[Dict[str, Any]]) -> str:
  """Per agent, learner off: the model fitted on the 1- and 2-actor runs,
  checked on every run, then fitted on all and extrapolated."""
  lines = []
  groups = collections.defaultdict(list)
  for run in runs:
    groups[(run['agent'], run['train'])].append(run)
  cores_list = [int(c) for c in _CORES.value]
  for (agent, train), group in sorted(groups.items()):
    name = f'{agent}{"" if train else "_nolearn"}'
    if train:  # The learner sets the pace (see BENCHMARKS.md).
      lines.append(f'\n{name}: learner on, not modelled.')
      continue
    seed = agent == 'seed'
    servers = lambda run: run.get('inference_servers') or 1
    one_server = [r for r in group if servers(r) == 1]  # Fitted on these.
    fit_runs = [r for r in one_server if r['num_actors'] in (1, 2)]
    params = (fit_seed(fit_runs, server_runs=one_server) if seed
              else fit(fit_runs))
    lines.append(_params_line(
        f'\n{name}: fitted on the 1- and 2-actor runs (SEED: per call, the '
        "server's line on every one-server run; IMPALA: per env step): ",
        params))
    lines.append('| actors | servers | free cores (measured) | measured | '
                 'predicted | measured ceiling | predicted ceiling |')
    lines.append('|---|---|---|---|---|---|---|')
    for run in sorted(group, key=lambda r: (servers(r), r['num_actors'])):
      args = (params, free_cores(run), run['num_actors'])
      lockstep = seed and run.get('batch_timeout_ms', 2.0) > 0
      program, ceiling = (predict_seed(*args, servers=servers(run),
                                       lockstep=lockstep) if seed
                          else predict(*args))
      lines.append(
          f"| {run['num_actors']} | {servers(run) if seed else '-'}"
          f"{' (lockstep)' if lockstep else ''} | "
          f"{free_cores(run):.2f} | "
          f"{run['actor_steps_per_second']:,.0f} | {program:,.0f} | "
          f"{run['ceiling']:,.0f} | {ceiling:,.0f} |")
    all_params = fit_seed(one_server) if seed else fit(one_server)
    lines.append(_params_line(f'{name}: fitted on all runs: ', all_params))
    lines.append('predicted fraction of the raw ceiling:')
    lines.append('| actors | ' + ' | '.join(f'{c} cores' for c in cores_list)
                 + ' |')
    lines.append('|---|' + '---|' * len(cores_list))
    rows = [(a, 1) for a in (1, 2, 4, 'C-1', 'C')]
    if seed:  # One server per actor (its own process, as many as fit).
      rows.append(('C/2', 'C/2'))
    for num_actors, num_servers in rows:
      cells = []
      for cores in cores_list:
        actors = _count(num_actors, cores)
        program, ceiling = (
            predict_seed(all_params, cores, actors,
                         _count(num_servers, cores)) if seed
            else predict(all_params, cores, actors))
        cells.append(f'{program / ceiling:.2f}')
      label = f'{num_actors}' + (f', {num_servers} servers'
                                 if num_servers != 1 else '')
      lines.append(f'| {label} | ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines)


def breakdown_report(runs: List[Dict[str, Any]]) -> str:
  """Per batched step of actor 0: wall, its Python threads' CPU, and that
  CPU split by the py-spy samples of its loop; then CPU per env step."""
  lines = ['| run | actor wall us / batched step | loop thread CPU us / '
           'batched step (all Python threads if unknown) | the loop by part '
           '(us per batched step, from py-spy samples) |',
           '|---|---|---|---|']
  for run in runs:
    samples = run.get('samples_actor')
    name = (f"{run['agent']}{'' if run['train'] else '_nolearn'} "
            f"A={run['num_actors']}")
    n = run['envs_per_actor']
    step_us = 1e6 * n * run['num_actors'] / run['actor_steps_per_second']
    batched_steps = (run['actor_steps_per_second'] / run['num_actors'] / n *
                     run['cpu_window_seconds'])
    threads = run.get('actor0_thread_cpu_seconds', {})
    python_cpu = sum(v for k, v in threads.items()
                     if k.startswith('ray::NodeActor') or k == 'main')
    tid = loop_thread(run.get('pyspy_actor', ''))
    loop_cpu = run.get('actor0_tid_cpu_seconds', {}).get(tid)
    cpu_us = 1e6 * python_cpu / batched_steps
    if loop_cpu is not None:  # The loop's own thread, when known.
      cpu_us = 1e6 * loop_cpu / batched_steps
    if samples:
      samples = dict(samples)
      waiting = samples.pop(_WAITING, 0)
      total = sum(samples.values())
      parts = ', '.join(
          f'{k} {cpu_us * v / total:.0f}'
          for k, v in sorted(samples.items(), key=lambda kv: -kv[1]))
      if waiting:
        parts += (f' (and {100 * waiting / (waiting + total):.0f} % of the '
                  'samples waiting for the server)')
    else:
      parts = '-'
    lines.append(f'| {name} | {step_us:.0f} | {cpu_us:.0f} | {parts} |')
  lines.append('\n| run | env steps/s | of ceiling | CPU us per env step |')
  lines.append('|---|---|---|---|')
  for run in runs:
    name = (f"{run['agent']}{'' if run['train'] else '_nolearn'} "
            f"A={run['num_actors']}")
    us = per_step(run)
    raw = sum(c for _, c in run['raw_loops']) / len(run['raw_loops']) * 1e6
    parts = ', '.join(f'{k} {v:.2f}' for k, v in sorted(us.items()))
    in_ray = run.get('raw_loops_in_ray') or []
    if in_ray:
      parts += ('; raw loop in Ray workers '
                f'{1e6 * sum(r[1] for r in in_ray) / len(in_ray):.2f} '
                f'({sum(r[0] for r in in_ray):,.0f} steps/s)')
    lines.append(f"| {name} | {run['actor_steps_per_second']:,.0f} | "
                 f"{run['actor_steps_per_second'] / run['ceiling']:.2f} | "
                 f'{parts}; raw loop {raw:.2f} |')
  lines.append('\n| run | actor 0 CPU us per env step, by thread |')
  lines.append('|---|---|')
  for run in runs:
    name = (f"{run['agent']}{'' if run['train'] else '_nolearn'} "
            f"A={run['num_actors']}")
    steps = (run['actor_steps_per_second'] / run['num_actors'] *
             run['cpu_window_seconds'])
    threads = run.get('actor0_thread_cpu_seconds', {})
    parts = ', '.join(f'{k} {1e6 * v / steps:.2f}' for k, v in sorted(
        threads.items(), key=lambda kv: -kv[1]) if 1e6 * v / steps >= 0.05)
    lines.append(f'| {name} | {parts} |')
  for run in runs:
    samples = dict(run.get('samples_server') or {})
    idle = samples.pop(_IDLE, 0)
    if samples:
      total = sum(samples.values())
      parts = ', '.join(f'{k} {100 * v / total:.0f} %' for k, v in sorted(
          samples.items(), key=lambda kv: -kv[1]))
      lines.append(f"\nseed{'' if run['train'] else '_nolearn'} "
                   f"A={run['num_actors']} server process, py-spy's samples "
                   f'({total} working, {idle} waiting in poll): {parts}')
  return '\n'.join(lines)


def main(argv: List[str]) -> None:
  del argv
  if _MODEL.value:
    runs = []
    for path in _MODEL.value:
      with open(path) as f:
        runs.extend(json.load(f))
    for run in runs:  # Classified again: the rules may have changed.
      if run.get('pyspy_actor'):
        run['samples_actor'] = classify_actor(run['pyspy_actor'])
      if run.get('pyspy_server'):
        run['samples_server'] = classify_server(run['pyspy_server'])
    print(breakdown_report(runs))
    print(model_report(runs))
    return
  if _INPROCESS.value:
    out = {}
    for env_spec in agent_throughput._ENVS.value:
      print(f'== in one process: {env_spec}', flush=True)
      out[env_spec] = inprocess(env_spec,
                                agent_throughput._ENVS_PER_ACTOR.value,
                                agent_throughput._SECONDS.value)
    if agent_throughput._OUT.value:
      with open(agent_throughput._OUT.value, 'w') as f:
        json.dump(out, f, indent=1)
    return
  runs = []
  for env_spec in agent_throughput._ENVS.value:
    measure(_AGENT.value, env_spec, runs)
  print(breakdown_report(runs))


if __name__ == '__main__':
  sys.exit(app.run(main))
