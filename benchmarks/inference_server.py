r"""What one call of SEED's inference server costs the server, in-process.

  python benchmarks/inference_server.py --actors=1,2,4

Builds SEED's `InferenceServer` as `seed.make_program` does with its
default placement (the agent's `seed.networks.make_policy`, its default
config, the learner's variable store in the same process, an `UnrollAdder`
per actor writing to a real Reverb queue in this process) and calls `inference` with
recorded timesteps of `--envs_per_actor` environments (stepped beforehand
with random actions, so no environment work is timed): with one actor
from this thread (a batch of one runs on the calling thread), with K
actors from K threads at once (batches of up to K, as the server stacks
concurrent calls). Prints the wall time and this process's CPU time per
call and per env step (the best of `--repeats` windows: the machine's
other load only ever adds). The transport is not included, unless
`--channel`: then the server is behind a `launch.ChannelServer` and each
actor is a process of its own calling through a `launch.ChannelClient`, as
SEED's actors do (no environment work: the figure is the server process's
CPU per call, the channel's included). `agent_throughput.py` measures whole
programs.
"""

import functools
import inspect
import multiprocessing
import os
import threading
import time
from typing import List

from absl import app
from absl import flags
import numpy as np

_ACTORS = flags.DEFINE_list('actors', ['1', '2', '4'],
                            'Actors calling at once (one row each).')
_ENV = flags.DEFINE_string('env', 'catch', 'Environment spec.')
_ENVS_PER_ACTOR = flags.DEFINE_integer('envs_per_actor', 8,
                                       'Environments per call.')
_CALLS = flags.DEFINE_integer('calls', 1000, 'Calls per actor and window.')
_REPEATS = flags.DEFINE_integer('repeats', 5, 'Windows per row.')
_CHANNEL = flags.DEFINE_bool(
    'channel', False, 'Serve through a launch.ChannelServer to actor '
    'processes (ChannelClients) instead of calling from threads.')


def _recorded_timesteps(env_spec: str, num_envs: int, count: int) -> List:
  from repertory import environments  # pylint: disable=g-import-not-at-top
  env = environments.make_batched(env_spec, num_envs, seed=0)
  rng = np.random.default_rng(0)
  num_actions = int(env.action_spec().num_values)
  timesteps = [env.reset()]
  for _ in range(count - 1):
    timesteps.append(env.step(rng.integers(0, num_actions, num_envs)))
  env.close()
  return timesteps


def _channel_actor(address, key, actor, steps, calls, repeats, barrier):
  """An actor process: warm-up calls, then `repeats` windows of `calls`
  calls, each between two waits on `barrier` (shared with the server's
  process, which times the window)."""
  from repertory import launch  # pylint: disable=g-import-not-at-top
  client = launch.ChannelClient(address, authkey=key)
  position = 0

  def call():
    nonlocal position
    t = steps[position % len(steps)]
    position += 1
    client.call(actor, 0, t.step_type, t.reward, t.discount, t.observation)

  for _ in range(100):
    call()
  for _ in range(repeats):
    barrier.wait(600)
    for _ in range(calls):
      call()
    barrier.wait(600)
  client.close()


def _channel_windows(server, steps, num_actors, calls, repeats):
  """(wall, CPU seconds of this process) of each window of the actor
  processes' calls through a channel to `server.inference`."""
  from repertory import launch  # pylint: disable=g-import-not-at-top
  key = os.urandom(32)
  channel = launch.ChannelServer(server.inference, authkey=key)
  # fork: the children run only the channel client and numpy, never the
  # TensorFlow this process has loaded.
  context = multiprocessing.get_context('fork')
  barrier = context.Barrier(num_actors + 1)
  actors = [context.Process(target=_channel_actor, args=(
      channel.address, key, a, steps, calls, repeats, barrier), daemon=True)
            for a in range(num_actors)]
  for actor in actors:
    actor.start()
  windows = []
  for _ in range(repeats):
    barrier.wait(600)
    start, cpu = time.perf_counter(), time.process_time()
    barrier.wait(600)
    windows.append((time.perf_counter() - start, time.process_time() - cpu))
  for actor in actors:
    actor.join(60)
  channel.close()
  return windows


