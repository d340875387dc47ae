"""repeats=auto: the schedule of looks, what a look decides and says, and a launch that stops by itself."""

import dataclasses
import io
import re
import shutil
import subprocess
import types
from pathlib import Path

import numpy as np
import pytest

from perfsweep import records
from perfsweep.analysis import groups
from perfsweep.analysis.statistics import rounds
from perfsweep.analysis.statistics.speedup import ACROSS, Speedup
from perfsweep.analysis.views import table
from perfsweep.commands.auto import RoundClock
from perfsweep.commands.until_decided import launch_until_decided
from perfsweep.launcher import progress
from perfsweep.sweeps.plan import build_plan
from tests import golden, synthetic
from tests.helpers import SMALL, launch_here

FUNCTION = ["workload=pairwise_sum_prod", "workload.impl=loop,broadcast", "workload.size=10", "steps=5"]


def test_the_schedule_looks_every_second_round_from_the_third_up_to_the_cap():
    assert rounds.schedule(10) == [3, 5, 7, 9, 10]
    assert rounds.schedule(3) == [3] and rounds.schedule(2) == [2] and rounds.schedule(6) == [3, 5, 6]
    assert rounds.look_level(5) == pytest.approx(0.99)


def test_a_look_decides_an_effect_and_a_narrow_no_effect_and_says_why_the_rest_is_not():
    rng = np.random.default_rng(0)
    steady = synthetic.Noise(run_sd=0.002, step_sd=0.005, rho=0.0, warmup=0.0, bimodal=0.0, steps=50)
    found = rounds.look(synthetic.sweep(synthetic.grid({"subclass": 1.3}), 5, steady, rng), 5, 0.02, 3)
    assert found.met and [c.label for c in found.comparisons] == ["subclass vs tensor", "tensorbase vs tensor"]
    assert [found.rule.word(c.speedup) for c in found.comparisons] == ["slower", "same"]
    noisy = synthetic.Noise(run_sd=0.08, step_sd=0.05, rho=0.3, steps=10)
    wide = rounds.look(synthetic.sweep(synthetic.grid(), 3, noisy, rng), 3, 0.02, 5)
    assert not wide.met and wide.undecided[0][1].endswith("from it (the same needs -+2%)")
    (line, *undecided) = rounds.summary(wide, 18, 1.5, "cap reached: 10 runs per configuration (auto.max_runs)")
    assert line.startswith("repeats=auto stopped after 3 rounds: 18 runs done in 1.5 min; cap reached: 10 runs per")
    assert undecided[0].startswith("  undecided: subclass vs tensor: ") and "includes 1.00x" in undecided[0]


def launched(sweep_dir, *launches: list[str]) -> None:
    """A sweep.json whose launches had these words, each planning no runs."""
    said = [{"at": records.now(), "argv": argv, "runs": []} for argv in launches]
    records.write_json(sweep_dir / records.SWEEP, {"uid": "x", "runs": {}, "launches": said})


def vs_cells(shown) -> dict[str, str]:
    """Each input type's vs cell in a table of the default grid, but the baseline's."""
    vs, kind = shown.header.index("vs tensor"), shown.header.index("input_type")
    return {row[kind]: row[vs] for row in shown.rows if row[kind] != "tensor"}


def test_the_table_of_a_sweep_that_repeats_auto_decided_says_what_its_looks_said(tmp_path):
    """The table keeps the level of the looks and states it; its words are the last look's decisions.
    At 95%, the table would call slower what the looks left undetermined."""
    rng = np.random.default_rng(17)
    noise = synthetic.Noise(run_sd=0.01, step_sd=0.01, rho=0.1, warmup=0.0, bimodal=0.0, steps=20)
    runs = synthetic.sweep(synthetic.grid({"subclass": 1.04}), 3, noise, rng)
    last = rounds.look(runs, 3, 0.02, len(rounds.schedule(10)))
    assert [c.label for c, _ in last.undecided] == ["subclass vs tensor"]
    cells = {c.label.split()[0]: f"{c.speedup} {last.rule.word(c.speedup)}" for c in last.comparisons}
    assert cells == {"subclass": "0.96x [0.91, 1.02] undetermined", "tensorbase": "0.998x [0.985, 1.011] same"}
    launched(tmp_path, ["repeats=auto"], ["resume", str(tmp_path)])
    shown = table.table_view(tmp_path, runs)
    assert vs_cells(shown) == cells
    level = "repeats=auto's level: the 5% error spent over its 5 looks"
    assert f"[99% CI across runs, each run one process; {level}]" in shown.above[1]
    assert shown.notes[0].startswith("vs words: slower or faster where the 99% interval excludes 1.00x")
    data = [dict(zip(shown.fields, row, strict=True)) for row in shown.records]
    assert {row["vs tensor level"] for row in data if row["vs tensor low"] is not None} == {0.99}, "a CSV row says it"
    launched(tmp_path, ["repeats=auto"], ["repeats=3"])
    assert vs_cells(table.table_view(tmp_path, runs))["subclass"] == "0.96x [0.94, 0.99] slower"


