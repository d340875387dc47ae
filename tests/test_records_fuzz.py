"""Property-based tests of every record reader: each record of a sweep, in turn, replaced by generated files of the
wrong type, shape, encoding and size (a valid record with a field changed, removed or added; any JSON; other
encodings; cut; random bytes; a large record; step tables of any columns, types and rows).

The property: no traceback from a reader or from the commands' views (status, table, runs, replicates, published,
compare, explain); a record that is not what its file must hold is read as unreadable, with a message naming the
file; nothing recorded is lost or overwritten: a reader leaves the file as it was, and a launch-side reader that
quarantines (a run starting, a launch repairing the sweep's files) moves it aside byte for byte. An ops record is
read by the views alone: a launch leaves it as it is.

PERFSWEEP_FUZZ_EXAMPLES=N tries N inputs per record file (default 50: about 1.5 s each); the counts tried are
printed at the end of the test run.
"""

import copy
import dataclasses
import json
import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfsweep import records
from perfsweep.analysis.groups import configurations, labels, speedups
from perfsweep.analysis.render import text
from perfsweep.analysis.statistics.host_flags import figures, seen
from perfsweep.analysis.statistics.verdict import SLOWER
from perfsweep.analysis.views import compare, explain, replicates, runs, sweep_views
from perfsweep.launcher.run_states import render
from tests.helpers import EXAMPLES, TRIED, write_sweep

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    # the template sweep is made once and every example restores what it changed
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

RUN_LEVEL = (records.STATUS, records.CONFIG, records.ENV, records.SUMMARY, records.STEPS)
SWEEP_LEVEL = (records.SWEEP, records.RUNS, records.JOBS)
VIEWS_ONLY = (records.OPS,)  # read by the views alone: a launch leaves it as it is

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def changed(draw, valid):
    """`valid` (a JSON value) with one field somewhere in it replaced, removed, or added."""
    root = copy.deepcopy(valid)
    node = root
    while True:
        nested = [key for key in _keys(node) if isinstance(node[key], dict | list) and node[key]]
        if not nested or not draw(st.booleans()):
            break
        node = node[draw(st.sampled_from(nested))]
    keys = _keys(node)
    how = draw(st.sampled_from(["replace", "remove", "add"] if keys else ["add"]))
    if how == "replace":
        node[draw(st.sampled_from(keys))] = draw(json_values)
    elif how == "remove":
        node.pop(draw(st.sampled_from(keys)))
    elif isinstance(node, dict):
        node[draw(st.text(max_size=10))] = draw(json_values)
    else:
        node.append(draw(json_values))
    return root


def _keys(node) -> list:
    return sorted(node) if isinstance(node, dict) else list(range(len(node)))