def main(argv):
  del argv
  # pylint: disable=g-import-not-at-top
  from repertory import experiment as experiment_lib
  from repertory import testing
  from repertory.agents import seed
  from repertory.agents.seed import networks as seed_networks
  from repertory.components import inference
  from repertory.components import networks
  from repertory.components import specs
  from repertory.components import variables
  from repertory.agents.actor_critic import networks as actor_critic_nets
  from repertory.agents.actor_critic import tables
  # pylint: enable=g-import-not-at-top
  n = _ENVS_PER_ACTOR.value
  # As seed.make_program builds it with its default placement (where the
  # server takes the argument: older revisions fetch on a thread).
  parameters = inspect.signature(inference.InferenceServer).parameters
  colocated = ({'colocated_variable_source': True}
               if 'colocated_variable_source' in parameters else {})
  spec = experiment_lib.environment_spec(_ENV.value)
  config = seed.Config(max_queue_size=10**7)  # Never full in a window.
  with networks.seeded(0):
    network = actor_critic_nets.make_network(config, spec.observations,
                                             spec.actions)
  store = variables.VariableStore(
      {'policy': networks.get_variables(network)})
  steps = _recorded_timesteps(_ENV.value, n, 200)
  num_actions = int(spec.actions.num_values)
  print(f'{_ENV.value}, {n} environments per call, '
        f'{type(seed_networks.make_policy(config, spec)).__name__}; best of '
        f'{_REPEATS.value} windows of {_CALLS.value} calls per actor')
  print('| actors | batch (mean) | wall us per call | CPU us per call | '
        'CPU us per env step |')
  print('|---|---|---|---|---|')
  with testing.reverb_server(tables.make_tables(
      config, spec, envs_per_actor=n)) as client:
    for num_actors in [int(a) for a in _ACTORS.value]:
      server = inference.InferenceServer(
          functools.partial(seed_networks.make_policy, config, spec), store,
          client, tables.TABLE, config.unroll_length, n,
          max_batch_size=config.batch_size_for(num_actors),
          batch_timeout_ms=config.batch_timeout_ms,
          variable_update_period=config.variable_update_period,
          environment_spec=specs.EnvironmentSpec(spec.observations,
                                                 spec.actions, None, None),
          extras_spec={'logits': np.zeros((num_actions,), np.float32)},
          seed=0, batched_items=config.batched_items,
          **colocated)
      position = [0] * num_actors

      def act(actor, calls, server=server, position=position):
        for _ in range(calls):
          t = steps[position[actor] % len(steps)]
          position[actor] += 1
          server.inference(actor, 0, t.step_type, t.reward, t.discount,
                           t.observation)

      def window(calls, num_actors=num_actors, act=act):
        threads = [threading.Thread(target=act, args=(a, calls))
                   for a in range(1, num_actors)]
        start, cpu = time.perf_counter(), time.process_time()
        for thread in threads:
          thread.start()
        act(0, calls)
        for thread in threads:
          thread.join()
        return time.perf_counter() - start, time.process_time() - cpu

      batches, calls = server.num_batches, server.num_calls
      if _CHANNEL.value:
        # (The mean batch counts the actors' warm-up calls too.)
        wall, cpu = min(_channel_windows(server, steps, num_actors,
                                         _CALLS.value, _REPEATS.value))
      else:
        window(100)  # Warm-up (and every actor's FIRST call).
        batches, calls = server.num_batches, server.num_calls
        wall, cpu = min(window(_CALLS.value) for _ in range(_REPEATS.value))
      total = _CALLS.value * num_actors
      mean_batch = ((server.num_calls - calls) /
                    max(server.num_batches - batches, 1))
      print(f'| {num_actors} | {mean_batch:.2f} | {wall / total * 1e6:.0f} | '
            f'{cpu / total * 1e6:.0f} | {cpu / total / n * 1e6:.1f} |',
            flush=True)
      server.close()


if __name__ == '__main__':
  app.run(main)
