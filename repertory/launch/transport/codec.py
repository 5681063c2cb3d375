"""The wire format of `launch.channel`: numpy arrays and plain containers.

A message is MessagePack (the `msgpack` library) with three extension types
for what MessagePack lacks:

| ext | what | payload |
|---|---|---|
| 1 | `np.ndarray` | dtype string, shape, the C-order bytes |
| 2 | numpy scalar (`np.int64(7)`) | as an array of shape () |
| 3 | tuple marker | empty; a list whose first item it is decodes as a tuple |

So a message holds None, bool, int (64 bits), float, str, bytes, and lists,
tuples and dicts of them, numpy arrays and numpy scalars of a fixed-size
dtype (bool, integer, float, complex, bytes, str, datetime). A NamedTuple
or another tuple subclass arrives as a plain tuple, a dict subclass as a
dict, an object with `__array__` (a TF tensor) as a numpy array; anything
else is refused when it is encoded. Decoding looks no class up by name and
calls nothing a message names: there is no pickle here; an array is made
only once its shape times its dtype's size equals the bytes the message
holds for it (no dtype of 0 bytes), so a short message never allocates a
large array.
"""

import math
import struct
from typing import Any, Dict

import msgpack
import numpy as np

_ARRAY, _SCALAR, _TUPLE = 1, 2, 3
# The dtype kinds that travel: bool, signed/unsigned int, float, complex,
# bytes, str, timedelta, datetime. Object ('O') and structured ('V') arrays
# do not: an object array's bytes are pointers.
_KINDS = frozenset('biufcSUmM')
_MAX_DTYPE_CHARS = 16
_MAX_DIMS = 32  # numpy's own limit
# An array's number of dimensions (one byte) and its shape (int64 each), by
# number of dimensions.
_DIMS_AND_SHAPE = [struct.Struct(f'<B{n}q') for n in range(_MAX_DIMS + 1)]
_SHAPES = [struct.Struct(f'<{n}q') for n in range(_MAX_DIMS + 1)]
# Arrays up to this many bytes are copied out at once; larger ones are
# viewed, so that their bytes are copied only into the message.
_COPY_BELOW_BYTES = 1 << 16
_TUPLE_MARK = msgpack.ExtType(_TUPLE, b'')
# Checked dtypes: the header an array of each carries, and the dtype a
# header names. Bounded, so that a peer that sends many dtypes cannot grow
# them (a dtype past the bound is checked on every array).
_MAX_CACHED_DTYPES = 64
_HEADER_OF: Dict[np.dtype, bytes] = {}
_DTYPE_OF: Dict[bytes, np.dtype] = {}


class CodecError(ValueError):
  """A message that is not a valid channel message."""


class _TupleMarker:
  """What ext 3 decodes to (only as the first item of a list)."""


_TUPLE_SENTINEL = _TupleMarker()


def _check_dtype(dtype: np.dtype) -> None:
  if dtype.kind not in _KINDS or dtype.hasobject or dtype.fields is not None:
    raise TypeError(
        f'the channel carries numpy arrays of dtype kinds {sorted(_KINDS)} '
        f'(no object or structured arrays), got dtype {dtype!r}.')
  if dtype.itemsize == 0:
    # ('S0', 'U0'.) numpy makes an array of them with items of 1 byte or
    # more, so their size could not be checked against the bytes present.
    raise TypeError(f'the channel carries no dtype of 0 bytes, got {dtype!r}.')


def _dtype_header(dtype: np.dtype) -> bytes:
  """The length and text of the dtype's canonical string (checked)."""
  header = _HEADER_OF.get(dtype)
  if header is None:
    _check_dtype(dtype)
    text = dtype.str.encode('ascii')
    header = bytes((len(text),)) + text
    if len(_HEADER_OF) < _MAX_CACHED_DTYPES:
      _HEADER_OF[dtype] = header
  return header


def _array_payload(array: np.ndarray) -> bytes:
  header = _dtype_header(array.dtype)
  if array.ndim > _MAX_DIMS:
    raise TypeError(f'the channel carries arrays of at most {_MAX_DIMS} '
                    f'dimensions, got {array.ndim}.')
  if not array.flags.c_contiguous:  # (np.ascontiguousarray makes 0-d 1-d.)
    array = array.copy(order='C')
  if array.nbytes < _COPY_BELOW_BYTES:
    data = array.tobytes()
  else:  # Viewed as bytes: datetime arrays have no buffer of their own.
    data = memoryview(array.reshape(-1).view(np.uint8))
  return b''.join((header, _DIMS_AND_SHAPE[array.ndim].pack(
      array.ndim, *array.shape), data))


