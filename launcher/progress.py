"""A progress display for a running sweep: a line per run start and end (with where its time went), a live
status line on a terminal, and an end line with the sweep's efficiency (its measured windows / wall time).

A launch counts its own runs: [3/18].
repeats=auto's looks are launches too; they share one count over all of them, up to the cap (`UpToCap`).
"""

import statistics
import sys
import time
from typing import TextIO

from perfsweep.launcher.backends import slurm
from perfsweep.records import PENDING
from perfsweep.records.words import counted
from perfsweep.sweeps.spec import RunSpec

OWN_PARTS = ("startup_s", "warmup_s", "window_s", "records_s")  # a run's time, as it measured it, part by part


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None):
        self.total, self.stream = total, stream or sys.stdout
        self.started, self.finished, self.unstarted = 0, 0, 0
        self.running_since: dict[str, float] = {}
        self.live = self.stream.isatty()
        self.began = time.monotonic()
        self.timings: list[dict[str, float]] = []
        # Runs never started for one reason, after the first: the reason, how many, the count of the last
        self.alike: tuple[str, int, int] | None = None
        self.poll_ends = 0  # the count once every run that a poll found ended is said

    def polled(self, ending: int) -> None:
        """A poll found `ending` runs ended: the sides of a process end together, and a pace counts them all."""
        self.poll_ends = self.finished + ending

    def submitted(self, job_ids: list[str]) -> None:
        """A line naming the arrays a followed launch submitted at once: what `scancel` stops, while it follows."""
        submitted = slurm.arrays(job_ids)
        if submitted:
            self._line(f"submitted as {'array' if len(submitted) == 1 else 'arrays'} {', '.join(submitted)}")

    def _line(self, text: str) -> None:
        self._say_alike()
        self._print(text)

    def _print(self, text: str) -> None:
        clear = "\r\033[K" if self.live else ""
        print(f"{clear}{text}", file=self.stream, flush=True)

    def _say_alike(self) -> None:
        """One line for the runs left unstarted, for one reason, after the first: a budget leaves thousands."""
        if self.alike and self.alike[1]:
            self._print(f"{self.count(self.alike[2])} pending {counted(self.alike[1], 'more run')}, as the one above")
        self.alike = None

    def count(self, n: int) -> str:
        """How the n-th run to start or end is counted: [n/total]."""
        return f"[{n}/{self.total}]"

    def left(self) -> str:
        """What ends a run's end line after the time it took: nothing for one launch."""
        return ""

    def running(self, spec: RunSpec) -> None:
        """The run has started (reported once)."""
        if spec.name not in self.running_since:
            self.running_since[spec.name] = time.monotonic()
            self.started += 1
            self._line(f"{self.count(self.started)} start  {spec.name}")

    def ended(self, spec: RunSpec, state: str, detail: str, timing: dict[str, float] | None = None) -> None:
        self.finished += 1
        if state == PENDING and spec.name not in self.running_since:  # never seen running: never started
            self.unstarted += 1
            if self.alike and self.alike[0] == detail:
                self.alike = (detail, self.alike[1] + 1, self.finished)
                return
            self._line(f"{self.count(self.finished)} {state:<6} {spec.name}  {detail}{self.left()}")
            self.alike = (detail, 0, self.finished)
            return
        self.running(spec)
        seconds = time.monotonic() - self.running_since.pop(spec.name)
        spent = ""
        if timing:
            # the launcher sees a run start and end at its polls, seconds apart on a scheduler: the run's own parts
            # are its time where it recorded each; else they are a floor
            own = sum(timing.get(key, 0.0) for key in OWN_PARTS)
            seconds = own if all(key in timing for key in OWN_PARTS) else max(seconds, own)
            self.timings.append(timing)
            parts = [("start-up", "startup_s"), ("warm-up", "warmup_s"), ("window", "window_s")]
            parts += [("after the window", "records_s"), ("of which counts and probes", "counted_s")]
            parts += [
                ("summary", "summarized_s"),
                ("profile", "profiled_s"),
                ("explanation", "explained_s"),
                ("records written", "written_s"),
            ]
            spent = "; " + ", ".join(f"{label} {timing[key]:.2f} s" for label, key in parts if key in timing)
        count = self.count(self.finished)
        self._line(f"{count} {state:<6} {spec.name}  {detail}  ({seconds:.1f} s{spent}){self.left()}")

    def end_line(self) -> str:
        """The sweep's efficiency: its runs' measured windows over the wall time since the launch began."""
        self._say_alike()
        wall = time.monotonic() - self.began
        if not self.timings:  # runs left pending or failed: a done run alone records its times
            ran = self.finished - self.unstarted
            how = (
                f"{ran} ended, {self.unstarted} never started"
                if ran and self.unstarted
                else ("never started" if self.unstarted else "ended")
            )
            return f"{counted(self.finished, 'run')} in {wall:.1f} s, {how}, none done: no measured window to sum"
        windows = sum(t.get("window_s", 0.0) for t in self.timings)
        done = len(self.timings)
        if done == self.finished:
            line = f"{counted(done, 'run')} in {wall:.1f} s; "
        else:  # "24 runs in 45 s" would claim the pace of runs that failed, stopped or never started
            rest = self.finished - done - self.unstarted
            others = [f"{rest} failed or stopped"] if rest else []
            others += [f"{self.unstarted} never started"] if self.unstarted else []
            line = f"{done} of {counted(self.finished, 'run')} done in {wall:.1f} s ({', '.join(others)}); "
        line += f"measured windows {windows:.1f} s ({windows / wall:.0%} of it)"
        startups = [t["startup_s"] for t in self.timings if "startup_s" in t]  # a record of another version may lack it
        if startups:
            line += f"; start-up per run median {statistics.median(startups):.2f} s"
        return line

    def tick(self) -> None:
        """Refresh the status line (terminals only)."""
        if not self.live or not self.running_since:
            return
        now = time.monotonic()
        running = ", ".join(f"{name} {now - t:.0f}s" for name, t in self.running_since.items())
        print(f"\r\033[K  running: {running}", end="", file=self.stream, flush=True)


