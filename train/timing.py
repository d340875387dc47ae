"""Per-step phase clocks that add no host-device sync to the loop they time.

At each phase boundary the clock takes a host timestamp (perf_counter) and, on
CUDA, records a CUDA event on the current stream. Recording an event is
asynchronous; events are only read back by `rows()`, after the caller has
synchronized once at the end of the measured window.
"""

import time

import torch


class StepClock:
    """Boundaries of `capacity` steps; call `start()` then `mark()` once per phase."""

    def __init__(self, device: torch.device, capacity: int, phases: tuple[str, ...]):
        self.uses_events = device.type == "cuda"
        self.phases = phases
        self._marks = len(phases) + 1  # boundaries per step: start, then the end of each phase
        self._host = [0.0] * (capacity * self._marks)
        self._events = (
            [torch.cuda.Event(enable_timing=True) for _ in range(capacity * self._marks)] if self.uses_events else None
        )
        self._next = 0

    @property
    def timer(self) -> str:
        return "cuda_event" if self.uses_events else "perf_counter"

    def start(self) -> None:
        """Begin a step: its first boundary."""
        self.mark()

    def mark(self) -> None:
        """End the current phase."""
        if self._events is not None:
            self._events[self._next].record()
        self._host[self._next] = time.perf_counter()
        self._next += 1

    @property
    def full(self) -> bool:
        """Every mark of the window is taken: one more fails (IndexError)."""
        return self._next >= len(self._host)

    def miscounted(self, steps: int, overflowed: bool = False) -> str:
        """Why the marks of `steps` steps are not theirs, "" where each step marked its start and its phases' ends.
        A step of the user's own may mark too few or too many (`overflowed`: one mark more than the window holds)."""
        if self._next == steps * self._marks and not overflowed:
            return ""
        made = f"more than {self._next}" if overflowed else str(self._next)
        return (
            f"the step marked its clock {made} times in {steps} steps. Each step calls clock.start() once, then "
            f"clock.mark() once at the end of each of its {len(self.phases)} phases ({', '.join(self.phases)}): "
            f"{self._marks} marks a step"
        )

    def rows(self) -> list[dict[str, float]]:
        """Milliseconds per phase and per step, for every completed step.

        `{phase}_ms` is device time on CUDA (events) and host time on CPU;
        `{phase}_host_ms` is always host time. The caller must have synchronized
        the device since the last mark.
        """
        rows, marks, phases = [], self._marks, self.phases
        for first in range(0, self._next - marks + 1, marks):
            host = self._host[first : first + marks]
            row = {f"{p}_host_ms": (host[i + 1] - host[i]) * 1e3 for i, p in enumerate(phases)}
            row["step_host_ms"] = (host[-1] - host[0]) * 1e3
            if self._events is None:
                row.update({f"{p}_ms": row[f"{p}_host_ms"] for p in (*phases, "step")})
            else:
                ev = self._events[first : first + marks]
                row.update({f"{p}_ms": ev[i].elapsed_time(ev[i + 1]) for i, p in enumerate(phases)})
                row["step_ms"] = ev[0].elapsed_time(ev[-1])
            rows.append(row)
        return rows


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class NoClock:
    """A clock that marks nothing: for steps run outside a measured window."""

    def start(self) -> None:
        pass

    def mark(self) -> None:
        pass
