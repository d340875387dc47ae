"""Records of the wrong shape: a file that parses (JSON, Parquet) but does not hold what its record must hold is
read as unreadable, named with why; every command goes on with the sweep's other runs, and a launch moves the file
aside as it does a cut one."""

import csv
import io
import json
import shutil
import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perfsweep import records
from perfsweep.launcher.run_states import EXIT_NOT_DONE
from tests.helpers import launch_here, write_sweep


@pytest.fixture
def sweep(tmp_path):
    return write_sweep(tmp_path / "sweep")


def steps_of(sweep, keep=lambda table: table):
    """Run a's step file rewritten as `keep` makes it of the one written."""
    path = sweep / "a" / records.STEPS
    pq.write_table(keep(pq.read_table(path)), path)


def as_json(value):
    return lambda sweep, path: path.write_text(json.dumps(value))


# A record of run a, well-formed but of the wrong shape: the file, and how it is damaged.
WRONG_SHAPES = {
    "failed with an error that is a string": (records.STATUS, as_json({"state": "failed", "error": "boom"})),
    "interrupted by a string": (records.STATUS, as_json({"state": "pending", "interrupted": "x"})),
    "a state that is a number": (records.STATUS, as_json({"state": 3})),
    "a summary that is a list": (records.SUMMARY, as_json([1, 2, 3])),
    "medians that are strings": (records.SUMMARY, as_json({"phases": ["data"], "median_ms": {"step_ms": "fast"}})),
    "a summary without the step's median": (records.SUMMARY, as_json({"phases": [], "median_ms": {"data_ms": 1.0}})),
    "a summary without a phase's median": (records.SUMMARY, as_json({"phases": ["data"], "median_ms": {"step_ms": 1}})),
    "clocks that are null": (records.SUMMARY, as_json({"phases": [], "median_ms": {}, "clocks": {"start": None}})),
    "a config whose axes are a list": (records.CONFIG, as_json({"run_id": "a", "axes": [], "baseline": {}})),
    "ranks that are a list": (records.SUMMARY, as_json({"phases": [], "median_ms": {"step_ms": 1}, "ranks": [2]})),
    "a flat world size that is text": (
        records.SUMMARY,
        as_json({"phases": [], "median_ms": {"step_ms": 1}, "world_size": "2"}),
    ),
    "an env whose GPU is a string": (records.ENV, as_json({"gpu": "H100"})),
    "steps without step_ms": (records.STEPS, lambda sweep, path: steps_of(sweep, lambda t: t.drop(["step_ms"]))),
    "steps without rows": (records.STEPS, lambda sweep, path: steps_of(sweep, lambda t: t.slice(0, 0))),
    "steps of warm-up only": (
        records.STEPS,
        lambda sweep, path: steps_of(
            sweep, lambda t: t.set_column(t.column_names.index("warmup"), "warmup", pa.array([True] * t.num_rows))
        ),
    ),
    "steps whose times are text": (
        records.STEPS,
        lambda sweep, path: steps_of(
            sweep, lambda t: t.set_column(t.column_names.index("step_ms"), "step_ms", pa.array(["1"] * t.num_rows))
        ),
    ),
    "steps without a column of a phase": (
        records.STEPS,
        lambda sweep, path: steps_of(sweep, lambda t: t.drop(["forward_ms"])),
    ),
}


@pytest.mark.parametrize("case", WRONG_SHAPES)
def test_a_record_of_the_wrong_shape_is_unreadable_and_every_command_goes_on(case, sweep, tmp_path):
    name, damage = WRONG_SHAPES[case]
    victim = sweep / "a" / name
    damage(sweep, victim)
    before = victim.read_bytes()
    status = launch_here("status", str(sweep))
    assert status.returncode == (EXIT_NOT_DONE if name == records.STATUS else 0), status.stderr
    if name == records.STATUS:
        (line,) = [line for line in status.stdout.splitlines() if line.startswith("unreadable a ")]
        assert f"{victim} is unreadable (not a valid status: " in line
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        copy = shutil.copytree(sweep, tmp_path / "copy")  # compare refuses a sweep beside itself
        for command in (["table"], ["runs"], ["plots"], ["compare", str(copy)]):
            shown = launch_here(command[0], str(sweep), *command[1:])
            assert shown.returncode == 0, f"{command}: {shown.stderr}"
        table = launch_here("table", str(sweep))
    assert "1 run, 1 done" in table.stdout
    said = [str(w.message) for w in caught if "skipping run a" in str(w.message)]
    assert said and f"{victim} is unreadable (not a valid " in said[0], said
    assert victim.read_bytes() == before, "a reader changes nothing"
    moved: list[str] = []
    assert not records.is_done(sweep / "a", moved), "the run will run again"
    (aside,) = victim.parent.glob(f"{name}.corrupt-*")
    assert aside.read_bytes() == before and not victim.exists()
    assert moved == [
        f"{victim} is unreadable ({said[0].split(' is unreadable (', 1)[1]}: moved aside to {aside.name}; "
        "the run will run again"
    ], moved