def _default(obj: Any) -> Any:
  """Encodes what msgpack's strict types leave out (see the module doc)."""
  if isinstance(obj, np.ndarray):
    return msgpack.ExtType(_ARRAY, _array_payload(obj))
  if isinstance(obj, np.generic):
    return msgpack.ExtType(_SCALAR, _array_payload(np.asarray(obj)))
  if isinstance(obj, tuple):  # A NamedTuple arrives as a plain tuple.
    return [_TUPLE_MARK, *obj]
  if isinstance(obj, bool):
    return bool(obj)
  if isinstance(obj, int):  # An IntEnum (dm_env.StepType) as its int.
    return int(obj)
  if isinstance(obj, float):
    return float(obj)
  if isinstance(obj, str):
    return str(obj)
  if isinstance(obj, dict):
    return dict(obj)
  if isinstance(obj, list):
    return list(obj)
  if hasattr(obj, '__array__') and not isinstance(obj, type):
    return msgpack.ExtType(_ARRAY, _array_payload(np.asarray(obj)))
  raise TypeError(
      f'the channel cannot carry an object of type {type(obj).__name__}: '
      'it carries None, bool, int, float, str, bytes, numpy arrays and '
      'scalars, and lists, tuples and dicts of them.')


def encode(message: Any) -> bytes:
  """The bytes of `message`; TypeError names a part that cannot travel."""
  return msgpack.packb(message, default=_default, strict_types=True,
                       use_bin_type=True)


def _dtype_named(text: bytes) -> np.dtype:
  """The dtype a header names: canonical and of a kind that travels."""
  dtype = _DTYPE_OF.get(text)
  if dtype is None:
    try:
      name = text.decode('ascii')
      dtype = np.dtype(name)
    except (UnicodeDecodeError, TypeError) as e:
      raise CodecError(f'a malformed array header: {e}') from None
    if dtype.str != name:
      raise CodecError(f'dtype {name!r} is not in canonical form')
    try:
      _check_dtype(dtype)
    except TypeError as e:
      raise CodecError(str(e)) from None
    if len(_DTYPE_OF) < _MAX_CACHED_DTYPES:
      _DTYPE_OF[text] = dtype
  return dtype


def _decode_array(data: bytes) -> np.ndarray:
  view = memoryview(data)
  try:
    size = view[0]
    if size > _MAX_DTYPE_CHARS:
      raise CodecError(f'a dtype string of {size} characters')
    dtype = _dtype_named(bytes(view[1:1 + size]))
    offset = 1 + size
    ndim = view[offset]
    offset += 1
    if ndim > _MAX_DIMS:
      raise CodecError(f'an array of {ndim} dimensions')
    shape = _SHAPES[ndim].unpack_from(view, offset)
    offset += 8 * ndim
  except (IndexError, struct.error) as e:
    raise CodecError(f'a malformed array header: {e}') from None
  if shape and min(shape) < 0:
    raise CodecError(f'an array of shape {shape}')
  count = math.prod(shape)
  raw = view[offset:]
  if len(raw) != count * dtype.itemsize:
    raise CodecError(f'an array of shape {shape} and dtype {dtype} with '
                     f'{len(raw)} bytes of data')
  if count == 0:
    return np.zeros(shape, dtype)
  # A copy: the array owns writable memory, as an unpickled one did.
  return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _ext_hook(code: int, data: bytes) -> Any:
  if code == _ARRAY:
    return _decode_array(data)
  if code == _SCALAR:
    array = _decode_array(data)
    if array.shape:
      raise CodecError(f'a numpy scalar of shape {array.shape}')
    return array[()]
  if code == _TUPLE and not data:
    return _TUPLE_SENTINEL
  raise CodecError(f'an unknown extension type {code}')


def _list_hook(items: list) -> Any:
  if items and items[0] is _TUPLE_SENTINEL:
    return tuple(items[1:])
  return items


def decode(data: bytes) -> Any:
  """The message in `data`; CodecError if it is not a valid message."""
  try:
    return msgpack.unpackb(data, ext_hook=_ext_hook, list_hook=_list_hook,
                           raw=False, strict_map_key=False, use_list=True)
  except CodecError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    # msgpack's own errors (ExtraData, FormatError, StackError, ...), a
    # non-UTF-8 str, an unhashable key, ...
    raise CodecError(f'{type(e).__name__}: {e}') from None
