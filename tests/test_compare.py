"""compare's matching of two sweeps: what they differ in, the configurations each lacks, and the gate on them."""

import csv
import dataclasses
import io
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from perfsweep import records
from perfsweep.analysis.groups import configurations
from perfsweep.analysis.statistics import verdict
from perfsweep.analysis.statistics.speedup import ACROSS, WITHIN_RUN, Speedup, slow_end
from perfsweep.analysis.views import comment, compare
from perfsweep.records import lifecycle, load_sweep
from perfsweep.records.host import HostBlock, HostState
from tests import golden, synthetic
from tests.helpers import cells, launch_here

STEADY = synthetic.Noise(run_sd=0.01, step_sd=0.01, bimodal=0.0)
NET = {"model._target_": "mypkg.models.Net", "model.name": "Net"}  # the user's own model, by its import path


def sweep(levels: dict, rng, **fields) -> list:
    """Three runs of each configuration of the user's model, `fields` added to each run's config."""
    return [dataclasses.replace(r, fields=r.fields | NET | fields) for r in synthetic.sweep(levels, 3, STEADY, rng)]


def said(view) -> str:
    """What compare says around its table: the lines above it, its verdict line and its flags."""
    return "\n".join([*view.above, *([view.empty] if view.empty else []), *view.notes[:1], *view.flags])


def step_flags(out: str) -> list[tuple[str, str]]:
    """Each configuration's step line in the printed table: its name and its flag."""
    return [
        (row["configuration (A)"], row["flag"]) for row in cells(out, "configuration (A)") if row["phase"] == "step"
    ]


def test_a_constructor_argument_that_one_sweep_adds_is_compared_along_and_its_slowdown_fails_the_gate(tmp_path):
    rng = np.random.default_rng(0)
    a = synthetic.write(sweep(synthetic.grid(), rng), tmp_path / "a")
    slower = {key: 3.4 * level for key, level in synthetic.grid().items()}
    b = synthetic.write(sweep(slower, rng, **{"model.kwargs.d_model": 256}), tmp_path / "b")
    shown = launch_here("compare", str(a), str(b))
    assert shown.returncode == compare.EXIT_REGRESSION, shown.stdout + shown.stderr
    assert step_flags(shown.stdout) == [(name, "REGRESSION") for name in ("subclass", "tensor", "tensorbase")]
    around = [line for line in shown.stdout.splitlines() if not line.startswith(("|", "suite:"))]
    golden.says("compare: a constructor argument only B sets", "\n".join(around), {tmp_path: "<tmp>"})


def test_compare_s_data_gives_each_speed_up_the_word_its_line_is_counted_by(tmp_path):
    """subclass 1.5x slower, the others the same: JSON and CSV name each step's word beside its interval."""
    rng = np.random.default_rng(0)
    a = synthetic.write(sweep(synthetic.grid(), rng), tmp_path / "a")
    b = synthetic.write(sweep(synthetic.grid({"subclass": 1.5}), rng), tmp_path / "b")
    shown = launch_here("compare", str(a), str(b), "--format", "json")
    every = json.loads(shown.stdout)["rows"]
    rows = [row for row in every if row["phase"] == "step"]
    words = {row["configuration (A)"]: (row["B speed-up [95%] word"], row["flag"]) for row in rows}
    assert all(row["B speed-up [95%] word"] is None for row in every if row["phase"] != "step"), "phases: not gated"
    assert words == {"subclass": ("slower", "REGRESSION"), "tensor": ("same", ""), "tensorbase": ("same", "")}, words
    table = csv.DictReader(io.StringIO(launch_here("compare", str(a), str(b), "--format", "csv").stdout))
    steps = {row["configuration (A)"]: row["B speed-up [95%] word"] for row in table if row["phase"] == "step"}
    assert steps == {"subclass": "slower", "tensor": "same", "tensorbase": "same"}, steps


def test_sweeps_without_a_configuration_in_common_exit_2_naming_what_parts_them_and_how_to_match():
    rng = np.random.default_rng(1)
    a = sweep(synthetic.grid(), rng)
    b = [run for width in (256, 512) for run in sweep(synthetic.grid(), rng, **{"model.kwargs.d_model": width})]
    shown, status = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    assert status == 2 and not shown.items, "no comparison was made"
    golden.says("compare: no configuration matched", said(shown))


def test_sweeps_of_the_same_values_in_other_combinations_are_said_to_be_so():
    rng = np.random.default_rng(2)
    a = sweep({("tensor", "contiguous"): 50.0, ("subclass", "channels_last"): 50.0}, rng)
    b = sweep({("tensor", "channels_last"): 50.0, ("subclass", "contiguous"): 50.0}, rng)
    shown, status = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    assert status == 2
    golden.says("compare: the same values in other combinations", said(shown))


def test_configurations_of_a_without_a_match_in_b_fail_the_gate_past_max_unmatched(tmp_path):
    """B is a subset of A and adds a tensor type of the user's own; its one matched configuration 1.3x slower."""
    rng = np.random.default_rng(3)
    a = synthetic.write(sweep(synthetic.grid(), rng), tmp_path / "a")
    own = {"input_type._target_": "mypkg.tensors.MetaImage"}
    b = [
        dataclasses.replace(run, fields=run.fields | (own if run.axes["input_type"] == "MetaImage" else {}))
        for run in sweep({("subclass", "contiguous"): 65.0, ("MetaImage", "contiguous"): 50.0}, rng)
    ]
    b = synthetic.write(b, tmp_path / "b")
    shown = launch_here("compare", str(a), str(b))
    assert shown.returncode == 9, shown.stdout + shown.stderr  # a regression, and A's configurations unmatched
    assert step_flags(shown.stdout) == [("subclass", "REGRESSION")], "named as among all of A's configurations"
    around = [line for line in shown.stdout.splitlines() if not line.startswith(("|", "suite:"))]
    golden.says("compare: configurations of A without a match in B", "\n".join(around), {tmp_path: "<tmp>"})
    assert launch_here("compare", str(a), str(b), "--max-unmatched", "0.5").returncode == 9, "2 of 3 is past half"
    for written in ("1", "100%"):  # the form compare prints is taken too
        subset = launch_here("compare", str(a), str(b), "--max-unmatched", written)
        assert subset.returncode == compare.EXIT_REGRESSION and "(67%, within --max-unmatched 100%)" in subset.stdout
    refused = launch_here("compare", str(a), str(b), "--max-unmatched", "2")
    assert refused.returncode == 2 and "--max-unmatched: 2: a share from 0 to 1" in refused.stderr