def test_a_launch_again_with_a_larger_cap_is_judged_at_the_level_of_its_own_looks(tmp_path):
    """Its earlier rounds were planned under auto.max_runs=5 (2 looks); its own, under 7 (3 looks)."""
    runs = synthetic.sweep(synthetic.grid(), 5, synthetic.Noise(), np.random.default_rng(2))
    runs = [dataclasses.replace(r, fields=r.fields | {"auto.max_runs": 5 if r.fields["replicate"] < 3 else 7})
            for r in runs]  # fmt: skip
    first = [r.name for r in runs if r.fields["replicate"] < 3]
    said = [{"at": records.now(), "argv": ["repeats=auto", f"auto.max_runs={cap}"], "runs": names}
            for cap, names in ((5, first), (7, [r.name for r in runs]))]  # fmt: skip
    records.write_json(tmp_path / records.SWEEP, {"uid": "x", "runs": {}, "launches": said})
    assert rounds.rule_of(tmp_path, runs).looks == len(rounds.schedule(7)) == 3


def test_one_run_a_side_is_never_decided():
    rng = np.random.default_rng(1)
    found = rounds.look(synthetic.sweep(synthetic.grid({"subclass": 2.0}), 1, synthetic.Noise(), rng), 1, 0.02, 1)
    assert not found.met and {why for _, why in found.undecided} == {"one run on a side"}


def test_a_configuration_that_no_run_has_measured_leaves_the_look_unmet():
    """Each comparison of the done runs is decided; a configuration queued in a job that cannot start is not: the
    question about it has no answer yet. A configuration whose runs failed has one: its failure."""
    steady = synthetic.Noise(run_sd=0.01, step_sd=0.01, bimodal=0.0)
    runs = synthetic.sweep(synthetic.grid({"subclass": 1.3}), 5, steady, np.random.default_rng(1))
    queued = [
        dataclasses.replace(r, status=dataclasses.replace(r.status, state=records.PENDING))
        if r.axes["input_type"] == "tensorbase"
        else r
        for r in runs
    ]
    done = [r for r in queued if r.state == records.DONE]
    assert groups.unmeasured(queued) == ["tensorbase"]
    assert rounds.look(done, 5, 0.02, 3).met, "the premise: the done runs' one comparison is decided"
    found = rounds.look(done, 5, 0.02, 3, tuple(groups.unmeasured(queued)))
    assert not found.met
    assert found.line().endswith("; 1 configuration without a done run yet, compared with nothing: tensorbase")
    failed = [dataclasses.replace(r, status=dataclasses.replace(r.status, state=records.FAILED)) for r in runs]
    assert groups.unmeasured(failed) == []