@st.composite
def large(draw, valid: bytes):
    """`valid` with a long string or a long list in one field (valid: a JSON object)."""
    value = json.loads(valid)
    size = draw(st.integers(10_000, 1_000_000))
    key = draw(st.sampled_from(sorted(value)))
    value[key] = "x" * size if draw(st.booleans()) else list(range(size // 10))
    return json.dumps(value).encode()


def encoded(valid: bytes):
    """The record's text in another encoding, or after a byte-order mark."""
    text = valid.decode()
    return st.sampled_from(
        [text.encode("utf-16"), text.encode("utf-32"), b"\xef\xbb\xbf" + valid, text.encode("utf-16-le")]
    )


def cut(valid: bytes):
    return st.integers(0, len(valid) - 1).map(lambda n: valid[:n])


def json_files(valid: bytes):
    """What a JSON record's file may hold instead of `valid`."""
    return st.one_of(
        changed(json.loads(valid)).map(lambda v: json.dumps(v).encode()),
        json_values.map(lambda v: json.dumps(v).encode()),
        encoded(valid),
        cut(valid),
        st.binary(max_size=300),
        large(valid),
    )


def lines_files(valid: bytes):
    """What runs.jsonl may hold instead of `valid`: its lines, lines changed, any JSON, junk and blank lines."""
    lines = valid.splitlines()
    line = st.one_of(
        st.sampled_from(lines),
        st.sampled_from(lines).flatmap(lambda v: changed(json.loads(v))).map(lambda v: json.dumps(v).encode()),
        json_values.map(lambda v: json.dumps(v).encode()),
        st.binary(max_size=40).filter(lambda b: b"\n" not in b and b"\r" not in b),
        st.just(b""),
    )
    return st.one_of(st.lists(line, max_size=6).map(b"\n".join), encoded(valid), cut(valid), st.binary(max_size=300))


COLUMNS = ["step_ms", "warmup", "forward_ms", "data_ms", "backward_ms", "optimizer_ms", "step", "loss"]
TYPES = {
    pa.float64(): st.floats(),
    pa.float32(): st.floats(width=32),
    pa.int64(): st.integers(-(2**63), 2**63 - 1),
    pa.int8(): st.integers(-128, 127),
    pa.bool_(): st.booleans(),
    pa.string(): st.text(max_size=5),
    pa.null(): st.none(),
}


@st.composite
def columns(draw, rows: int) -> pa.Array:
    kind = draw(st.sampled_from(list(TYPES)))
    values = draw(st.lists(st.none() | TYPES[kind], min_size=rows, max_size=rows))
    return pa.array(values, type=kind)


@st.composite
def step_tables(draw, valid: pa.Table) -> bytes:
    """A step file: the valid one with columns dropped, replaced or added and rows cut, or one of any columns."""
    if draw(st.booleans()):
        found = valid.slice(0, draw(st.integers(0, valid.num_rows)))
        for _ in range(draw(st.integers(1, 3))):
            name = draw(st.sampled_from(COLUMNS) | st.text(max_size=6))
            if name in found.column_names and draw(st.booleans()):
                found = found.remove_column(found.column_names.index(name))
            else:
                found = found.append_column(name, draw(columns(found.num_rows)))
    else:
        rows = draw(st.sampled_from([0, 1, 3, 20, 5000]))
        names = draw(st.lists(st.sampled_from(COLUMNS) | st.text(max_size=6), max_size=8))
        found = pa.Table.from_arrays([draw(columns(rows)) for _ in names], names=names)
    sink = pa.BufferOutputStream()
    pq.write_table(found, sink)
    return sink.getvalue().to_pybytes()


def step_files(valid: bytes):
    return st.one_of(step_tables(pq.read_table(pa.BufferReader(valid))), cut(valid), st.binary(max_size=300))


OPS = {  # as train/op_breakdown.py writes it, on a CPU
    "steps": 3,
    "device": "cpu",
    "operators": {"aten::convolution": {"calls": 20.0, "self_cpu_us": 5000.0, "self_device_us": 0.0}},
    "phases": {"forward": {"cpu_us": 9000.0, "outside_operators_us": 4000.0, "net_allocated_mib": 6.0}},
    "dynamo": None,
    "torch_calls": 600,
    "subclass_calls": {"SubClassedTensor": 92},
    "host_reads": {"item": 1},
    "host_read_places": {"item at train/step.py:10": 1},
}


HOST_BLOCK = {  # as train/host_state.py reads it on a CPU without cpufreq
    "wall_s": 1.6,
    "cpus": 2,
    "process_cpu_s": 3.1,
    "busy_s": 3.3,
    "others_cpu_s": 0.2,
    "tick_s": 0.01,
    "steal_s": 0.0,
    "throttled": 0,
    "throttled_s": 0.0,
    "mhz_start": None,
    "mhz_end": None,
}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """write_sweep's two runs, each with an ops record (explain=true) and the host over two blocks."""
    folder = write_sweep(tmp_path_factory.mktemp("fuzz") / "sweep")
    host = records.HostState.of([records.HostBlock(**HOST_BLOCK)] * 2)
    for name in ("a", "b"):
        records.write_json(folder / name / records.OPS, OPS)
        summary = records.read_json(folder / name / records.SUMMARY)
        records.write_json(folder / name / records.SUMMARY, {**summary, "host": dataclasses.asdict(host)})
    return folder


def target(sweep, name):
    return sweep / name if name in SWEEP_LEVEL else sweep / "a" / name


def files_of(name: str, valid: bytes):
    if name == records.STEPS:
        return step_files(valid)
    return lines_files(valid) if name == records.RUNS else json_files(valid)


@pytest.mark.slow
@pytest.mark.parametrize("name", RUN_LEVEL + SWEEP_LEVEL + VIEWS_ONLY)
def test_every_reader_takes_any_file_in_place_of_a_record(name, sweep):
    path = target(sweep, name)
    recorded = contents(sweep)

    @FUZZ
    @given(files_of(name, recorded[path]))
    def readers_take(data: bytes) -> None:
        TRIED[f"{name}: inputs tried (read_record, its typed reader, the views, a launch)"] += 1
        path.write_bytes(data)
        try:
            _check_readers(sweep, path, data)
        finally:
            restore(sweep, recorded)

    readers_take()


def contents(sweep) -> dict:
    return {p: p.read_bytes() for p in sweep.rglob("*") if p.is_file()}


def restore(sweep, recorded: dict) -> None:
    """The sweep's files as `recorded`: each one as it was, and none beside them."""
    for path in set(contents(sweep)) - set(recorded):
        path.unlink()
    for path, data in recorded.items():
        if not path.is_file() or path.read_bytes() != data:
            path.write_bytes(data)


def _check_readers(sweep, path, data: bytes) -> None:
    found = records.read_record(path)
    if isinstance(found, records.Unreadable):
        TRIED[f"{path.name}: of them read as unreadable"] += 1
        assert str(found).startswith(f"{path} is unreadable ("), found
    if path.name in SWEEP_LEVEL:
        _check_sweep_files(sweep, path, found)
    elif path.name == records.OPS:
        _check_ops(sweep, path, found)
    else:
        _check_run(sweep, path, found)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shown = [render(sweep)[0], *map(text, sweep_views(sweep)), text(runs.view(sweep)), text(replicates.view(sweep))]
        shown.append(text(compare.compare(sweep, sweep, threshold=0.05, loss_tolerance=0.05)[0]))
    skipped = [str(w.message) for w in caught if str(w.message).startswith("skipping run a:")]
    assert all(path.name in message for message in skipped), skipped
    if isinstance(found, records.Unreadable) and path.name == records.STATUS:
        assert f"{path} is unreadable" in shown[0]
    assert path.read_bytes() == data, "a reader changes nothing"
    _check_launch_side(sweep, path, data, found)


def _check_run(sweep, path, found) -> None:
    """load_run takes the run, or raises RecordError naming the file; a run it takes reads as the views read it."""
    try:
        run = records.load_run(sweep / "a", records.planned_runs(sweep).get("a"))
    except records.RecordError as error:
        assert path.name in str(error), error
        return
    assert not isinstance(found, records.Unreadable), "an unreadable record is never taken"
    assert isinstance(run.device, str) and isinstance(run.machine, dict) and isinstance(run.error_line(), str)
    if run.state == records.DONE:
        steps = run.steps([f"{phase}_ms" for phase in (*run.summary.phases, "step")])
        assert len(steps["step_ms"]) and isinstance(run.summary.median("step"), int | float)
        assert isinstance(run.summary.gpu_neighbours(), list)
        assert run.summary.host is None or isinstance(seen(run.summary.host) + figures(run.summary.host), str)


def _check_ops(sweep, path, found) -> None:
    """The explain view of a comparison taken as decided ranks the runs' records, or names the one it cannot read."""
    done = records.load_sweep(sweep)
    ((versus, _),) = speedups(done)
    shown = text(explain.comparison_view(versus.config, versus.base, SLOWER, labels(configurations(done))))
    if isinstance(found, records.Unreadable):
        assert f"{path} is unreadable" in shown, shown


def _check_sweep_files(sweep, path, found) -> None:
    """A sweep file that cannot be read is read as rebuilt from the run folders, and said to be."""
    unreadable: list[records.Unreadable] = []
    read = {
        records.SWEEP: records.read_manifest,
        records.RUNS: records.planned_runs,
        records.JOBS: records.submitted_jobs,
    }
    read[path.name](sweep, unreadable)
    assert unreadable == ([found] if isinstance(found, records.Unreadable) else [])


def _check_launch_side(sweep, path, data: bytes, found) -> None:
    """What a launch does with the sweep: moves a file that cannot be read aside, byte for byte (and writes a sweep
    file again, rebuilt), and leaves every other file as it was."""
    before = contents(sweep)
    if path.name in SWEEP_LEVEL:
        records.repair(sweep)
    elif path.name == records.STATUS:
        records.read_status(sweep / "a", move_aside=True)
    else:
        records.is_done(sweep / "a", moved=[])
    after = contents(sweep)
    for kept, recorded in before.items():
        aside = [a for a in after if a.parent == kept.parent and a.name.startswith(f"{kept.name}.corrupt-")]
        assert after.get(kept) == recorded or [after[a] for a in aside] == [recorded], f"{kept} lost or changed"
    if isinstance(found, records.Unreadable) and path.name not in VIEWS_ONLY:
        assert [a for a in after if a.name.startswith(f"{path.name}.corrupt-")], f"{path} not moved aside"
