"""Step tables made and read through their buffers (records/columns.py): the same tables and arrays as pyarrow's own
conversions give, with no pandas imported."""

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfsweep import records
from perfsweep.records.columns import numpy_of, table_of

NUMBERS = st.none() | st.integers(-(2**63), 2**63 - 1) | st.floats()
CELLS = {
    "flags": st.none() | st.booleans(),
    "counts": st.none() | st.integers(-(2**63), 2**63 - 1),
    "times": NUMBERS,
    "numpy": st.none() | st.floats(width=32).map(np.float32) | st.integers(-100, 100).map(np.int64),
    "words": st.none() | st.text(max_size=3),
    "mixed": st.none() | st.booleans() | st.integers(-3, 3) | st.floats(),  # pyarrow's rules, or its refusal
    "nothing": st.none(),
}


@st.composite
def rows(draw) -> list[dict]:
    names = draw(st.lists(st.sampled_from(sorted(CELLS)), unique=True, max_size=len(CELLS)))
    count = draw(st.integers(0, 40))
    return [{name: draw(CELLS[name]) for name in names} for _ in range(count)]


def same(found: np.ndarray, expected: np.ndarray) -> bool:
    return found.dtype == expected.dtype and np.array_equal(found, expected, equal_nan=found.dtype.kind in "fc")


@settings(max_examples=200, deadline=None)
@given(rows())
def test_a_table_of_rows_is_pyarrows_own(made):
    try:
        expected = pa.Table.from_pylist(made)
    except pa.ArrowException as refused:  # such as numpy scalars of two dtypes in a column
        with pytest.raises(type(refused)):
            table_of(made)
        return
    found = table_of(made)
    assert found.schema == expected.schema and cells(found) == cells(expected)


def cells(table: pa.Table) -> list[list]:
    """The table's values, a NaN as the string "nan" (a NaN equals nothing, itself included)."""
    return [["nan" if v != v else v for v in column.to_pylist()] for column in table.columns]


NUMBER_TYPES = [pa.float64(), pa.float32(), pa.float16(), pa.int64(), pa.int8(), pa.uint16()]


@st.composite
def columns(draw) -> pa.ChunkedArray:
    """A column of numbers or flags, nulls among them or not, in chunks that may be slices of larger arrays."""
    kind = draw(st.sampled_from([*NUMBER_TYPES, pa.bool_()]))
    if kind == pa.bool_():
        values = st.booleans()
    elif pa.types.is_floating(kind):
        values = st.floats(width=16)  # NaN, the infinities and -0.0 among them, in every width
    else:
        values = st.integers(0, 100)
    cells = (st.none() | values) if draw(st.booleans()) else values
    chunks = []
    for _ in range(draw(st.integers(0, 3))):
        whole = pa.array(draw(st.lists(cells, max_size=30)), type=kind)
        start = draw(st.integers(0, len(whole)))
        chunks.append(whole.slice(start, draw(st.integers(0, len(whole) - start))))
    return pa.chunked_array(chunks, type=kind)


@settings(max_examples=300, deadline=None)
@given(columns())
def test_a_column_reads_as_pyarrows_own_numpy_array(column):
    expected = column.to_numpy(zero_copy_only=False)
    found = numpy_of(column)
    if expected.dtype == object:  # flags with nulls: pyarrow's own conversion, as given
        assert list(found) == list(expected)
    else:
        assert same(found, expected), (found, expected)


def test_writing_and_reading_a_step_file_imports_no_pandas(tmp_path):
    code = f"""
import sys
from pathlib import Path
from perfsweep import records
from perfsweep.records.columns import numpy_of
path = Path({str(tmp_path / records.STEPS)!r})
rows = [{{"step": 1, "step_ms": 2.5, "loss": None, "warmup": True}}, {{"step": 2, "step_ms": 2.0, "loss": 0.5,
        "warmup": False}}]
records.write_steps(path, rows)
table = records.read_steps(path)
read = {{name: numpy_of(table.column(name)) for name in table.column_names}}
assert "pandas" not in sys.modules, "pandas imported"
print(read["step_ms"].tolist(), read["warmup"].tolist())
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[2.5, 2.0] [True, False]", done.stderr
