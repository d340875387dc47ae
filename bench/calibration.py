"""The noise floor of this machine, and the variance split.

    python -m perfsweep.bench.calibration [--trials 10] [--skip-launches] [OVERRIDE ...]

It runs real A/A trials through perfsweep's own views.
There are four experiments.
Each is launched as a user launches: `python launch.py ...`, W&B offline.
Each runs the default sweep, narrowed or widened by the overrides.

- labels: one configuration, in 6 x trials processes of one sweep.
  It is the default sweep's first: a plain Tensor, contiguous.
  Each block of 6 consecutive runs is a trial.
  Its runs are split into two labels by turns (A B A B A B).
  The views compare the two labels as two configurations.
  They use the table's `vs` (paired by round) and `compare` (A's runs against B's).
  They also check a published "same" claim.
  Nothing differs but the label, so every verdict word is a false positive.
- paired: one configuration as both sides (label=a, label=b) of each process, pairing=auto.
  Each block of 3 processes is a trial, its sides the labels A and B.
  The views compare them as above: the interval is across processes, each one ratio.
- launches: the default sweep, launched twice per trial and compared (`python launch.py compare A B`).
  The exit status 1 (a regression) is a false positive.
  The exit status 3 (possible, from one run a side) is counted apart.
- threads: the same sweep at threads=2 (A) and threads=1 (B), compared once.
  It is a real slowdown, which the gate must still call a REGRESSION.

It prints the observed rates and the variance split of the labels' configuration.
The split is between and within processes, with the lag-1 autocorrelation.
It writes them, with the machine and settings, to results/<machine>-torch<version>/bench/calibration.{txt,json}.
There is one file per machine kind.
"""

import dataclasses
import json
import math
import re
import statistics
import tempfile
from pathlib import Path

import numpy as np

from perfsweep import records
from perfsweep.analysis.groups import configurations
from perfsweep.analysis.statistics import variance
from perfsweep.analysis.views import compare, published, table
from perfsweep.bench import command
from perfsweep.commands.noise import A_A_PAIRED, ONE

ROOT = Path(__file__).resolve().parent.parent
PER_TRIAL = 6  # runs of the labels experiment per trial: three per label


def relabel(run: records.RunRecord, label: str, replicate: int) -> records.RunRecord:
    """The run, relabelled: its baseline axis has the value `label`, in round `replicate`.

    The baseline axis is input_type, impl or the like.
    """
    axis = run.baseline.axis
    key = run.fields.get(f"workload.axes.{axis}", f"{axis}.name")
    return dataclasses.replace(
        run,
        axes={**run.axes, axis: label, "replicate": str(replicate)},
        fields={**run.fields, key: label, "replicate": replicate},
        baseline=dataclasses.replace(run.baseline, value="A"),
        baselines={axis: "A"},
    )