def test_a_regression_measured_beside_a_shared_host_is_possible_and_says_the_load_may_be_its_cause():
    """B's subclass is a third slower, three tight runs a side: a REGRESSION on quiet hosts.
    Where B's runs shared their host and A's did not, the slowdown may be the neighbour's: a possible one, which
    still fails the gate (exit 3, not 1: nothing confirmed it is the code's).
    Where A's did, B's slowdown stands: the load slowed A; unless B's host is not known."""
    noisy = synthetic.Noise(run_sd=0.01, step_sd=0.01, bimodal=0.0)
    rng = np.random.default_rng(9)
    a = synthetic.beside(synthetic.sweep(synthetic.grid(), 3, noisy, rng), 0.0)
    b = synthetic.sweep(synthetic.grid({"subclass": 1.33}), 3, noisy, rng)
    busy_a, quiet = synthetic.beside(a, 0.8), synthetic.beside(b, 0.0)
    cases = [(a, quiet, False), (a, synthetic.beside(b, 0.8), True), (busy_a, quiet, False)]
    cases += [(busy_a, b, True)]  # B's host not known (no host state): B's may have been shared too
    cases += [(busy_a, synthetic.beside(b, 1.2), True)]  # both shared, B's more: B's slowdown may be its load
    for side_a, side_b, suspect in cases:
        shown, status = compare.compare_runs(side_a, side_b, threshold=0.05, loss_tolerance=0.05)
        assert status == (compare.EXIT_POSSIBLE if suspect else compare.EXIT_REGRESSION), "the gate fails either way"
        flags = [(line.configuration, line.flag) for line in shown.items if line.phase == "step" and line.flag]
        assert flags == [("subclass", "POSSIBLE REGRESSION (shared host)" if suspect else "REGRESSION")], flags
        found = [flag for flag in shown.flags if flag.startswith("SHARED HOST: their hosts differ (above)")]
        assert bool(found) == suspect, shown.flags
        suite = next(note for note in shown.notes if note.startswith("suite: "))
        differ = any(line.startswith("their hosts differ in: ") for line in shown.above)
        assert suite.endswith("; their hosts differ (above), and it moves with them") == differ, suite
        assert differ or not suspect, "a possible regression of a shared host comes of hosts that differ"
        if suspect:
            said = "so the lines flagged POSSIBLE REGRESSION may show that load, not the code"
            which = "B's sweep" if side_a is a else "the sweep whose host was shared"  # known where A's was quiet
            assert said in found[0] and f"run {which} again with its host to itself" in found[0], found[0]
            assert shown.notes[0].startswith("1 slower (1 of them possible: shared host), 0 faster"), shown.notes[0]
            head = comment.comment(shown, 0.05).splitlines()[0]
            assert head.endswith("x slower in subclass (POSSIBLE REGRESSION, shared host)"), head


def test_the_count_of_undetermined_lines_says_how_many_are_flagged():
    """Two sweeps alike, 3 runs a side: none is decided, and one line's interval reaches no slowdown past 5%."""
    noisy = synthetic.Noise(run_sd=0.05, step_sd=0.01, bimodal=0.0)
    rng = np.random.default_rng(3)
    a, b = (synthetic.sweep(synthetic.grid(), 3, noisy, rng) for _ in "ab")
    shown, status = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    flags = sorted(line.flag.split(" (")[0] for line in shown.items if line.phase == "step")
    assert flags == ["", "UNDETERMINED", "UNDETERMINED"] and status == 0, flags
    said = "0 same, 3 undetermined (2 of them flagged UNDETERMINED: a slowdown not ruled out), of 3 configurations"
    assert said in shown.notes[0], shown.notes[0]


def test_an_undetermined_slowdown_beside_a_neighbour_fails_the_gate_as_a_possible_regression():
    """B ran beside a load that took 40% of its CPUs: its runs spread so wide that no slowdown is decided or ruled
    out. More runs beside that load would not decide it, and the load may hide a slowdown: the gate exits 3, and
    the comment that --only-changes posts names the undetermined line."""
    rng = np.random.default_rng(1)
    quiet = synthetic.Noise(run_sd=0.02, step_sd=0.01, bimodal=0.0)
    a = synthetic.beside(synthetic.sweep(synthetic.grid(), 3, quiet, rng), 0.0)
    loaded = synthetic.Noise(run_sd=0.3, step_sd=0.01, bimodal=0.0)
    b = synthetic.beside(synthetic.sweep({k: v * 1.1 for k, v in synthetic.grid().items()}, 3, loaded, rng), 0.8)
    shown, status = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    steps = {line.flag for line in shown.items if line.phase == "step"}
    assert steps == {"UNDETERMINED (slower, not significant)"} and status == compare.EXIT_POSSIBLE, (steps, status)
    (said,) = [flag for flag in shown.flags if "the gate does not pass the lines flagged UNDETERMINED" in flag]
    assert said.startswith("SHARED HOST: their hosts differ (above)"), said
    head = comment.comment(shown, 0.05).splitlines()[0]
    assert head.startswith("### perfsweep: a slowdown not ruled out in ") and head.endswith("SHARED HOST)"), head
    quiet_b = synthetic.beside(b, 0.0)  # the same spread with no neighbour seen: more runs decide it, and it passes
    assert compare.compare_runs(a, quiet_b, threshold=0.05, loss_tolerance=0.05)[1] == 0
    came_and_went = [synthetic.beside([run], 0.8 if i % 3 == 0 else 0.0)[0] for i, run in enumerate(b)]
    shown, status = compare.compare_runs(a, came_and_went, threshold=0.05, loss_tolerance=0.05)
    assert any(line.startswith("their hosts differ in: others' CPU above 10% in A 0 of 9, B 3 of 9") for line in
               shown.above), shown.above  # fmt: skip
    assert status == 0, "a neighbour in 3 of B's 9 runs: its median run had none, and more runs decide it"


def test_every_configuration_slower_alike_with_nothing_changed_is_a_possible_regression():
    """Two sweeps of the same code minutes apart: each configuration's step 25% slower in B, the machine's fixed
    workload unmoved. Each sweep's spread between its processes holds none of what moved between the sweeps, and no
    change of code or settings can have moved them. The gate fails (3), unconfirmed. Where B's code differs, it
    stands."""
    steady = synthetic.Noise(run_sd=0.01, step_sd=0.01, bimodal=0.0)
    rng = np.random.default_rng(9)
    a = synthetic.with_code(synthetic.sweep(synthetic.grid(), 3, steady, rng), "a")
    b = synthetic.with_code(
        synthetic.sweep({key: level * 1.25 for key, level in synthetic.grid().items()}, 3, steady, rng), "a"
    )
    unknown = [dataclasses.replace(r, status=dataclasses.replace(r.status, code=None)) for r in b]
    assert compare.compare_runs(a, unknown, 0.05, 0.05)[1] == compare.EXIT_REGRESSION, "code not recorded: not known"
    shown, status = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    assert status == compare.EXIT_POSSIBLE, shown.flags
    steps = {line.flag for line in shown.items if line.phase == "step"}
    assert steps == {"POSSIBLE REGRESSION (moved together)"}, steps
    (said,) = [flag for flag in shown.flags if flag.startswith("MOVED TOGETHER: ")]
    assert said.startswith("MOVED TOGETHER: every configuration's step fits one move, slower in B, by the suite's 0.7")
    assert said.endswith("may show the machine, not the code: run the sweeps again one after the other, then compare")
    shown, status = compare.compare_runs(a, synthetic.with_code(b, "b"), threshold=0.05, loss_tolerance=0.05)
    assert status == compare.EXIT_REGRESSION, "B's code differs: it may have slowed each alike, and the runs say so"