class Clock:
    """time.monotonic, moved on by hand."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


def test_one_count_goes_over_every_look_up_to_the_cap_with_the_time_left(monkeypatch):
    """Two looks of a cap of 6 runs: 2 runs, then 2 more, each ending 10 s after the one before."""
    clock, out = Clock(), io.StringIO()
    monkeypatch.setattr(progress, "time", clock)
    counted = progress.UpToCap(out)
    for left, names in ((6, "ab"), (4, "cd")):
        counted.expect(left)
        for name in names:
            run = types.SimpleNamespace(name=name)
            counted.running(run)
            clock.now += 10
            counted.ended(run, "done", "step 1 ms")
    assert [line.split("  (")[0] for line in out.getvalue().splitlines()] == [
        "[1/6 at most] start  a",
        "[1/6 at most] done   a  step 1 ms",
        "[2/6 at most] start  b",
        "[2/6 at most] done   b  step 1 ms",
        "[3/6 at most] start  c",
        "[3/6 at most] done   c  step 1 ms",
        "[4/6 at most] start  d",
        "[4/6 at most] done   d  step 1 ms",
    ]
    ends = [line.split(")")[-1] for line in out.getvalue().splitlines() if " done " in line]
    assert ends == ["  at most ~50 s left", "  at most ~40 s left", "  at most ~30 s left", "  at most ~20 s left"]


def test_the_time_left_is_what_auto_max_minutes_leaves_or_the_look_in_flight_if_longer(monkeypatch):
    """A cap of 60 runs at 10 s a run is 10 minutes.

    auto.max_minutes ends the looks 35 s from the start.
    """
    clock, out = Clock(), io.StringIO()
    monkeypatch.setattr(progress, "time", clock)
    counted = progress.UpToCap(out, ends_at=35.0)
    counted.expect(60, look=6)  # the first look's 6 runs end whatever the time
    for name in "abcdef":
        run = types.SimpleNamespace(name=name)
        counted.running(run)
        clock.now += 10
        counted.ended(run, "done", "step 1 ms")
    ends = [line[line.index("  at most") :] for line in out.getvalue().splitlines() if " done " in line]
    looks = ["~50 s", "~40 s", "~30 s", "~20 s", "~10 s", "~0 s"]  # the cap passed mid-look: no look starts after it
    assert ends == [f"  at most {left} left (auto.max_minutes)" for left in looks], ends


def test_the_pace_counts_a_process_s_sides_that_end_together_from_the_first_of_their_lines(monkeypatch):
    """A first look of 18 runs, three processes of 6 sides; the first process ends 20 s in, its 6 sides at once.

    Its first line at a pace of 20 s a run would say ~5.7 min, past auto.max_minutes' 3 minutes.
    """
    clock, out = Clock(), io.StringIO()
    monkeypatch.setattr(progress, "time", clock)
    counted = progress.UpToCap(out, ends_at=180.0)
    counted.expect(60, look=18)
    sides = [types.SimpleNamespace(name=name) for name in "abcdef"]
    for run in sides:
        counted.running(run)
    clock.now += 20
    counted.polled(len(sides))
    for run in sides:
        counted.ended(run, "done", "step 1 ms")
    ends = {line[line.index("  at most") :] for line in out.getvalue().splitlines() if " done " in line}
    assert ends == {"  at most ~2.7 min left (auto.max_minutes)"}, ends


def _rounds(stdout: str) -> str:
    """What a launch says of its rounds, with the minutes they took and a round's seconds as placeholders."""
    said = "\n".join(line for line in stdout.splitlines() if line.startswith(("repeats=auto", "  ")))
    said = re.sub(r"at \d+(\.\d+)? s a round", "at <seconds> s a round", said)
    return re.sub(r"done in \d+(\.\d+)? min", "done in <minutes> min", said)


@pytest.fixture(scope="module")
def decided(tmp_path_factory) -> tuple[list[str], subprocess.CompletedProcess, Path]:
    """A repeats=auto sweep that decides at its first look, after 3 rounds of its 2 configurations: its launch's
    words, what the launch said, and its folder. The tests launch it again and resume it in that folder; each
    leaves its 6 runs done."""
    runs = tmp_path_factory.mktemp("auto")
    # 20 steps of the broadcast's 9 us each: with 5, a run's median moved with its steps' 50% spread
    steady = [*(o for o in FUNCTION if not o.startswith("steps=")), "steps=20"]
    args = [*steady, "repeats=auto", "auto.max_runs=5", "tracker.mode=disabled", f"runs_dir={runs}"]
    first = launch_here(*args)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    return args, first, runs / "default"


@pytest.mark.slow
def test_repeats_auto_stops_by_itself_and_a_launch_again_goes_on_from_its_rounds(decided):
    args, first, _ = decided
    golden.says("repeats=auto: the rounds of a sweep that decides", _rounds(first.stdout))
    assert first.stdout.count("] done ") == 6 and "[6/10 at most] done " in first.stdout
    again = launch_here(*args)
    assert "6 runs were already done and were not run again" in again.stdout and "] done " not in again.stdout
    assert "repeats=auto stopped after 3 rounds" in again.stdout