def labelled(runs: list[records.RunRecord]) -> list[list[records.RunRecord]]:
    """Each trial's runs, labelled A and B by turns.

    Each label's runs are numbered by round.
    """
    ordered = sorted(runs, key=lambda r: int(r.axes["replicate"]))
    blocks = [ordered[i : i + PER_TRIAL] for i in range(0, len(ordered) - PER_TRIAL + 1, PER_TRIAL)]
    return [[relabel(run, "AB"[i % 2], i // 2) for i, run in enumerate(block)] for block in blocks]


def paired_trials(runs: list[records.RunRecord]) -> list[list[records.RunRecord]]:
    """Each trial's runs of the paired A/A sweep: 3 processes, each of one a side and one b side, as A and B.

    Each process is a round; its two sides keep it, numbered within their trial.
    """
    per = PER_TRIAL // 2
    rounds = sorted({int(r.axes["replicate"]) for r in runs})
    trials = [rounds[i : i + per] for i in range(0, len(rounds) - per + 1, per)]
    return [
        [
            relabel(run, run.axes["label"].upper(), trial.index(int(run.axes["replicate"])))
            for run in runs
            if int(run.axes["replicate"]) in trial
        ]
        for trial in trials
    ]


def ratio_spread(runs: list[records.RunRecord]) -> float:
    """The standard deviation over processes of the log ratio of their two sides' median step times."""
    by_round: dict[int, dict[str, float]] = {}
    for run in runs:
        by_round.setdefault(int(run.axes["replicate"]), {})[run.axes["label"]] = float(np.median(run.step_ms()))
    logs = [math.log(sides["b"] / sides["a"]) for sides in by_round.values() if len(sides) == 2]
    return statistics.stdev(logs) if len(logs) > 1 else math.nan


def false_positives(trials: list[list[records.RunRecord]]) -> dict:
    """The trials whose table `vs` excludes 1.00x, whose `compare` flags a REGRESSION, whose "same" is contradicted."""
    excluded = exits = contradicted = 0
    for trial in trials:
        shown = table.table_view("labels", trial)
        column = next(i for i, h in enumerate(shown.header) if h.startswith("vs "))
        low, high = (float(x) for x in re.search(r"\[([-\d.]+), ([-\d.]+)\]", shown.rows[1][column]).groups())
        excluded += low > 1 or high < 1
        axis = trial[0].baseline.axis
        a = [r for r in trial if r.axes[axis] == "A"]
        b = [relabel(r, "A", int(r.axes["replicate"])) for r in trial if r.axes[axis] == "B"]
        # Timing verdicts only: the labels' runs have different seeds, so their losses differ by design.
        shown, _ = compare.compare_runs(a, b, 0.05, 0.05)
        exits += any(line.flag == "REGRESSION" for line in shown.items)
        same = {"label": "A vs B", "of": {axis: "B"}, "over": {axis: "A"}, "direction": "same"}
        contradicted += published.compare(trial, same)[-1] == "contradicted"
    counts = {"vs_excludes_1": excluded, "compare_regression": exits, "same_contradicted": contradicted}
    return {"trials": len(trials), **counts}


def labels_experiment(runs: list[records.RunRecord]) -> dict:
    """The false positives over the labels' trials, and the configuration's variance split."""
    (config,) = configurations(runs)
    split = variance.split(config.sample())
    return {
        **false_positives(labelled(runs)),
        "runs": len(runs),
        "split": dataclasses.asdict(split) | {"effective_steps": split.effective_steps} if split else None,
    }


def main(argv: list[str] | None = None) -> None:
    parser = command.parser("calibration", __doc__)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--skip-launches", action="store_true", help="the labels experiment alone")
    parser.add_argument("--out", type=Path, default=ROOT / "results", help="where the machine's folder goes")
    parser.add_argument("overrides", nargs="*", help="overrides of the default sweep (model.image_size=64...)")
    args = parser.parse_args(argv)
    one = [*args.overrides, *ONE, f"repeats={PER_TRIAL * args.trials}"]
    paired = [*one[:-1], *A_A_PAIRED, f"repeats={PER_TRIAL // 2 * args.trials}"]
    labels, sides, default = (len(command.checked(o).runs) for o in (one, paired, args.overrides))
    for threads in ("threads=1", "threads=2"):
        command.checked([*args.overrides, threads])
    if args.dry_run:
        launches = f"; {2 * args.trials} + 2 launches of the default sweep's {default} runs"
        launches = "" if args.skip_launches else launches
        command.would(f"the labels experiment's {labels} runs in one sweep; the paired one's {sides}{launches}")
        return
    results: dict = {"overrides": args.overrides, "trials": args.trials}
    with tempfile.TemporaryDirectory(prefix="perfsweep-calibration-") as tmp:
        runs_dir = Path(tmp)
        sweep, wall = command.launched(one, runs_dir, "labels")
        kind, results["machine"] = command.machine(sweep)
        done = [r for r in records.load_sweep(sweep) if r.state == records.DONE]
        results["labels"] = labels_experiment(done) | {"wall_s": wall}
        sweep, wall = command.launched(paired, runs_dir, "paired")
        done = [r for r in records.load_sweep(sweep) if r.state == records.DONE]
        spread = {"ratio_spread": ratio_spread(done), "runs": len(done), "wall_s": wall}
        results["paired"] = false_positives(paired_trials(done)) | spread
        if not args.skip_launches:
            statuses, walls = [], []
            for trial in range(args.trials):
                pair = [command.launched(args.overrides, runs_dir, f"{side}{trial}") for side in "ab"]
                walls += [w for _, w in pair]
                statuses.append(compare.timing(compare.compare(pair[0][0], pair[1][0], 0.05, 0.05)[1]))
            results["launches"] = {
                "trials": args.trials,
                "compare_exit_1": statuses.count(compare.EXIT_REGRESSION),
                "compare_exit_3": statuses.count(compare.EXIT_POSSIBLE),
                "launch_wall_s": sorted(walls),
            }
            two, _ = command.launched([*args.overrides, "threads=2"], runs_dir, "threads2")
            one_thread, _ = command.launched([*args.overrides, "threads=1"], runs_dir, "threads1")
            shown, status = compare.compare(two, one_thread, 0.05, 0.05)
            results["threads"] = {"compare_exit": status, "flags": [line.flag for line in shown.items if line.flag]}
            results["threads"]["suite"] = next(n for n in shown.notes if n.startswith("suite:"))
    report = render(results)
    print(report)
    out = args.out / kind / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "calibration.txt").write_text(report + "\n")
    (out / "calibration.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"written: {out / 'calibration.txt'}, {out / 'calibration.json'}")


def render(results: dict) -> str:
    m, labels = results["machine"], results["labels"]
    lines = [
        f"perfsweep calibration: {m['device']}, torch {m.get('torch')}, default sweep {' '.join(results['overrides'])}",
        f"labels: {labels['runs']} runs of one configuration in one sweep, {labels['trials']} trials of 3 runs per "
        f"label, interleaved ({labels['wall_s']:.0f} s)",
        f"  table vs excludes 1.00x: {labels['vs_excludes_1']} of {labels['trials']}",
        f"  compare flags a REGRESSION: {labels['compare_regression']} of {labels['trials']} (timing alone: the "
        "labels' runs have different seeds, so their final losses differ by design)",
        f"  a 'same' claim contradicted: {labels['same_contradicted']} of {labels['trials']}",
    ]
    if split := labels["split"]:
        lines.append(
            f"  variance split of log step time: between processes {split['between']:.1%}, within a run "
            f"{split['within']:.1%}, lag-1 autocorrelation {split['rho']:.2f}, "
            f"{split['effective_steps']:.0f} effective of {split['steps']} steps per run"
        )
    if paired := results.get("paired"):
        lines += [
            f"paired: one configuration as both sides (label=a,b) of each process, pairing=auto: {paired['runs']} "
            f"runs, {paired['trials']} trials of 3 processes ({paired['wall_s']:.0f} s)",
            f"  table vs excludes 1.00x: {paired['vs_excludes_1']} of {paired['trials']}",
            f"  compare flags a REGRESSION: {paired['compare_regression']} of {paired['trials']}",
            f"  a 'same' claim contradicted: {paired['same_contradicted']} of {paired['trials']}",
            f"  spread of a process's log ratio b/a: {paired['ratio_spread']:.1%} (against the runs' between "
            "processes above)",
        ]
    if launches := results.get("launches"):
        lines += [
            f"launches: the default sweep launched twice and compared, {launches['trials']} trials",
            f"  compare flags a REGRESSION: {launches['compare_exit_1']} of {launches['trials']}; a POSSIBLE "
            f"REGRESSION (one run a side): {launches['compare_exit_3']}",
            f"  a launch's wall time: median {statistics.median(launches['launch_wall_s']):.1f} s",
        ]
    if threads := results.get("threads"):
        lines += [
            f"threads: threads=2 (A) against threads=1 (B): compare exits {threads['compare_exit']}, flags "
            f"{', '.join(threads['flags']) or 'none'}",
            f"  {threads['suite']}",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
