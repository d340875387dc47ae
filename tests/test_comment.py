"""compare --format markdown: a pull request's comment, from synthetic sweeps of known truth."""

import dataclasses
import json
from pathlib import Path

import numpy as np

from perfsweep import records
from perfsweep.analysis.render import View
from perfsweep.analysis.statistics import verdict
from perfsweep.analysis.statistics.speedup import ACROSS, Speedup
from perfsweep.analysis.views import comment, compare
from perfsweep.analysis.views.compare import Line
from perfsweep.records import Ops, load_sweep
from perfsweep.records.ops import OperatorTimes
from tests import golden, synthetic
from tests.helpers import launch_here

STEADY = synthetic.Noise(run_sd=0.01, step_sd=0.01, bimodal=0.0)


def sweeps(tmp_path, slowdown: dict[str, float] | None = None, seed: int = 0) -> tuple[str, str]:
    """A and B, three runs of each input type; B's input types slowed by `slowdown`."""
    rng = np.random.default_rng(seed)
    a = synthetic.write(synthetic.sweep(synthetic.grid(), 3, STEADY, rng), tmp_path / "a")
    b = synthetic.write(synthetic.sweep(synthetic.grid(slowdown), 3, STEADY, rng), tmp_path / "b")
    return str(a), str(b)


def test_a_planted_slowdown_heads_the_comment_and_the_rest_are_folded(tmp_path):
    a, b = sweeps(tmp_path, {"subclass": 1.25})
    shown = launch_here("compare", a, b, "--format", "markdown")
    assert shown.returncode == compare.EXIT_REGRESSION, shown.stdout + shown.stderr
    golden.says("compare --format markdown: a planted slowdown", shown.stdout, {tmp_path: "<tmp>"})
    head, counts, table, *_ = shown.stdout.split("\n\n")
    assert head.startswith("### perfsweep: 1.2") and head.endswith("x slower in subclass (REGRESSION)")
    assert counts.startswith("**1 slower**, 0 faster, ")
    assert (
        "of 3 configurations compared by their step (slower or faster: flagged, beyond -+5% and significant" in counts
    )
    assert [row.split("|")[1].strip() for row in table.splitlines()[2:]] == ["subclass"]
    assert shown.stdout.count("<details>") == 1 and "2 without a flagged change" in shown.stdout


def test_the_comment_names_its_sweeps_with_home_as_a_tilde(tmp_path, monkeypatch):
    """A comment is posted where others read it: A and B are named, the user's home folder is not."""
    a, b = sweeps(tmp_path, {"subclass": 1.25})
    monkeypatch.setenv("HOME", str(tmp_path))
    shown = launch_here("compare", a, b, "--format", "markdown").stdout
    assert "A: ~/a (9 done runs)  B: ~/b (9 done runs)" in shown and str(tmp_path) not in shown, shown


def test_no_change_says_so_and_only_changes_prints_nothing(tmp_path):
    a, b = sweeps(tmp_path)
    shown = launch_here("compare", a, b, "--format", "markdown")
    assert shown.returncode == 0 and shown.stdout.startswith("### perfsweep: no change beyond noise\n"), shown.stdout
    quiet = launch_here("compare", a, b, "--format", "markdown", "--only-changes")
    assert (quiet.returncode, quiet.stdout) == (0, "")
    slower = sweeps(tmp_path / "slower", {"subclass": 1.25})
    loud = launch_here("compare", *slower, "--format", "markdown", "--only-changes")
    assert loud.returncode == compare.EXIT_REGRESSION and loud.stdout.startswith("### perfsweep: 1.2")


def test_sweeps_with_nothing_in_common_say_so_and_exit_2(tmp_path):
    """B swept two widths of a constructor argument that A never set: no configuration of A is one of B's."""
    rng = np.random.default_rng(3)
    a = synthetic.write(synthetic.sweep(synthetic.grid(), 3, STEADY, rng), tmp_path / "a")
    widths = [
        dataclasses.replace(run, name=f"{run.name}-{width}", fields=run.fields | {"model.kwargs.d_model": width})
        for width in (256, 512)
        for run in synthetic.sweep(synthetic.grid(), 3, STEADY, rng)
    ]
    b = synthetic.write(widths, tmp_path / "b")
    shown = launch_here("compare", str(a), str(b), "--format", "markdown")
    assert shown.returncode == compare.EXIT_NOTHING_COMPARED, shown.stdout
    assert shown.stdout.startswith("### perfsweep: nothing compared\n") and "model.kwargs.d_model" in shown.stdout


