"""Step tables between Python rows, pyarrow and numpy, without pyarrow's bridge to pandas.

pyarrow imports pandas, where it is installed, the first time it converts values to or from Python or numpy.
That import takes a process a quarter of a second of a CPU, and every run and every view that reads steps made it.
Step tables hold numbers and flags.
These convert those through their buffers, which imports nothing.
Any other column goes through pyarrow's own conversion, as before.
"""

from typing import Any

import numpy as np
import pyarrow as pa


def table_of(rows: list[dict[str, Any]]) -> pa.Table:
    """The rows as a table, as `pa.Table.from_pylist` makes it: the first row's keys are its columns."""
    names = list(rows[0]) if rows else []
    return pa.Table.from_arrays([_array([row.get(name) for row in rows]) for name in names], names=names)


# Python's own scalars, by their exact type: numpy's keep their widths in pyarrow, so they take pyarrow's way
KINDS = {bool: (pa.bool_(), np.bool_), int: (pa.int64(), np.int64), float: (pa.float64(), np.float64)}


def _array(values: list[Any]) -> pa.Array:
    """A column of booleans, integers or floats from its buffers, None as null.

    Any other column, one that mixes kinds among them, takes pyarrow's own conversion and its rules.
    """
    types = {type(v) for v in values if v is not None}
    if not types:
        return pa.nulls(len(values))
    if len(types) > 1 or not types <= KINDS.keys():
        return pa.array(values)
    kind, dtype = KINDS[types.pop()]
    valid = np.array([v is not None for v in values])
    data = np.array([dtype(0) if v is None else v for v in values], dtype=dtype)
    bits = _bits(data) if kind == pa.bool_() else pa.py_buffer(data)
    mask = None if valid.all() else _bits(valid)
    return pa.Array.from_buffers(kind, len(values), [mask, bits], null_count=int((~valid).sum()))


def _bits(flags: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.packbits(flags, bitorder="little"))


def numpy_of(column: pa.ChunkedArray) -> np.ndarray:
    """A column as a numpy array, as `to_numpy(zero_copy_only=False)` gives it: nulls of a number are NaN."""
    kind = column.type
    numbers = pa.types.is_integer(kind) or pa.types.is_floating(kind)
    flags = pa.types.is_boolean(kind) and not column.null_count
    if not (numbers or flags):
        return column.to_numpy(zero_copy_only=False)
    parts = [_chunk(chunk) for chunk in column.chunks]
    return np.concatenate(parts) if parts else np.empty(0, kind.to_pandas_dtype())


def _chunk(chunk: pa.Array) -> np.ndarray:
    mask, data = chunk.buffers()
    dtype = np.dtype(chunk.type.to_pandas_dtype())
    if not len(chunk):
        return np.empty(0, dtype)
    if pa.types.is_boolean(chunk.type):
        values = _unpacked(data, chunk.offset, len(chunk))
    else:
        values = np.frombuffer(data, dtype, len(chunk), chunk.offset * dtype.itemsize)
    if chunk.null_count:
        values = values.astype(np.float64) if values.dtype.kind in "iu" else values.copy()
        values[~_unpacked(mask, chunk.offset, len(chunk))] = np.nan
    return values


def _unpacked(buffer: pa.Buffer, offset: int, length: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(buffer, np.uint8), bitorder="little")[offset : offset + length].astype(bool)
