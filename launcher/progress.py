"""A progress display for a running sweep: a line per run start and end, and a live status line on a terminal."""

import sys
import time
from typing import TextIO

from sweeps.spec import RunSpec


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None):
        self.total, self.stream = total, stream or sys.stdout
        self.started, self.finished = 0, 0
        self.running_since: dict[str, float] = {}
        self.live = self.stream.isatty()

    def _line(self, text: str) -> None:
        clear = "\r\033[K" if self.live else ""
        print(f"{clear}{text}", file=self.stream, flush=True)

    def running(self, spec: RunSpec) -> None:
        """The run has started (reported once)."""
        if spec.name not in self.running_since:
            self.running_since[spec.name] = time.monotonic()
            self.started += 1
            self._line(f"[{self.started}/{self.total}] start  {spec.name}")

    def ended(self, spec: RunSpec, state: str, detail: str) -> None:
        self.running(spec)
        self.finished += 1
        seconds = time.monotonic() - self.running_since.pop(spec.name)
        self._line(f"[{self.finished}/{self.total}] {state:<6} {spec.name}  {detail}  ({seconds:.1f} s)")

    def tick(self) -> None:
        """Refresh the status line (terminals only)."""
        if not self.live or not self.running_since:
            return
        now = time.monotonic()
        running = ", ".join(f"{name} {now - t:.0f}s" for name, t in self.running_since.items())
        print(f"\r\033[K  running: {running}", end="", file=self.stream, flush=True)