def test_only_changes_needs_the_comment(tmp_path):
    shown = launch_here("compare", *sweeps(tmp_path), "--only-changes")
    assert shown.returncode == 2 and "--only-changes goes with --format markdown" in shown.stderr


def test_a_slowdown_the_runs_cannot_decide_is_said_undetermined_not_no_change(tmp_path):
    """Two runs a side, spread far apart: B is slower by a third, and its interval still holds 1.00x."""
    noisy = synthetic.Noise(run_sd=0.3, step_sd=0.01, bimodal=0.0)
    rng = np.random.default_rng(8)
    a = synthetic.write(synthetic.sweep({("tensor", "contiguous"): 50.0}, 2, noisy, rng), tmp_path / "a")
    b = synthetic.write(synthetic.sweep({("tensor", "contiguous"): 66.0}, 2, noisy, rng), tmp_path / "b")
    shown = launch_here("compare", str(a), str(b), "--format", "markdown")
    head = shown.stdout.splitlines()[0]
    assert head == (
        "### perfsweep: a slowdown not ruled out in tensor-contiguous-replicate=0: its interval reaches 0.126x "
        "(B's speed-up 0.56x [0.12, 2.6]), undetermined (more runs decide it)"
    ), shown.stdout
    assert "0 slower, 0 faster, 0 same, 1 undetermined" in shown.stdout
    said = "\n\nexit status 0 (`perfsweep compare --help` says what each status flags)\n"
    assert shown.returncode == 0 and shown.stdout.endswith(said), "named, not failed"
    strict = launch_here("compare", str(a), str(b), "--format", "markdown", "--fail-undetermined")
    assert strict.returncode == compare.EXIT_UNDETERMINED, "a slowdown the runs cannot rule out fails a strict gate"
    assert strict.stdout.endswith("\n\nexit status 16 (`perfsweep compare --help` says what each status flags)\n"), (
        strict.stdout
    )


def _explained(sweep: str, added: float) -> None:
    """Each run's ops record as explain=true writes it: aten::mm in every run, and in subclass's, aten::alias five
    times a step taking `added` ms."""
    for run in load_sweep(Path(sweep)):
        operators = {"aten::mm": OperatorTimes(1, 1000.0, 0.0)}
        if run.axes["input_type"] == "subclass" and added:
            operators["aten::alias"] = OperatorTimes(5, added * 1e3, 0.0)
        ops = Ops(steps=3, device="cpu", operators=operators, phases={})
        (run.path / records.OPS).write_text(json.dumps(ops.to_json()))


def test_a_slower_configuration_explained_on_both_sides_names_its_largest_operator_differences(tmp_path):
    a, b = sweeps(tmp_path, {"subclass": 1.25})
    _explained(a, 0.0)
    _explained(b, 12.0)
    shown = launch_here("compare", a, b, "--format", "markdown")
    assert shown.returncode == compare.EXIT_REGRESSION, shown.stdout + shown.stderr
    said = "subclass, its largest operator differences (`perfsweep explain`):\n\n"
    said += "- `aten::alias: +12 ms a step (added, calls 0 -> 5, runs apart)`"
    assert said in shown.stdout, shown.stdout
    assert shown.stdout.count("aten::") == 1, "the same operator in both, and the configurations not slower, are left"


def test_the_headline_names_the_undetermined_line_whose_interval_reaches_the_furthest_slowdown():
    """Of two undecided lines, 1.2x [0.9, 1.5] is the larger at its estimate; 1.0x [0.3, 3.0] may be far slower."""
    lines = [
        Line("wide", "step", "3/3", 50.0, 50.0, Speedup(1.0, 0.3, 3.0, ACROSS, (3, 3), 0.9), True),
        Line("faster", "step", "3/3", 60.0, 50.0, Speedup(1.2, 0.9, 1.5, ACROSS, (3, 3), 0.2), True),
    ]
    flagged = [dataclasses.replace(line, flag=verdict.flag(line.speedup, False, 0.05)) for line in lines]
    view = View("Comparison", ["A: a  B: b", "they differ in: nothing"], [], flagged)
    head = comment.comment(view, 0.05).splitlines()[0]
    said = "### perfsweep: a slowdown not ruled out in wide: its interval reaches 0.3x (B's speed-up 1.0x"
    assert head.startswith(said), head


