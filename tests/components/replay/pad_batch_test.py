"""replay.pad_batch: a short batch padded with copies of its first row."""

import numpy as np
import tensorflow as tf

from repertory.components import replay


def test_a_short_batch_is_padded_with_its_first_row_to_a_static_shape():
  data = {'x': tf.constant([[1., 2.], [3., 4.]]),
          'v': tf.constant([7, 8], tf.int64)}
  padded, num_real = replay.pad_batch(data, 4)
  assert int(num_real) == 2
  np.testing.assert_array_equal(padded['x'].numpy(),
                                [[1., 2.], [3., 4.], [1., 2.], [1., 2.]])
  np.testing.assert_array_equal(padded['v'].numpy(), [7, 8, 7, 7])


def test_inside_a_tf_function_the_batch_dimension_is_static():
  @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
  def pad(x):
    padded, num_real = replay.pad_batch(x, 5)
    assert padded.shape.as_list() == [5, 3]
    return padded, num_real
  padded, num_real = pad(tf.ones([5, 3]))
  assert int(num_real) == 5 and padded.shape == (5, 3)