def test_a_sweep_moved_alike_where_some_steps_are_only_undetermined_is_no_confirmed_change():
    """Two idle sweeps of the same code, B 10% slower in each configuration: one step significant, the others
    undetermined. Each is consistent with the suite's move, so none is a control and no REGRESSION stands.
    The other way round, the faster steps that are not significant hold the move too.
    A configuration that stayed put while another slowed is a control: that REGRESSION stands."""
    noisy = synthetic.Noise(run_sd=0.04, step_sd=0.01, bimodal=0.0)
    rng = np.random.default_rng(4)
    a = synthetic.with_code(synthetic.sweep(synthetic.grid(), 4, noisy, rng), "a")
    b = synthetic.with_code(
        synthetic.sweep({key: level * 1.10 for key, level in synthetic.grid().items()}, 4, noisy, rng), "a"
    )
    shown, status = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    steps = sorted(line.flag for line in shown.items if line.phase == "step")
    assert steps == ["POSSIBLE REGRESSION (moved together)"] + ["UNDETERMINED (slower, not significant)"] * 2, steps
    assert status == compare.EXIT_POSSIBLE, shown.flags
    (said,) = [flag for flag in shown.flags if flag.startswith("MOVED TOGETHER: ")]
    assert "so the lines flagged POSSIBLE REGRESSION, UNDETERMINED may show the machine" in said, said
    shown, status = compare.compare_runs(b, a, threshold=0.05, loss_tolerance=0.05)
    steps = sorted(line.flag for line in shown.items if line.phase == "step")
    assert steps == ["", "", "possible improvement (moved together)"], steps
    assert status == 0 and any(flag.startswith("MOVED TOGETHER: ") for flag in shown.flags), shown.flags
    control = synthetic.with_code(synthetic.sweep(synthetic.grid({"subclass": 1.3}), 4, noisy, rng), "a")
    shown, status = compare.compare_runs(a, control, threshold=0.05, loss_tolerance=0.05)
    flags = {line.configuration: line.flag for line in shown.items if line.phase == "step"}
    assert flags["subclass"] == "REGRESSION" and status == compare.EXIT_REGRESSION, (flags, shown.flags)


def test_a_flat_configuration_whose_wide_interval_holds_the_suites_move_is_still_a_control():
    """tensor 1.3x slower, subclass flat and noisy: the suite's move is mostly tensor's own, so subclass's interval
    holds it. subclass is judged against the others' move alone, which its interval leaves out."""
    noisy = synthetic.Noise(run_sd=0.06, step_sd=0.01, bimodal=0.0)
    rng = np.random.default_rng(3)
    levels = {("tensor", "contiguous"): 50.0, ("subclass", "contiguous"): 50.0}
    a = synthetic.with_code(synthetic.sweep(levels, 4, noisy, rng), "a")
    b = synthetic.with_code(synthetic.sweep(levels | {("tensor", "contiguous"): 65.0}, 4, noisy, rng), "a")
    shown, status = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    flags = {line.configuration: line.flag for line in shown.items if line.phase == "step"}
    assert flags["tensor"] == "REGRESSION" and status == compare.EXIT_REGRESSION, (flags, shown.flags)


def test_the_machines_price_is_no_setting_that_parts_or_differs_configurations():
    rng = np.random.default_rng(18)
    a = [dataclasses.replace(r, fields=r.fields | {"cost.per_hour": 2.5}) for r in sweep(synthetic.grid(), rng)]
    b = sweep(synthetic.grid(), rng)
    shown, status = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    assert status == 0 and "they differ in: nothing" in shown.above, shown.above
    assert len(configurations(a + b)) == len(configurations(a)), "a price is not what a run measures"


def test_compare_names_the_code_each_sweep_measured_where_it_differs(tmp_path):
    """Each sweep's launch copied mypkg into its folder's snapshot: the files that differ are named."""
    rng = np.random.default_rng(4)
    # a job's bytecode lands in the snapshot it imports from: it is no change of the code
    copies = {"A": {"models.py": "x = 1\n"}, "B": {"models.py": "x = 2\n", "extra.py": "", "__pycache__/x.pyc": "b"}}
    for sweep_dir, files in copies.items():
        package = tmp_path / sweep_dir / ".code" / "0123456789ab" / "mypkg"
        package.mkdir(parents=True)
        for name, text in {"__init__.py": "", **files}.items():
            (package / name).parent.mkdir(exist_ok=True)
            (package / name).write_text(text)

    def measured(runs: list, commit: str, dirty: bool, files: str) -> list:
        tested = {"repository": "/src/mypkg", "commit": commit * 40, "dirty": dirty}
        code = {"mypkg": files * 12, "perfsweep": "c" * 12}
        return [
            dataclasses.replace(r, status=dataclasses.replace(r.status, code_under_test=tested, code=code))
            for r in runs
        ]

    a = measured(sweep(synthetic.grid(), rng), "1", False, "a")
    b = measured(sweep(synthetic.grid(), rng), "2", True, "b")
    shown, status = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    assert status == 0
    assert "their code differs in: commit under test 11111111 -> 22222222+dirty, mypkg files aaaaaaaa -> bbbbbbbb" in (
        shown.above
    )
    named = compare.compare_runs(a, b, 0.05, 0.05, names=(tmp_path / "A", tmp_path / "B"))[0].above
    said = "mypkg files aaaaaaaa -> bbbbbbbb (mypkg/models.py changed, mypkg/extra.py added)"
    assert any(line.endswith(said) for line in named), named


def test_compare_names_a_neighbour_that_took_the_cpus_of_one_sweeps_runs():
    """A's runs had their CPUs to themselves; another process took 40% of B's: the same code measured beside a
    neighbour. Each run's window is long enough for /proc/stat's ticks to tell."""
    rng = np.random.default_rng(5)

    a, b = synthetic.beside(sweep(synthetic.grid(), rng), 0.0), synthetic.beside(sweep(synthetic.grid(), rng), 0.8)
    shown, _ = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    assert "their hosts differ in: others' CPU A 0%, B 40% (medians over their runs)" in shown.above, shown.above
    same, _ = compare.compare_runs(a, a, threshold=0.05, loss_tolerance=0.05)
    assert not [line for line in same.above if "hosts differ" in line]
    assert not [line for line in same.above if line.startswith("what else ran")], "their windows told it"
    short = synthetic.beside(sweep(synthetic.grid(), rng), 0.0, block_s=0.005)
    blind, _ = compare.compare_runs(short, short, threshold=0.05, loss_tolerance=0.05)
    said = "what else ran on their hosts is unknown: their windows (0.05-0.05 s) are too short for /proc/stat to tell"
    assert any(line.startswith(said) for line in blind.above), blind.above