@pytest.mark.slow
def test_an_auto_sweep_launched_again_with_another_cap_is_refused_before_anything_runs(decided):
    """Its looks spent their error at the levels its cap of 5 set: a cap raised until it decides decides wrongly."""
    args, _, sweep = decided
    raised = launch_here(*(a for a in args if not a.startswith("auto.max_runs=")), "auto.max_runs=9")
    said = f"{sweep} holds looks of repeats=auto with auto.max_runs=5 auto.half_width=0.02: another cap or margin "
    assert raised.returncode == 2 and said in raised.stderr, raised.stderr
    assert "] start " not in raised.stdout


@pytest.mark.slow
def test_resume_of_an_auto_sweep_runs_what_is_missing_then_goes_on_with_its_rounds(decided):
    _, _, sweep = decided
    (lost,) = [
        p for p in sweep.iterdir() if p.name.startswith("pairwise_sum_prod-broadcast") and "replicate=2" in p.name
    ]
    shutil.rmtree(lost)
    resumed = launch_here("resume", str(sweep))
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert resumed.stdout.count("] done ") == 1 and f"done   {lost.name}" in resumed.stdout
    assert "repeats=auto stopped after 3 rounds: 6 runs done in" in resumed.stdout


def test_repeats_auto_is_refused_where_the_launch_would_not_follow_its_rounds(tmp_path):
    refused = launch_here(*FUNCTION, "repeats=auto", "launcher=slurm", f"runs_dir={tmp_path}")
    assert refused.returncode == 2
    golden.says("repeats=auto on Slurm", refused.stderr, {tmp_path: "<runs>"})
    in_process = launch_here(*FUNCTION, "repeats=auto", "launcher=debug", f"runs_dir={tmp_path}")
    assert in_process.returncode == 2
    golden.says("repeats=auto in the launcher's process", in_process.stderr, {tmp_path: "<runs>"})
    assert not (tmp_path / "default").exists()


@pytest.mark.parametrize("swept", ["threads=1,2", "model.batch_size=4,8"])
def test_repeats_auto_is_refused_where_the_sweep_makes_no_comparison_to_decide(tmp_path, swept):
    """Settings, not axes: thread counts and batch sizes have no baseline, so no look could decide anything."""
    at_one = ["input_type=tensor", "memory_format=contiguous", "steps=3", "tracker.mode=disabled"]
    refused = launch_here(*at_one, swept, "repeats=auto", f"runs_dir={tmp_path}")
    assert refused.returncode == 2 and "this sweep makes none" in refused.stderr, refused.stdout + refused.stderr
    assert "Traceback" not in refused.stderr and not list(tmp_path.iterdir())


@pytest.mark.parametrize("setting", ["auto.max_runs=1", "auto.half_width=0", "auto.max_minutes=-1"])
def test_bad_auto_settings_are_refused_before_anything_runs(tmp_path, setting):
    refused = launch_here(*FUNCTION, "repeats=auto", setting, f"runs_dir={tmp_path}", "launcher=debug")
    assert refused.returncode == 2 and not (tmp_path / "default").exists()
    golden.says(f"refused: repeats=auto {setting}", refused.stderr, {tmp_path: "<runs>"})


@pytest.mark.slow
def test_the_wall_time_cap_stops_the_rounds_after_the_look_that_passed_it(tmp_path, monkeypatch):
    """A comparison that never decides (a look made to say so) and a cap already passed at the first look: the
    sweep stops there, 3 rounds run of the 5 the run cap allows, and says which cap stopped it."""
    undecided = rounds.Comparison("broadcast vs loop", Speedup(1.0, 0.8, 1.25, ACROSS, (3, 3)))
    rule = rounds.Rule(0.975, 0.02, 2)
    monkeypatch.setattr(rounds, "look", lambda runs, k, half, looks, unmeasured: rounds.Look(k, rule, [undecided]))
    args = [*FUNCTION, "repeats=auto", "auto.max_runs=5", "auto.max_minutes=0.0001", "tracker.mode=disabled"]
    result = launch_here(*args, f"runs_dir={tmp_path}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.count("] done ") == 6
    golden.says("repeats=auto: a sweep stopped by its wall-time cap", _rounds(result.stdout))


