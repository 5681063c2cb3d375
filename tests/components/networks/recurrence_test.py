"""LSTM core: unroll == steps, resets, tf.while unroll, burn-in gradients."""

import numpy as np
import pytest
import tensorflow as tf

from repertory.components import networks

T, B, D, H = 5, 3, 4, 6


def _inputs(seed=0):
  return tf.constant(
      np.random.default_rng(seed).normal(size=(T, B, D)).astype(np.float32))


def test_unroll_equals_single_steps():
  core = networks.LSTMCore(H)
  x = _inputs()
  state = core.initial_state(B)
  unrolled, final = core.unroll(x, state)
  assert unrolled.shape == (T, B, H)
  for t in range(T):
    out, state = core(x[t], state)
    np.testing.assert_allclose(out, unrolled[t], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(state.cell, final.cell, rtol=1e-5, atol=1e-6)


def test_reset_starts_a_new_episode_inside_the_unroll():
  core = networks.LSTMCore(H)
  x = _inputs(1)
  reset = np.zeros((T, B), bool)
  reset[2, 1] = True
  start = tf.nest.map_structure(lambda s: s + 0.5, core.initial_state(B))
  with_reset, _ = core.unroll(x, start, reset)
  # Sequence 1 from step 2 on equals a fresh unroll from a zero state.
  fresh, _ = core.unroll(x[2:], core.initial_state(B))
  np.testing.assert_allclose(with_reset[2:, 1], fresh[:, 1], rtol=1e-5,
                             atol=1e-6)
  without, _ = core.unroll(x, start)
  np.testing.assert_allclose(with_reset[:, 0], without[:, 0], rtol=1e-6)
  np.testing.assert_allclose(with_reset[:2, 1], without[:2, 1], rtol=1e-6)
  assert not np.allclose(with_reset[2:, 1], without[2:, 1])


def test_unknown_length_uses_while_loop_and_agrees():
  core = networks.LSTMCore(H)
  x = _inputs(2)
  reset = np.zeros((T, B), bool)
  reset[3, 0] = True
  state = core.initial_state(B)
  static, _ = core.unroll(x, state, reset)

  @tf.function(input_signature=[tf.TensorSpec([None, B, D]),
                                tf.TensorSpec([None, B], tf.bool)])
  def dynamic(x, reset):
    return core.unroll(x, core.initial_state(B), reset)[0]

  np.testing.assert_allclose(dynamic(x, reset), static, rtol=1e-5, atol=1e-6)


def test_reset_shape_is_checked():
  core = networks.LSTMCore(H)
  with pytest.raises(ValueError, match='reset'):
    core.unroll(_inputs(), core.initial_state(B), np.zeros((T, B + 1), bool))


def test_burn_in_matches_tail_and_blocks_gradients():
  core = networks.LSTMCore(H)
  x = _inputs(3)
  state = core.initial_state(B)
  burn_in = 2
  full, _ = core.unroll(x, state)
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(x)
    out, _ = networks.burn_in_unroll(core.unroll, x, state, burn_in)
    loss = tf.reduce_sum(out ** 2)
  assert out.shape == (T - burn_in, B, H)
  np.testing.assert_allclose(out, full[burn_in:], rtol=1e-5, atol=1e-6)
  grad_x = tape.gradient(loss, x).numpy()
  assert not np.any(grad_x[:burn_in])  # Nothing through the burn-in steps.
  assert np.any(grad_x[burn_in:])
  # The weights' gradient equals that of an unroll from the (constant)
  # post-burn-in state: burn-in adds nothing to it.
  _, mid_state = core.unroll(x[:burn_in], state)
  with tf.GradientTape() as tape2:
    out2, _ = core.unroll(x[burn_in:], mid_state)
    loss2 = tf.reduce_sum(out2 ** 2)
  for g1, g2 in zip(tape.gradient(loss, core.trainable_variables),
                    tape2.gradient(loss2, core.trainable_variables)):
    np.testing.assert_allclose(g1, g2, rtol=1e-4, atol=1e-6)


def test_burn_in_range_is_checked():
  core = networks.LSTMCore(H)
  with pytest.raises(ValueError, match='burn_in'):
    networks.burn_in_unroll(core.unroll, _inputs(), core.initial_state(B), T)