def test_an_undetermined_slowdown_beside_a_shared_host_is_decided_by_runs_alone_not_more_runs():
    """B's subclass is a third slower, two runs a side spread far apart: UNDETERMINED. Where B's runs shared their
    host and A's did not, more runs beside that load would measure it again: compare says to run B alone."""
    noisy = synthetic.Noise(run_sd=0.3, step_sd=0.01, bimodal=0.0)
    rng = np.random.default_rng(8)
    a = synthetic.beside(synthetic.sweep(synthetic.grid(), 2, noisy, rng), 0.0)
    b = synthetic.sweep(synthetic.grid({"subclass": 1.33}), 2, noisy, rng)
    for busy, shared in ((0.0, False), (0.8, True)):
        shown, _ = compare.compare_runs(a, synthetic.beside(b, busy), threshold=0.05, loss_tolerance=0.05)
        assert any(line.flag.startswith("UNDETERMINED") for line in shown.items), "the premise: undetermined"
        found = [flag for flag in shown.flags if flag.startswith("SHARED HOST: their hosts differ (above)")]
        assert bool(found) == shared, shown.flags
        assert bool([line for line in shown.above if line.startswith("their hosts differ in: others' CPU")]) == shared
        legend = "runs with their hosts to themselves decide it: SHARED HOST" if shared else "more runs decide it"
        assert f"UNDETERMINED ({legend};" in shown.notes[1]
        head = comment.comment(shown, 0.05).splitlines()[0]
        assert head.endswith(f", undetermined ({legend})"), head
        if shared:
            assert "run B's sweep again with its host to itself, then compare" in found[0], found[0]


def test_compare_counts_the_runs_a_neighbour_took_where_it_came_and_went():
    """A neighbour that took 40% of 4 of B's 9 runs leaves B's median run without one: compare counts the runs."""
    rng = np.random.default_rng(5)
    a, b = synthetic.beside(sweep(synthetic.grid(), rng), 0.0), sweep(synthetic.grid(), rng)
    b = synthetic.beside(b[:4], 0.8) + synthetic.beside(b[4:], 0.0)
    shown, _ = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    said = "their hosts differ in: others' CPU above 10% in A 0 of 9, B 4 of 9 (up to 40%) runs whose windows told it"
    assert said in shown.above, shown.above
    for alike in (b, synthetic.beside(b, 0.8)):  # the same neighbour on both sides: some runs, or every run
        same, _ = compare.compare_runs(alike, alike, threshold=0.05, loss_tolerance=0.05)
        assert not [line for line in same.above if "hosts differ" in line], same.above


def test_compare_names_a_neighbour_on_one_side_where_the_other_s_windows_told_nothing():
    """A's windows were too short for /proc/stat's ticks, or A's host was not recorded; B ran beside a neighbour.
    The neighbour may be the whole difference, so compare names it, and A's share as unknown."""
    rng = np.random.default_rng(5)
    short, b = synthetic.beside(sweep(synthetic.grid(), rng), 0.0, block_s=0.01), sweep(synthetic.grid(), rng)
    b = synthetic.beside(b, 0.8)
    unknown = "unknown (no window of theirs was long enough for /proc/stat to tell)"
    unread = HostState.of([HostBlock(wall_s=1.0, cpus=2, process_cpu_s=1.2)] * 10)  # no /proc/stat to read
    without = [dataclasses.replace(r, summary=dataclasses.replace(r.summary, host=unread)) for r in short]
    cases = [(short, unknown), (without, "unknown (/proc/stat did not give it)")]
    cases.append((sweep(synthetic.grid(), rng), "unknown (their host was not recorded)"))
    for a, why in cases:
        shown, _ = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
        said = f"their hosts differ in: others' CPU A {why}, B 40% (medians over their runs)"
        assert said in shown.above, shown.above
    quiet, _ = compare.compare_runs(short, synthetic.beside(b, 0.0), threshold=0.05, loss_tolerance=0.05)
    assert not [line for line in quiet.above if "hosts differ" in line], "nothing seen on either side: nothing said"


def at_precision(runs: list, name: str, autocast: str | None) -> list:
    """The runs as runs of precision `name`, an axis, with the autocast dtype its option sets."""
    return [
        dataclasses.replace(
            run,
            axes={**run.axes, "precision": name},
            axis_order=["precision", *run.axis_order],
            named_axes=["precision", *run.named_axes],
            fields=run.fields | {"precision.name": name, "precision.autocast_dtype": autocast},
        )
        for run in runs
    ]


def test_a_setting_that_follows_from_an_axis_is_named_by_the_axis_alone():
    """precision.autocast_dtype follows from precision: neither a difference of its own nor an override to type."""
    rng = np.random.default_rng(3)
    a = at_precision(sweep(synthetic.grid(), rng), "fp32", None)
    b = at_precision(sweep(synthetic.grid(), rng), "amp_bf16", "bfloat16")
    shown, _ = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    assert "they differ in: precision.name 'fp32' -> 'amp_bf16'" in shown.above
    both = a + at_precision(sweep(synthetic.grid(), rng), "amp_bf16", "bfloat16")
    shown, status = compare.compare_runs(both, a, threshold=0.05, loss_tolerance=0.05)
    (unmatched,) = (flag for flag in shown.flags if flag.startswith("UNMATCHED"))
    assert unmatched.endswith("to match them, launch B with precision=amp_bf16"), unmatched
    assert status & compare.EXIT_UNMATCHED


def trained_to(runs: list, loss: float, **fields) -> list:
    """The runs with `fields` added and a final loss of `loss`, from 2.3."""
    return [
        dataclasses.replace(
            run, fields=run.fields | fields, summary=dataclasses.replace(run.summary, loss_first=2.3, loss_last=loss)
        )
        for run in runs
    ]


