"""A progress display for a running sweep: a line per event, and a live status line on a terminal."""

import sys
import time
from typing import TextIO

from sweeps.spec import RunSpec


class Progress:
    def __init__(self, total: int, stream: TextIO = sys.stdout):
        self.total, self.stream = total, stream
        self.finished, self.failed = 0, 0
        self.started_at: dict[str, float] = {}
        self.live = stream.isatty()

    def _line(self, text: str) -> None:
        clear = "\r\033[K" if self.live else ""
        print(f"{clear}{text}", file=self.stream, flush=True)

    def started(self, spec: RunSpec) -> None:
        self.started_at[spec.name] = time.monotonic()
        self._line(f"[{self.finished + 1}/{self.total}] start  {spec.name}")

    def ended(self, spec: RunSpec, state: str, detail: str) -> None:
        self.finished += 1
        self.failed += state != "done"
        seconds = time.monotonic() - self.started_at.pop(spec.name)
        self._line(f"[{self.finished}/{self.total}] {state:<6} {spec.name}  {detail}  ({seconds:.1f} s)")

    def tick(self) -> None:
        """Refresh the status line (terminals only)."""
        if not self.live or not self.started_at:
            return
        now = time.monotonic()
        running = ", ".join(f"{name} {now - t:.0f}s" for name, t in self.started_at.items())
        print(f"\r\033[K  running: {running}", end="", file=self.stream, flush=True)