def test_only_changes_posts_nothing_for_a_machine_flag_that_qualifies_no_change():
    """MACHINE MOVED and SHARED HOST say what flagged lines may show: beside undetermined lines alone, no comment."""
    wide = Line("wide", "step", "3/3", 50.0, 50.0, Speedup(1.0, 0.3, 3.0, ACROSS, (3, 3), 0.9), True)
    undetermined = dataclasses.replace(wide, flag=verdict.flag(wide.speedup, False, 0.05))
    machine = f"{compare.MACHINE_MOVED}: the machine ran slower in B (above), so the lines flagged wide may show it"
    host = f"{compare.SHARED_HOST}: their hosts differ (above), so the line flagged wide may show that load"
    quiet = View("Comparison", ["A: a  B: b"], [], [undetermined], flags=[machine, host])
    assert not comment.changed(quiet)
    unmatched = dataclasses.replace(
        quiet, flags=[machine, "1 of B's 4 configurations without a match in A: channels_last"]
    )
    assert comment.changed(unmatched), "a configuration without a match is a change of its own"


def test_only_changes_posts_nothing_for_runs_a_budget_left_and_posts_b_s_failed_runs():
    """A's launch budget left a run not started: the sweeps' steps are the same, and there is nothing to post."""
    rng = np.random.default_rng(3)
    a, b = (synthetic.sweep(synthetic.grid(), 3, STEADY, rng) for _ in range(2))
    left = next(r for r in a if r.axes["input_type"] == "subclass")
    done = [r for r in a if r is not left]
    for state, side in (("pending", "A"), ("failed", "A"), ("pending", "B"), ("failed", "B")):
        run = dataclasses.replace(left, status=dataclasses.replace(left.status, state=state))
        held = ([run], []) if side == "A" else ([], [run])
        names = (Path("runs/failed-a"), Path("runs/failed-b"))  # a folder's name says nothing of its runs
        shown, status = compare.compare_runs(done, b, threshold=0.05, loss_tolerance=0.05, names=names, unfinished=held)
        assert status == 0 and any(compare.NOT_DONE in flag for flag in shown.flags), shown.flags
        assert comment.changed(shown) == ((state, side) == ("failed", "B")), (state, side, shown.flags)


def test_a_configuration_of_a_without_a_match_in_b_is_in_the_headline_that_fails_the_gate(tmp_path):
    """B dropped the tensorbase configuration: the gate fails on it, and the headline says why beside no change."""
    rng = np.random.default_rng(5)
    a = synthetic.write(synthetic.sweep(synthetic.grid(), 3, STEADY, rng), tmp_path / "a")
    kept = [run for run in synthetic.sweep(synthetic.grid(), 3, STEADY, rng) if run.axes["input_type"] != "tensorbase"]
    b = synthetic.write(kept, tmp_path / "b")
    shown = launch_here("compare", str(a), str(b), "--format", "markdown")
    assert shown.returncode & compare.EXIT_UNMATCHED, shown.stdout
    head = shown.stdout.splitlines()[0]
    assert head.endswith("; 1 of A's 3 configurations without a match in B (UNMATCHED)"), head


def test_a_final_loss_that_changed_leads_the_headline_before_a_slowdown_left_undetermined():
    """The loss fails the gate (exit 4 added); the undetermined line does not: the headline says the loss first."""
    wide = Speedup(1.02, 0.66, 1.59, ACROSS, (3, 3))
    flag = verdict.flag(wide, False, 0.05)
    assert flag.startswith("UNDETERMINED"), flag
    moved = [Line("PassThrough", "step", "3/3", 5.2, 5.1, wide, True, flag=flag)]
    said = comment.headline(moved, undetermined=1, losses=True)
    assert said.startswith("a final loss changed; a slowdown not ruled out in PassThrough: "), said