def test_sweeps_that_measured_for_other_lengths_say_so_and_hold_no_loss_to_another_length():
    """Steps are not matched on, so that the sweeps are still compared; a loss after 10 more steps is no change."""
    rng = np.random.default_rng(4)
    a = trained_to(sweep(synthetic.grid(), rng), 2.26, steps=20, warmup_steps=1)
    b = trained_to(sweep(synthetic.grid(), rng), 2.33, steps=10, warmup_steps=1)
    shown, status = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    assert "they differ in: nothing" in shown.above
    assert "they differ in how long they measured: steps 20 -> 10; final losses are compared only" in said(shown)
    assert not status & compare.EXIT_LOSS and not [line for line in shown.items if line.flag]
    shown, status = compare.compare_runs(a, trained_to(b, 2.33, steps=20), threshold=0.05, loss_tolerance=0.05)
    lost = [line.flag for line in shown.items if line.flag]
    assert status & compare.EXIT_LOSS and len(lost) == 3, lost
    assert all(flag.startswith("LOSS CHANGED in 3 of 3 run pairs") for flag in lost)
    assert "how long they measured" not in said(shown)
    # B's folder holds two launches, of 10 steps and 50: each matched configuration is read on its own
    subclass = [run for run in b if run.axes["input_type"] == "subclass"]
    others = [run for run in b if run.axes["input_type"] != "subclass"]
    mixed = [*trained_to(others, 2.33, steps=10), *trained_to(subclass, 2.33, steps=50)]
    shown, _ = compare.compare_runs(a, mixed, threshold=0.05, loss_tolerance=0.05)
    assert "they differ in how long they measured: steps 20 -> 10, steps 20 -> 50;" in said(shown), said(shown)


def test_no_launch_is_advised_where_its_grid_would_run_combinations_neither_sweep_had():
    """B lacks subclass in channels_last and tensorbase in contiguous: a grid of both would launch four, two of
    which neither sweep ran. Where A ran three of them and B the fourth, the grid is advised."""
    rng = np.random.default_rng(5)
    shared = {("tensor", "contiguous"): 50.0}
    only_a = {("subclass", "channels_last"): 55.0, ("tensorbase", "contiguous"): 52.0}
    a, b = sweep(shared | only_a, rng), sweep(shared, rng)
    shown, _ = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    (unmatched,) = (flag for flag in shown.flags if flag.startswith("UNMATCHED"))
    assert unmatched.endswith("without a match in B: subclass channels_last, tensorbase contiguous"), unmatched
    grid = {(t, m): 50.0 for t in ("subclass", "tensorbase") for m in ("contiguous", "channels_last")}
    one_of_it = sweep({("subclass", "contiguous"): 50.0}, rng)
    shown, _ = compare.compare_runs(sweep(grid, rng), one_of_it, threshold=0.05, loss_tolerance=0.05)
    (unmatched,) = (flag for flag in shown.flags if flag.startswith("UNMATCHED"))
    said = "to match them, launch B with input_type=subclass,tensorbase memory_format=channels_last,contiguous"
    assert unmatched.endswith(said), "the grid's fourth combination is B's own"
    one = {("subclass", "channels_last"): 55.0}
    shown, _ = compare.compare_runs(sweep(shared | one, rng), b, threshold=0.05, loss_tolerance=0.05)
    (unmatched,) = (flag for flag in shown.flags if flag.startswith("UNMATCHED"))
    assert unmatched.endswith("to match them, launch B with input_type=subclass memory_format=channels_last"), unmatched


def test_an_undetermined_slowdown_on_a_machine_that_ran_slower_in_b_is_named_as_the_machines_maybe():
    """More runs on that machine would not decide it: it is named beside the machine's line, as B's slowdowns are."""
    rng = np.random.default_rng(0)
    noisy = synthetic.Noise(run_sd=0.15)  # three runs a side this spread leave a 1.3x slowdown undecided

    def timed_sweep(levels: dict, ms: float) -> list:
        runs = [dataclasses.replace(r, fields=r.fields | NET) for r in synthetic.sweep(levels, 3, noisy, rng)]
        return synthetic.timed(runs, ms, rng)

    a = timed_sweep(synthetic.grid(), 0.67)
    b = timed_sweep(synthetic.grid({"tensor": 1.3, "subclass": 1.3, "tensorbase": 1.3}), 0.9)
    shown, status = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    assert status == 0 and all(row[-1].startswith("UNDETERMINED") for row in shown.rows if row[1] == "step")
    said = "MACHINE MOVED: the machine ran slower in B (above), so the lines flagged UNDETERMINED may show the machine"
    assert any(flag.startswith(said) for flag in shown.flags), shown.flags


def test_compare_says_where_the_machine_ran_slower_and_nothing_where_it_did_not_move():
    """The same code on a machine 1.35 times slower: the step's slowdown is named beside the machine's, and its
    flags say the machine may explain them: possible, not confirmed (exit 3)."""
    rng = np.random.default_rng(8)
    a = synthetic.timed(sweep(synthetic.grid(), rng), 0.67, rng)
    slower = synthetic.timed(
        sweep(synthetic.grid({"tensor": 1.35, "subclass": 1.35, "tensorbase": 1.35}), rng), 0.9, rng
    )
    shown, status = compare.compare_runs(a, slower, threshold=0.05, loss_tolerance=0.05)
    assert status == compare.EXIT_POSSIBLE
    assert {row[-1] for row in shown.rows if row[1] == "step"} == {"POSSIBLE REGRESSION (machine moved)"}, shown.rows
    (line,) = [line for line in shown.above if "fixed workload" in line]
    workload = "matmul 384x384 float32 on cpu, 2 threads, fastest of 21"
    assert line.startswith(f"the machine ran slower in B: a fixed workload ({workload})"), line
    # B's speed-up over A, as the table's: below 1 where B is slower
    figures = (
        r"took 0\.6\d+ -> 0\.[89]\d+ ms, 0\.7\d*x \[0\.7\d*, 0\.7\d*\] as fast \(geometric means of 9 / 9 processes\)"
    )
    assert re.search(figures, line), line
    assert all(row[-3].startswith("0.7") for row in shown.rows if row[1] == "step"), shown.rows
    said = "MACHINE MOVED: the machine ran slower in B (above), so the lines flagged POSSIBLE REGRESSION may show the"
    assert any(flag.startswith(said) for flag in shown.flags), shown.flags
    shown, _ = compare.compare_runs(slower, a, threshold=0.05, loss_tolerance=0.05)
    assert {row[-1] for row in shown.rows if row[1] == "step"} == {"possible improvement (machine moved)"}
    assert any(flag.startswith("MACHINE MOVED: the machine ran slower in A (above), so the lines flagged possible "
                               "improvement") for flag in shown.flags), shown.flags  # fmt: skip
    halved = synthetic.timed(sweep(synthetic.grid({"subclass": 2.0}), rng), 0.70, rng)  # the machine 4% slower
    shown, status = compare.compare_runs(a, halved, threshold=0.05, loss_tolerance=0.05)
    assert status == compare.EXIT_REGRESSION and any("machine ran slower in B" in line for line in shown.above)
    assert not any(flag.startswith("MACHINE MOVED") for flag in shown.flags), "a slowdown of 2x is not the machine's 4%"
    for ms in (0.67, 0.67 * 1.02):  # the same, and 2% apart: within 3% of 1, though its interval excludes 1
        same = synthetic.timed(sweep(synthetic.grid(), rng), ms, rng)
        shown, _ = compare.compare_runs(a, same, threshold=0.05, loss_tolerance=0.05)
        assert not any("fixed workload" in line for line in shown.above), f"{ms}: it did not move beyond 3%"
    older = [
        dataclasses.replace(
            r, summary=dataclasses.replace(r.summary, reference={**r.summary.reference, "workload": "x"})
        )
        for r in synthetic.timed(sweep(synthetic.grid(), rng), 0.67, rng) * 3
    ]
    shown, _ = compare.compare_runs(older + a, slower, threshold=0.05, loss_tolerance=0.05)
    assert any(line.startswith("the machine ran slower in B") for line in shown.above), "the workload both timed"
    shown, _ = compare.compare_runs(sweep(synthetic.grid(), rng), slower, threshold=0.05, loss_tolerance=0.05)
    assert not any("fixed workload" in line for line in shown.above), "runs of before it was timed: nothing said"


