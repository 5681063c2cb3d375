"""The channel's wire format: what round-trips exactly, and the one-line
`CodecError` for every malformed array a peer could send."""

import struct

import msgpack
import numpy as np
import pytest

from repertory.launch.transport import codec


def _message(*arrays):
  return codec.decode(codec.encode(list(arrays)))


@pytest.mark.parametrize('array', [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.arange(12, dtype='>i8').reshape(4, 3),          # Big-endian.
    np.arange(24, dtype=np.int16).reshape(2, 3, 4)[:, ::2, 1:],  # Strided.
    np.array(3.5),                                      # 0-d.
    np.zeros((0, 5), np.uint8),                         # Empty.
    np.array([True, False]),
    np.array([1 + 2j], np.complex64),
    np.array(['ab', 'c']),
    np.array([b'xyz']),
    np.array(['2026-12-04', 'NaT'], 'datetime64[D]'),
    np.ones((300, 300), np.float64),                    # Over 64 KiB.
    np.zeros((1,) * 32, np.int8),                       # numpy's most dims.
])
def test_arrays_round_trip_with_their_dtype_and_shape(array):
  [decoded] = _message(array)
  assert decoded.dtype == array.dtype and decoded.shape == array.shape
  np.testing.assert_array_equal(decoded, array)
  assert decoded.flags.writeable and decoded.flags.c_contiguous


def test_many_dtypes_round_trip_and_numpy_scalars_stay_scalars():
  arrays = [np.array(['x' * n]) for n in range(1, 100)]  # 99 dtypes.
  assert [a.dtype for a in _message(*arrays)] == [a.dtype for a in arrays]
  scalar, = _message(np.float32(2.5))
  assert isinstance(scalar, np.float32) and scalar == 2.5


def _array_ext(dtype: bytes, shape, data: bytes, ndim=None, code=1):
  """A message of one array extension, written out by hand."""
  ndim = len(shape) if ndim is None else ndim
  payload = (bytes((len(dtype),)) + dtype + bytes((ndim,)) +
             b''.join(struct.pack('<q', d) for d in shape) + data)
  return msgpack.packb([msgpack.ExtType(code, payload)], use_bin_type=True)


@pytest.mark.parametrize('frame, match', [
    (_array_ext(b'<f4' * 6, (1,), b'\0' * 4), 'a dtype string of 18 '),
    (_array_ext(b'f4', (1,), b'\0' * 4), "dtype 'f4' is not in canonical"),
    (_array_ext(b'|O', (1,), b'\0' * 8), 'object or structured'),
    (_array_ext(b'<zz', (1,), b''), 'malformed array header'),
    (_array_ext(b'\xff\xfe', (1,), b''), 'malformed array header'),
    (_array_ext(b'<f4', (1,) * 33, b'\0' * 4), 'an array of 33 dimensions'),
    (_array_ext(b'<f4', (2, -3), b''), r'an array of shape \(2, -3\)'),
    (_array_ext(b'<f4', (2, 3), b'\0' * 20),
     r'shape \(2, 3\) and dtype float32 with 20 bytes'),
    (_array_ext(b'<f4', (2, 3), b'', ndim=4), 'malformed array header'),
    (msgpack.packb([msgpack.ExtType(1, b'')]), 'malformed array header'),
    (msgpack.packb([msgpack.ExtType(9, b'')]), 'unknown extension type 9'),
    (_array_ext(b'<f4', (1,), b'\0' * 4, code=2), 'a numpy scalar of shape'),
])
def test_malformed_arrays_raise_one_codec_error(frame, match):
  with pytest.raises(codec.CodecError, match=match) as e:
    codec.decode(frame)
  assert '\n' not in str(e.value)


def test_a_peer_sending_many_dtypes_cannot_grow_the_codec():
  for n in range(1, 200):
    text = f'<U{n}'.encode()
    [decoded] = codec.decode(_array_ext(text, (1,), b'\0' * 4 * n))
    assert decoded.dtype == np.dtype(f'<U{n}')
  assert len(codec._DTYPE_OF) <= codec._MAX_CACHED_DTYPES  # pylint: disable=protected-access
  for n in range(1, 200):
    codec.encode(np.array(['y' * n]))
  assert len(codec._HEADER_OF) <= codec._MAX_CACHED_DTYPES  # pylint: disable=protected-access


def test_what_cannot_travel_is_refused_when_encoded():
  with pytest.raises(TypeError, match='object or structured'):
    codec.encode(np.array([1, None]))
  with pytest.raises(TypeError, match='object or structured'):
    codec.encode(np.zeros(2, [('a', np.int32)]))
  with pytest.raises(TypeError, match='cannot carry an object of type set'):
    codec.encode({1, 2})
