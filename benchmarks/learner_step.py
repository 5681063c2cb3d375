r"""Times one IMPALA learner step on this machine's first GPU, or its CPU.

One step = forward over a `[T + 1, B]` batch of unrolls, the V-trace IMPALA
loss, backward pass and an optimizer update, all inside one `tf.function`.
Defaults: B = 32 unrolls of T = 20 steps; the MLP torso on CartPole-like
observations (4 floats, 2 actions) and the Nature-DQN Atari torso on
84x84x4 uint8 frames (6 actions).

Prints a Markdown table under a line naming the device, the date and the
load average.

  python benchmarks/learner_step.py                     # both torsos
  python benchmarks/learner_step.py --torso=atari --lstm --steps=20
"""

import os
import time

from absl import app
from absl import flags
import numpy as np
import sonnet as snt
import tensorflow as tf

from repertory.components import losses
from repertory.components import networks

_TORSO = flags.DEFINE_enum('torso', 'all', ['all', 'mlp', 'atari', 'resnet'],
                           'Which torso to time.')
_BATCH = flags.DEFINE_integer('batch_size', 32, 'Unrolls per batch (B).')
_UNROLL = flags.DEFINE_integer('unroll_length', 20, 'Steps per unroll (T).')
_STEPS = flags.DEFINE_integer('steps', 30, 'Timed learner steps per torso.')
_WARMUP = flags.DEFINE_integer('warmup', 3, 'Untimed steps (tracing) first.')
_LSTM = flags.DEFINE_bool('lstm', False, 'Add an LSTM core (256 units).')
_THREADS = flags.DEFINE_integer(
    'threads', 0, 'TF intra/inter-op threads; 0 leaves TF\'s default.')

_SPECS = {
    # name: (observation shape, dtype, num_actions, torso factory)
    'mlp': ((4,), np.float32, 2, lambda: networks.MLPTorso((64, 64))),
    'atari': ((84, 84, 4), np.uint8, 6, networks.AtariTorso),
    'resnet': ((84, 84, 4), np.uint8, 6, networks.ResNetTorso),
}


def _batch(obs_shape, dtype, num_actions, unroll, batch, seed=0):
  """A random batch laid out as a learner receives it from the queue."""
  rng = np.random.default_rng(seed)
  if dtype == np.uint8:
    obs = rng.integers(0, 256, size=(unroll + 1, batch) + obs_shape,
                       dtype=np.uint8)
  else:
    obs = rng.normal(size=(unroll + 1, batch) + obs_shape).astype(dtype)
  discount = np.full((unroll, batch), 0.99, np.float32)
  discount[rng.random((unroll, batch)) < 0.02] = 0.0
  actions = rng.integers(0, num_actions, size=(unroll, batch), dtype=np.int32)
  return dict(
      observation=tf.constant(obs),
      actions=tf.constant(actions),
      behaviour_log_prob=tf.constant(
          np.full((unroll, batch), -np.log(num_actions), np.float32)),
      reward=tf.constant(rng.normal(size=(unroll, batch)).astype(np.float32)),
      discount=tf.constant(discount),
  )


def time_torso(name: str) -> dict:
  obs_shape, dtype, num_actions, make_torso = _SPECS[name]
  unroll, batch = _UNROLL.value, _BATCH.value
  if _LSTM.value:
    network = networks.RecurrentPolicyValueNetwork(
        make_torso(), num_actions=num_actions, lstm_size=256)
  else:
    network = networks.PolicyValueNetwork(make_torso(), num_actions)
  optimizer = snt.optimizers.RMSProp(learning_rate=6e-4, decay=0.99,
                                     epsilon=1e-5)
  data = _batch(obs_shape, dtype, num_actions, unroll, batch)

  @tf.function
  def learner_step(data):
    with tf.GradientTape() as tape:
      out, _ = network.unroll(data['observation'],
                              network.initial_state(batch))  # [T + 1, B]
      loss = losses.impala_loss(
          target_logits=out.logits[:-1],
          actions=data['actions'],
          behaviour_log_prob=data['behaviour_log_prob'],
          v_tm1=out.value[:-1],
          bootstrap_value=out.value[-1],
          r_t=data['reward'],
          discount_t=data['discount'])
    grads = tape.gradient(loss.loss, network.trainable_variables)
    grads, _ = tf.clip_by_global_norm(grads, 40.0)
    optimizer.apply(grads, network.trainable_variables)
    return loss.loss

  start = time.perf_counter()
  for _ in range(_WARMUP.value):
    learner_step(data).numpy()
  warmup_s = time.perf_counter() - start
  times = []
  for _ in range(_STEPS.value):
    t0 = time.perf_counter()
    learner_step(data).numpy()
    times.append(time.perf_counter() - t0)
  times = np.array(times)
  num_params = sum(int(np.prod(v.shape)) for v in network.trainable_variables)
  return dict(torso=name + ('+lstm' if _LSTM.value else ''),
              params=num_params, median_ms=1e3 * np.median(times),
              p90_ms=1e3 * np.percentile(times, 90),
              frames_per_s=unroll * batch / np.median(times),
              warmup_s=warmup_s)


def main(argv):
  del argv
  if _THREADS.value:
    tf.config.threading.set_intra_op_parallelism_threads(_THREADS.value)
    tf.config.threading.set_inter_op_parallelism_threads(_THREADS.value)
  names = ['mlp', 'atari'] if _TORSO.value == 'all' else [_TORSO.value]
  gpus = tf.config.list_physical_devices('GPU')  # TF places ops on GPU:0.
  device = (tf.config.experimental.get_device_details(gpus[0]).get(
      'device_name', 'GPU:0') if gpus else 'the CPU')
  print(f'learner step = forward + V-trace IMPALA loss + backward + RMSProp, '
        f'in tf.function; B={_BATCH.value} unrolls x T={_UNROLL.value} steps; '
        f'TF {tf.__version__} on {device}; {os.cpu_count()} CPUs; '
        f'{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}; load '
        f'average {os.getloadavg()[0]:.2f} at start\n')
  print('| torso | params | median ms/step | p90 ms | frames/s | warm-up s |')
  print('|---|---:|---:|---:|---:|---:|')
  for name in names:
    r = time_torso(name)
    print(f'| {r["torso"]} | {r["params"]:,} | {r["median_ms"]:.1f} | '
          f'{r["p90_ms"]:.1f} | {r["frames_per_s"]:,.0f} | '
          f'{r["warmup_s"]:.1f} |', flush=True)
  print(f'\nload average {os.getloadavg()[0]:.2f} at end')


if __name__ == '__main__':
  app.run(main)