def test_a_slowdown_beyond_the_threshold_that_the_runs_cannot_confirm_is_named_and_fails_a_strict_gate():
    """Three runs a side on a machine whose processes spread by a factor of two: B's step, twice as slow, is not
    significant. The gate must not pass what the runs could not rule out."""
    rng = np.random.default_rng(3)
    noisy = synthetic.Noise(run_sd=0.7, bimodal=0.0)
    a, b = (synthetic.sweep({("tensor", "contiguous"): level}, 3, noisy, rng) for level in (50.0, 100.0))
    shown, status = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    step = next(line for line in shown.items if line.phase == "step")
    assert step.speedup.value < 0.95 and step.speedup.low < 1 < step.speedup.high, "a slowdown, not significant"
    assert (step.flag, status) == ("UNDETERMINED (slower, not significant)", 0), "named; by default not failed"
    strict = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05, fail_undetermined=True)[1]
    assert strict == compare.EXIT_UNDETERMINED
    posted = comment.comment(shown, 0.05)
    assert "0 slower, 0 faster, 0 same, 1 undetermined" in posted
    assert (
        "a slowdown not ruled out in tensor-contiguous-replicate=0: its interval reaches 0.022x "
        "(B's speed-up 0.34x [0.022, 5.1])" in posted
    )


def test_a_step_unchanged_at_its_estimate_but_whose_interval_reaches_a_large_slowdown_is_never_passed_as_nothing():
    """Nothing changed, three runs a side, processes spread by a factor of two: B's step is 1.0x [0.3, 3.0].
    The runs rule out neither a threefold slowdown nor a threefold speed-up, so the gate must not call it nothing."""
    rng = np.random.default_rng(7)
    noisy = synthetic.Noise(run_sd=0.7, bimodal=0.0)
    a, b = (synthetic.sweep({("tensor", "contiguous"): 50.0}, 3, noisy, rng) for _ in range(2))
    shown, status = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    step = next(line for line in shown.items if line.phase == "step")
    assert str(step.speedup) == "1.0x [0.3, 3.0]", "the premise: within the threshold at its estimate"
    assert shown.notes[0].startswith("0 slower, 0 faster, 0 same, 1 undetermined, of 1 configuration "), "in text too"
    assert (step.flag, status) == ("UNDETERMINED (its interval reaches 0.309x)", 0), "named; by default not failed"
    strict = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05, fail_undetermined=True)[1]
    assert strict == compare.EXIT_UNDETERMINED
    head = comment.comment(shown, 0.05).splitlines()[0]
    said = "in tensor-contiguous-replicate=0: its interval reaches 0.309x (B's speed-up 1.0x [0.3, 3.0]), undetermined"
    assert head.endswith(f"{said} (more runs decide it)"), head
    steady = [synthetic.sweep({("tensor", "contiguous"): 50.0}, 3, STEADY, rng) for _ in range(2)]
    shown, status = compare.compare_runs(*steady, threshold=0.05, loss_tolerance=0.05, fail_undetermined=True)
    step = next(line for line in shown.items if line.phase == "step")
    assert step.speedup.low >= slow_end(0.05), "the premise: an interval within the threshold"
    assert (step.flag, status) == ("", 0), "an interval within it passes"


@pytest.mark.parametrize(
    ("speedup", "significant", "said"),
    [
        (Speedup(0.97, 0.93, 0.995, ACROSS, (3, 3), 0.01), True, "UNDETERMINED (its interval reaches 0.93x)"),
        (Speedup(0.97, 0.955, 0.985, ACROSS, (3, 3), 0.01), True, ""),
        (Speedup(0.97, 0.951, 0.985, ACROSS, (3, 3), 0.01), True, "UNDETERMINED (its interval reaches 0.951x)"),
        (Speedup(1.2, 0.9, 1.6, ACROSS, (3, 3), 0.2), False, "UNDETERMINED (its interval reaches 0.9x)"),
        (Speedup(1.0, 0.94, 1.06, WITHIN_RUN, (1, 1), 0.9), False, "UNDETERMINED (1 run, its interval reaches 0.94x)"),
        (Speedup(math.nan, math.nan, math.nan, ACROSS, (3, 3)), False, "UNDETERMINED (no time to compare)"),
        (Speedup(0.8, 0.75, 0.85, ACROSS, (3, 3), 0.001), True, "REGRESSION"),
        (Speedup(1.3, 1.2, 1.4, ACROSS, (3, 3), 0.001), True, "improvement"),
    ],
    ids=[
        "slower-within-reaching",
        "slower-within",
        "time-past-5-percent",
        "faster-reaching",
        "one-run",
        "no-time",
        "regression",
        "faster",
    ],
)
def test_a_step_is_flagged_undetermined_exactly_where_its_runs_leave_a_slowdown_beyond_the_threshold_open(
    speedup, significant, said
):
    """A small confirmed slowdown whose interval reaches past 5% is not ruled out; one within it is."""
    assert verdict.flag(speedup, significant, 0.05) == said


def test_only_changes_posts_no_comment_for_an_undetermined_line_unless_the_gate_fails_on_it(tmp_path):
    rng = np.random.default_rng(7)
    noisy = synthetic.Noise(run_sd=0.7, bimodal=0.0)
    a, b = (
        synthetic.write(synthetic.sweep({("tensor", "contiguous"): 50.0}, 3, noisy, rng), tmp_path / side)
        for side in "ab"
    )
    quiet = launch_here("compare", str(a), str(b), "--format", "markdown", "--only-changes")
    assert (quiet.returncode, quiet.stdout) == (0, ""), "an undetermined line is no change"
    strict = launch_here("compare", str(a), str(b), "--format", "markdown", "--only-changes", "--fail-undetermined")
    assert strict.returncode == compare.EXIT_UNDETERMINED and "undetermined" in strict.stdout, strict.stdout