def test_the_wall_time_cap_is_planned_from_what_a_round_has_cost():
    """Rounds of 10 s under a 60 s cap: after 3 rounds (30 s) a look of 2 more would end at 50 s, and starts; after
    5 (50 s) a look of 2 more would end at 70 s, and does not start, though the cap has not passed."""
    clock = RoundClock(60.0, now=0.0)
    assert not clock.would_pass(3, now=0.0), "before any round, nothing is known to cost"
    clock.look_starts(0.0)
    clock.look_ends(3, now=30.0)
    assert clock.round_s == pytest.approx(10.0) and not clock.would_pass(2, now=30.0)
    clock.look_starts(30.0)
    clock.look_ends(2, now=50.0)
    assert clock.would_pass(2, now=50.0), "the next look's 2 rounds would end at 70 s"


def test_a_look_of_rounds_done_before_costs_no_round_its_time():
    """A resumed sweep's first look finds its rounds done and runs none: its second of checking counts as time
    spent, but not as a round, so the 21 s spent are over the 2 rounds the next look ran."""
    clock = RoundClock(60.0, now=0.0)
    clock.look_starts(0.0)
    clock.look_ends(0, now=1.0)
    clock.look_starts(1.0)
    clock.look_ends(2, now=21.0)
    assert clock.round_s == pytest.approx(10.5), "21 s over the 2 rounds run"


@pytest.mark.slow
def test_repeats_auto_turns_a_typed_budget_off_and_says_so(tmp_path):
    """Each look is a launch: a budget of its own would leave rounds unrun, which the looks would count as run."""
    args = [*FUNCTION, "repeats=auto", "auto.max_runs=3", "launcher.budget_s=0.001", "tracker.mode=disabled"]
    result = launch_here(*args, f"runs_dir={tmp_path}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    said = "repeats=auto stops at auto.max_minutes (30 min), between its looks: launcher.budget_s=0.001 (the command"
    assert said in result.stderr
    assert all(run.state == "done" for run in records.load_sweep(tmp_path / "default")), "every round ran"


class EditedAfterTheFirstLook:
    """Two looks at the user's model, a run each; its file is edited once the first look has run."""

    def __init__(self, source: Path, runs_dir: Path):
        self.source, self.runs_dir = source, runs_dir

    def plans(self, runs: int) -> list:
        words = ["model=mymodel.Net", "input_type=tensor", "memory_format=contiguous", *SMALL, "launcher=debug"]
        # a run of its own each look, in a folder of its own as a bisect's point has
        return [build_plan([*words, f"seed={runs}", f"runs_dir={self.runs_dir}", f"sweep_name=look{runs}"])]

    def looked(self, plan, runs: int) -> None:
        self.source.write_text(self.source.read_text() + "# edited while the command ran\n")

    def decided(self) -> bool:
        return False

    def out_of_time(self) -> bool:
        return False


def test_every_look_runs_the_code_the_first_look_took(tmp_path, user_module, capsys):
    """An edit between looks would otherwise split one verdict between two versions of the code.
    A bisect measures its points in folders of their own, a call of the loop each: they share the first's code."""
    source = user_module("mymodel", "import torch\n\n\nclass Net(torch.nn.Linear):\n    def __init__(self, **kw):\n"
                                    "        super().__init__(3 * 32 * 32, 10)\n\n    def forward(self, x):\n"
                                    "        return super().forward(x.flatten(1))\n")  # fmt: skip
    design = EditedAfterTheFirstLook(source, tmp_path / "runs")
    assert launch_until_decided(design, [1, 2], ["repeats=auto"]) == 0
    pinned: dict = {}
    for look in (3, 4):
        assert launch_until_decided(design, [look], ["bisect"], pinned=pinned) == 0
    folders = [tmp_path / "runs" / f"look{look}" for look in (1, 2, 3, 4)]
    measured = [run.status.code["mymodel"] for folder in folders for run in records.load_sweep(folder)]
    assert len(measured) == 4 and measured[0] == measured[1] and measured[2] == measured[3], measured
    assert "measured other code" not in capsys.readouterr().err
