"""The history bench: a sweep per commit of a generated repository, then `history` over them.

    python -m perfsweep.bench.history [--out OUT] [--commits 16] [--planted 11] [--factor 1.2] [--repeats 3]
                                      [--sleep-ms MS] [--bisect]

It generates steplib's repository (bench/gitrepo.py) in OUT/repo (OUT: runs/history-bench, a new folder).
For each commit, oldest first, it checks the commit out and launches a sweep of steplib's step from there.
So each sweep's runs record that commit as the code under test.
It then runs `perfsweep history` over OUT/runs, writing its plot and page into OUT/history.
With --bisect, `perfsweep bisect --git` then searches the same commits, from the history's runs (--from).
It prints the history, the bisect, and the wall time of each stage.
"""

import json
import subprocess
import sys
import time
from pathlib import Path

from perfsweep.bench.command import ROOT, parser, would
from perfsweep.bench.gitrepo import TARGET, generate

LAUNCH = [sys.executable, str(ROOT / "launch.py")]
SWEEP = [TARGET, "threads=1", "tracker.mode=disabled"]  # steplib's step reads no model, input or precision


def launch_per_commit(repo: Path, hashes: list[str], runs: Path, repeats: int, steps: int) -> float:
    """Launch a sweep at each commit, from the repository checked out there; the seconds it took."""
    started = time.perf_counter()
    for index, commit in enumerate(hashes, 1):
        subprocess.run(["git", "-C", str(repo), "checkout", "-q", commit], check=True)
        words = [*SWEEP, f"repeats={repeats}", f"steps={steps}", f"runs_dir={runs}", f"sweep_name=commit{index:02d}"]
        words.append("launcher.budget_s=null")  # the history counts every round of each commit
        done = subprocess.run([*LAUNCH, *words], cwd=repo, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"the sweep of commit {index} failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - started


def bisect_commits(out: Path, hashes: list[str], steps: int) -> None:
    """`bisect --git` from the first commit to the last, into OUT/bisect; its first looks sized by the history's runs.

    It prints the bisect's own lines, its exit status and wall time, and the runs a side of each point.
    """
    where = [f"steps={steps}", f"runs_dir={out / 'bisect'}"]
    words = ["bisect", "--git", hashes[0], hashes[-1], "--from", str(out / "runs"), *SWEEP, *where]
    started = time.perf_counter()
    done = subprocess.run([*LAUNCH, *words], cwd=out / "repo", capture_output=True, text=True)
    spent = time.perf_counter() - started
    print("\n".join(line for line in done.stdout.splitlines() if line.startswith(("bisect ", "|", "first ", "Runs "))))
    print(done.stderr[-2000:], end="")
    record = json.loads((out / "bisect" / "default" / "bisect.json").read_text())
    runs = ", ".join(f"{p['version'][:8]} {p['runs']}" for p in sorted(record["points"], key=lambda p: p["order"]))
    print(f"bisect exit status: {done.returncode}; {spent:.0f} s; runs a side, in the order measured: {runs}")


def main(argv: list[str] | None = None) -> None:
    found = parser("history", __doc__)
    found.add_argument("--out", type=Path, default=Path("runs/history-bench"), help="a folder that does not exist yet")
    found.add_argument("--commits", type=int, default=16)
    found.add_argument("--planted", type=int, default=11, help="the first slower commit (0: none)")
    found.add_argument("--factor", type=float, default=1.2)
    found.add_argument("--repeats", type=int, default=3)
    found.add_argument("--steps", type=int, default=20)
    found.add_argument("--sleep-ms", type=float, help="a step that waits this long, not one of matrix products")
    found.add_argument("--bisect", action="store_true", help="then bisect --git over the commits, from the history")
    args = found.parse_args(argv)
    if args.dry_run:
        then = ", then a bisect --git over them" if args.bisect else ""
        would(f"{args.commits} sweeps of {args.repeats} runs, {args.steps} steps each, into {args.out}{then}")
        return
    hashes = generate(args.out / "repo", args.commits, args.planted or None, args.factor, args.sleep_ms)
    spent = launch_per_commit(args.out / "repo", hashes, args.out / "runs", args.repeats, args.steps)
    started = time.perf_counter()
    shown = subprocess.run(
        [*LAUNCH, "history", str(args.out / "runs"), "--out", str(args.out / "history")],
        capture_output=True,
        text=True,
    )
    print(shown.stdout + shown.stderr)
    print(f"history exit status: {shown.returncode}")
    print(f"{args.commits} sweeps in {spent:.1f} s; history in {time.perf_counter() - started:.1f} s")
    if args.bisect:
        bisect_commits(args.out, hashes, args.steps)


if __name__ == "__main__":
    main()