def test_a_planned_run_without_a_name_leaves_runs_jsonl_unreadable_and_rebuilt(sweep):
    path = sweep / records.RUNS
    path.write_text(path.read_text() + json.dumps({"run_id": "x", "axes": {}}) + "\n")
    (sweep / records.SWEEP).unlink()  # status names the runs from runs.jsonl
    status = launch_here("status", str(sweep))
    assert status.returncode == 0, status.stderr
    said = f"{path} is unreadable (not a valid planned run: line 3: baseline: Field required; config: Field required; "
    assert said + "name: Field required)" in status.stdout
    assert "2 runs, 2 done" in status.stdout
    table = launch_here("table", str(sweep))
    assert table.returncode == 0 and "2 runs, 2 done" in table.stdout, table.stderr
    assert records.repair(sweep)[0].startswith(f"{path} is unreadable")
    assert sorted(records.planned_runs(sweep)) == ["a", "b"] and list(sweep.glob(f"{records.RUNS}.corrupt-*"))


@pytest.mark.parametrize(
    "name, value",
    [
        (records.JOBS, {"a": "DEBUG_a"}),
        (records.JOBS, [1, 2]),
        (records.SWEEP, {"uid": "0f0f0f0f", "runs": ["a", "b"]}),
        (records.SWEEP, "a sweep"),
    ],
)
def test_a_sweep_file_of_the_wrong_shape_is_read_as_rebuilt(name, value, sweep):
    (sweep / name).write_text(json.dumps(value))
    status = launch_here("status", str(sweep))
    assert status.returncode == 0, status.stderr
    assert f"{sweep / name} is unreadable (not a valid " in status.stdout and "2 runs, 2 done" in status.stdout


def test_a_run_whose_config_has_no_batch_size_is_tabled_without_a_batch_flag(sweep):
    """A config record need not say a model's batch (its config is the resolved one, written whole by the run)."""
    config = records.read_json(sweep / "a" / records.CONFIG)
    del config["config"]["model"]["batch_size"]
    records.write_json(sweep / "a" / records.CONFIG, config)
    table = launch_here("table", str(sweep))
    assert table.returncode == 0 and "2 runs, 2 done" in table.stdout, table.stderr
    assert "BATCH REDUCED" not in table.stdout


# A DDP run's rank fields as summary.json held them before `ranks`: at its top level.
FLAT_RANKS = {
    "world_size": 2,
    "rank_step_ms": [30.0, 31.5],
    "rank_own_step_ms": [10.0, 20.0],
    "straggler_rank": 1,
    "straggler_index": 1.33,
    "exposed_comm_ms": 4.5,
    "exposed_comm_share": 0.14,
    "comm_bytes_per_step": 1494632,
    "bus_gbps_min": 0.2,
}


def test_a_summary_written_with_its_rank_fields_at_the_top_level_is_read_into_ranks(sweep):
    summary = records.read_json(sweep / "a" / records.SUMMARY) | FLAT_RANKS
    records.write_json(sweep / "a" / records.SUMMARY, summary)
    (run, _) = records.load_sweep(sweep)
    assert run.name == "a" and run.summary.ranks == records.RankSummary(
        world_size=2,
        step_ms=[30.0, 31.5],
        own_step_ms=[10.0, 20.0],
        straggler_rank=1,
        straggler_index=1.33,
        exposed_comm_ms=4.5,
        exposed_comm_share=0.14,
        comm_bytes_per_step=1494632,
        bus_gbps_min=0.2,
    )
    rewritten = run.summary.to_json()
    assert rewritten["ranks"]["step_ms"] == [30.0, 31.5] and not set(FLAT_RANKS) & set(rewritten)
    assert records.Summary.from_json(rewritten) == run.summary, "the nested layout reads back the same"
    table = launch_here("table", str(sweep))
    assert table.returncode == 0 and "| threads a rank | straggler   | exposed comm ms |" in table.stdout, table.stderr
    assert "| -              | 1.33 rank 1 | 4.5             |" in table.stdout, "threads it did not record: unknown"
    rows = list(csv.DictReader(io.StringIO(launch_here("table", str(sweep), "--format", "csv").stdout)))
    ranks = next(row for row in rows if row["straggler"])
    assert (ranks["straggler"], ranks["straggler rank"], ranks["threads a rank fewest"]) == ("1.33", "1", "")


def test_a_summary_in_one_process_has_no_ranks(sweep):
    (run, _) = records.load_sweep(sweep)
    assert run.summary.ranks is None and "ranks" not in run.summary.to_json()