def test_configurations_that_b_planned_and_did_not_finish_are_run_by_its_resume(tmp_path):
    """B's budget left its subclass runs unstarted: launching B again with input_type=subclass would plan another
    grid, where its resume runs what it planned."""
    rng = np.random.default_rng(6)
    a = synthetic.write(sweep(synthetic.grid(), rng), tmp_path / "a")
    b = synthetic.write(sweep(synthetic.grid(), rng), tmp_path / "b")
    for run in load_sweep(b):
        if run.axes["input_type"] == "subclass":
            lifecycle.stop(run.path, records.BUDGET, "the launch's budget ran out before this run's process started")
    shown, status = compare.compare(a, b, threshold=0.05, loss_tolerance=0.05)
    assert status & compare.EXIT_UNMATCHED
    assert shown.flags == [
        "UNMATCHED: 1 of A's 3 configurations without a match in B: subclass; B planned subclass and has no done run "
        f"of them (pending): `perfsweep resume {b}` runs them"
    ]


def test_configurations_that_b_is_still_running_are_followed_not_resumed(tmp_path):
    """A Slurm sweep launched without waiting: its runs still running are its jobs', which a resume leaves alone."""
    rng = np.random.default_rng(6)
    a = synthetic.write(sweep(synthetic.grid(), rng), tmp_path / "a")
    b = synthetic.write(sweep(synthetic.grid(), rng), tmp_path / "b")
    for run in load_sweep(b):
        if run.axes["input_type"] == "subclass":
            lifecycle.start(run.path, job_id="123_0")
    shown, _ = compare.compare(a, b, threshold=0.05, loss_tolerance=0.05)
    assert shown.flags[0].endswith(f"has no done run of them (running): `perfsweep status {b}` follows them")


def test_runs_not_done_in_a_compared_configuration_are_named_not_passed_over():
    """A run that failed in B may be what B's code does: its configuration is compared on its done runs, and said."""
    rng = np.random.default_rng(11)
    a, b = sweep(synthetic.grid(), rng), sweep(synthetic.grid(), rng)
    failed = next(r for r in b if r.axes["input_type"] == "subclass")
    failed = dataclasses.replace(failed, status=dataclasses.replace(failed.status, state="failed"))
    b_done = [r for r in b if r is not failed and r.run_id != failed.run_id]
    shown, status = compare.compare_runs(
        a, b_done, threshold=0.05, loss_tolerance=0.05, names=(Path("A"), Path("B")), unfinished=([], [failed])
    )
    (line,) = [flag for flag in shown.flags if compare.NOT_DONE in flag]
    assert line == (
        "FAILED IN B: B has 1 run not done in configurations compared on their done runs: subclass (failed); "
        "`perfsweep resume B` runs them"
    ), line
    assert not any(flag.startswith("A has") for flag in shown.flags)


def test_sweeps_whose_steps_do_different_work_are_said_to_and_given_the_per_sample_factor():
    """Batch 16 against batch 8: B's steps take about half as long, and do half the work."""
    rng = np.random.default_rng(12)
    a = sweep(synthetic.grid(), rng, **{"model.batch_size": 16})
    b = sweep(synthetic.grid(), rng, **{"model.batch_size": 8})
    shown, _ = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    assert (
        "their steps do different work (model.batch_size 16 -> 8): each speed-up is per step, not of the same work; "
        "per sample it is 0.5 times the speed-up (B's 8 samples a step over A's 16)"
    ) in shown.above, shown.above
    same, _ = compare.compare_runs(a, sweep(synthetic.grid(), rng, **{"model.batch_size": 16}), 0.05, 0.05)
    assert not any(line.startswith("their steps do different work") for line in same.above)


def test_a_regression_that_the_runs_without_a_neighbour_show_too_is_not_put_down_to_the_load():
    """B's subclass is a third slower, four tight runs a side. A neighbour took some of B's runs: the hosts differ.
    Where B's other runs show the slowdown too, the load seen does not explain it, and compare says so.
    Where the neighbour took all but one of B's runs, what is left cannot tell, and the load may explain it.
    Where all of A's runs had the neighbour, B's slowdown was never put down to it: nothing is said of quiet runs."""
    noisy = synthetic.Noise(run_sd=0.01, step_sd=0.01, bimodal=0.0)
    rng = np.random.default_rng(9)
    a = synthetic.sweep(synthetic.grid(), 4, noisy, rng)
    b = synthetic.sweep(synthetic.grid({"subclass": 1.33}), 4, noisy, rng)

    def took(runs: list, loaded: int) -> list:
        return [synthetic.beside([run], 0.8 if run.fields["replicate"] < loaded else 0.0)[0] for run in runs]

    b_quiet = took(b, 0)
    for side_a, side_b, said in (
        (took(a, 0), took(b, 1), "subclass step (A 4, B 3 runs)"),
        (took(a, 0), took(b, 3), None),
        (took(a, 4), b_quiet, None),
    ):
        shown, status = compare.compare_runs(side_a, side_b, threshold=0.05, loss_tolerance=0.05)
        confirmed = said is not None or side_b is b_quiet
        assert status == (compare.EXIT_REGRESSION if confirmed else compare.EXIT_POSSIBLE), said
        assert any("hosts differ" in line for line in shown.above)
        found = [flag for flag in shown.flags if flag.startswith("SHARED HOST")]
        quiet = [flag for flag in found if "the runs that no neighbour or steal took" in flag]
        if said:
            assert found == quiet and said in quiet[0] and "the load seen does not explain them" in quiet[0], found
        else:
            assert not quiet, found
    suspect = compare.compare_runs(took(a, 0), took(b, 3), threshold=0.05, loss_tolerance=0.05)[0].flags
    assert any("so the lines flagged POSSIBLE REGRESSION may show that load" in flag for flag in suspect), suspect


def test_a_training_step_and_an_inference_step_are_never_matched_as_one_configuration():
    """Their steps are other work: one times a backward pass and an optimizer, the other neither."""
    rng = np.random.default_rng(13)
    a = sweep(synthetic.grid(), rng, **{"workload.name": "train_step"})
    b = sweep(synthetic.grid(), rng, **{"workload.name": "infer_step"})
    shown, status = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    assert status == compare.EXIT_NOTHING_COMPARED and not shown.items
    assert "what parts them: workload.name: A 'train_step'; B 'infer_step'" in shown.flags, shown.flags
    own = [dataclasses.replace(r, fields=r.fields | {"workload._target_": "lib.OldStep"}) for r in a]
    new = [dataclasses.replace(r, fields=r.fields | {"workload._target_": "lib.NewStep"}) for r in b]
    shown, _ = compare.compare_runs(own, new, threshold=0.05, loss_tolerance=0.05)
    assert shown.items, "two versions of a step of the user's own are compared"
    for side_a, side_b in ((own, b), (a, new)):  # a step of the user's own is not perfsweep's registered one
        shown, status = compare.compare_runs(side_a, side_b, threshold=0.05, loss_tolerance=0.05)
        assert status == compare.EXIT_NOTHING_COMPARED and not shown.items
        assert not [f for f in shown.flags if "to match them" in f], "another step is no launch that matches"