class UpToCap(Progress):
    """One count over launches that go on until a cap: repeats=auto's looks.

    The total is the most runs the cap leaves, so the count reads [19/60 at most].
    It goes on from look to look; `began` and the end line cover all of them.
    Each end line gives the time the runs left to the cap would take at the pace so far.
    The pace is the wall time since the first run started, per run ended.
    Runs that a poll finds ended count from the first of their lines: a process's sides end together.
    It takes in runs at once, start-ups and the pauses between looks, which a run's own time leaves out.
    The time is an upper bound on runs, and an estimate of their pace.
    auto.max_minutes starts no look after `ends_at` (time.monotonic's) that would end past it.
    The time left is then what is left to it.
    It is the look's own runs where they take longer.
    """

    def __init__(self, stream: TextIO | None = None, ends_at: float | None = None):
        super().__init__(0, stream)
        self.first_start: float | None = None
        self.ends_at = ends_at
        self.look_ends = 0  # the count at which the look now running ends

    def expect(self, runs: int, look: int | None = None) -> None:
        """From here, at most `runs` more runs end: the runs left to the cap, not done.

        `look` of them are the next look's, which run to their end whatever the time.
        """
        self.total = self.finished + runs
        self.look_ends = self.finished + (runs if look is None else look)

    def count(self, n: int) -> str:
        return f"[{n}/{self.total} at most]"

    def running(self, spec: RunSpec) -> None:
        if self.first_start is None:
            self.first_start = time.monotonic()
        super().running(spec)

    def left(self) -> str:
        if self.total <= self.finished or self.first_start is None:  # none has run yet: no pace to go by
            return ""
        now = time.monotonic()
        ended = max(self.finished, self.poll_ends)
        runs = self.total - ended
        pace = (now - self.first_start) / ended
        look = pace * max(0, self.look_ends - ended)
        if self.ends_at is not None and max(self.ends_at - now, look) < pace * runs:
            return f"  at most ~{duration(max(self.ends_at - now, look))} left (auto.max_minutes)"
        return f"  at most ~{duration(pace * runs)} left"


def duration(seconds: float) -> str:
    """'40 s' under a minute and a half, else '4.2 min'."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"