def test_no_launch_is_advised_whose_runs_would_cross_a_value_with_a_configuration_no_sweep_ran():
    """A at size 10; B at 100, and subclass alone at 4194304 (its loop would never end there)."""
    rng = np.random.default_rng(16)
    both = {("tensor", "contiguous"): 50.0, ("subclass", "contiguous"): 60.0}
    a = sweep(both, rng, **{"workload.size": 10})
    b = sweep(both, rng, **{"workload.size": 100})
    b += sweep({("subclass", "contiguous"): 90.0}, rng, **{"workload.size": 4194304})
    shown, status = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    assert status == compare.EXIT_NOTHING_COMPARED, shown.flags
    hows = [f for f in shown.flags if f.startswith("to match them")]
    assert hows == ["to match them, launch B with workload.size=10"], "not A at 4194304: its tensor run never ran there"


def test_a_launch_advised_into_a_wider_sweep_is_narrowed_to_the_configurations_it_lacks():
    """A: tensor and subclass, contiguous; B: tensor, contiguous and channels_last. Two versions of a step after."""
    rng = np.random.default_rng(17)
    a = sweep({("tensor", "contiguous"): 50.0, ("subclass", "contiguous"): 60.0}, rng)
    b = sweep({("tensor", "contiguous"): 50.0, ("tensor", "channels_last"): 55.0}, rng)
    shown, _ = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    advised = " ".join(f for f in shown.flags if "to match them" in f)
    assert "launch B with input_type=subclass memory_format=contiguous" in advised, shown.flags
    assert "launch A with input_type=tensor memory_format=channels_last" in advised, shown.flags
    v1 = [
        run
        for size in (10, 100)
        for run in sweep(
            {("tensor", "contiguous"): 50.0}, rng, **{"workload._target_": "lib.V1", "workload.size": size}
        )
    ]
    v2 = sweep({("tensor", "contiguous"): 50.0}, rng, **{"workload._target_": "lib.V2", "workload.size": 10})
    shown, _ = compare.compare_runs(v1, v2, threshold=0.05, loss_tolerance=0.05)
    assert any(f.endswith("to match them, launch B with workload.size=100") for f in shown.flags), shown.flags


def test_no_launch_is_advised_that_sets_a_key_of_an_option_the_sweeps_differ_in():
    """A DDP sweep over 1 and 2 ranks against one without ranks: world_size=2 alone would need dist=ddp in B."""
    rng = np.random.default_rng(15)
    ranks = {"dist.name": "ddp", "dist.world_size": 1}
    a = sweep(synthetic.grid(), rng, **ranks) + sweep(synthetic.grid(), rng, **ranks | {"dist.world_size": 2})
    b = sweep(synthetic.grid(), rng, **{"dist.name": "none", "dist.world_size": 1})
    shown, status = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    assert status & compare.EXIT_UNMATCHED and shown.items, shown.flags
    unmatched = next(f for f in shown.flags if f.startswith("UNMATCHED"))
    assert "to match them" not in unmatched, unmatched


def test_a_phase_that_one_sweep_does_not_time_is_left_out_and_the_step_compared():
    """Two versions of a step of the user's own, one of which splits its step into other phases."""
    rng = np.random.default_rng(14)
    a, b = sweep(synthetic.grid(), rng), sweep(synthetic.grid(), rng)
    b = [
        dataclasses.replace(
            r,
            summary=dataclasses.replace(r.summary, phases=("forward",)),
            measured={k: v for k, v in r.measured.items() if k in ("step_ms", "forward_ms")},
        )
        for r in b
    ]
    shown, _ = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    assert {line.phase for line in shown.items} == {"forward", "step"}


def test_the_threshold_bounds_the_slower_side_s_time_as_compare_says_a_slowdown():
    """B 1.45 times slower, its time 1.08-1.96 times A's: at 50%, a slowdown past 1.5x is not ruled out."""
    slower = Speedup(1 / 1.45, 0.51, 0.93, ACROSS, (5, 5), 0.01)
    assert verdict.flag(slower, True, 0.5) == "UNDETERMINED (its interval reaches 0.51x)"
    assert verdict.flag(Speedup(1 / 1.6, 0.55, 0.7, ACROSS, (5, 5), 0.001), True, 0.5) == "REGRESSION", "1.6x slower"
    assert verdict.flag(Speedup(1.45, 1.3, 1.6, ACROSS, (5, 5), 0.001), True, 0.5) == "", "1.45x faster is within"


def test_a_change_flagged_from_one_run_on_a_side_is_counted_as_possible():
    """B stopped after its first round: its one run a configuration flags changes no process spread confirms."""
    rng = np.random.default_rng(21)
    a = sweep(synthetic.grid(), rng)
    b = [run for run in sweep(synthetic.grid({"subclass": 1.3}), rng) if run.fields["replicate"] == 0]
    shown, status = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    assert status == compare.EXIT_POSSIBLE, said(shown)
    assert shown.notes[0].startswith("1 slower (1 of them possible: one run on a side), 0 faster, "), shown.notes[0]


def test_the_machine_both_sides_ran_on_is_named_in_what_they_share_and_not_where_one_is_unknown():
    """A at threads=2 and B at threads=4 on one CPU: the threads are configuration, and the machine line leaves them."""
    rng = np.random.default_rng(22)
    env = {"cpu": "AMD EPYC", "packages": {"torch": "2.14.1"}, "torch_threads": 2}
    a = [dataclasses.replace(r, env=env, fields=r.fields | {"threads": 2}) for r in sweep(synthetic.grid(), rng)]
    b = [dataclasses.replace(r, env=env | {"torch_threads": 4}, fields=r.fields | {"threads": 4}) for r in a]
    shown, _ = compare.compare_runs(a, b, threshold=0.05, loss_tolerance=0.05)
    (line,) = [line for line in shown.above if line.startswith("both measured on: ")]
    assert line == "both measured on: CPU AMD EPYC, torch 2.14.1", shown.above
    unknown = [dataclasses.replace(r, env=None) for r in b]
    shown, _ = compare.compare_runs(a, unknown, threshold=0.05, loss_tolerance=0.05)
    assert not any(line.startswith("both measured on: ") for line in shown.above), shown.above


def test_a_model_that_is_no_option_of_perfsweep_is_matched_by_its_name():
    """compare's advice launched B with model=mobilenetv3_small_100: no conf/model option of that name exists."""
    from types import SimpleNamespace

    timm = [SimpleNamespace(fields={"model.name": n}) for n in ("resnet18", "mobilenetv3_small_100")]
    assert compare.override("model.name", timm, timm) == "model.name=mobilenetv3_small_100,resnet18"
    options = [SimpleNamespace(fields={"model.name": n}) for n in ("resnet18", "resnet50")]
    assert compare.override("model.name", options, options) == "model=resnet18,resnet50"
    own = [SimpleNamespace(fields={"model.name": "Net", "model._target_": "mylib.Net"})]
    assert compare.override("model.name", own, own) == "model=mylib.Net"
