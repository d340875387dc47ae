"""A run's state (status.json).

It says what the run is doing, how its earlier attempts ended, and why it failed.
"""

import dataclasses
from pathlib import Path
from typing import Any, NotRequired

from typing_extensions import TypedDict  # pydantic validates typing's TypedDict only from Python 3.12

from perfsweep.records.files import STATUS, Unreadable, declare, known_fields, quarantine, read_record

PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"
WRITTEN = (PENDING, RUNNING, DONE, FAILED)  # what a run (or its launcher) writes in status.json
# Found by `status`, never written:
# - lost: its job has ended without a final record;
# - unreadable: a record of the run cannot be read. It is not done: a launch or resume moves the file aside and
#   runs it again;
# - unknown: not finished, and the scheduler did not answer whether its job is alive.
LOST, UNREADABLE, UNKNOWN = "lost", "unreadable", "unknown"
STATES = (*WRITTEN, LOST, UNREADABLE, UNKNOWN)
FINAL = (DONE, FAILED)


class Stopped(BaseException):
    """What stops a whole process of runs, not one of its runs: its time limit (launcher's RunTimeout), or the
    launch's budget (BudgetSpent).

    A signal handler raises it, wherever the run is: in a step, a probe, or the user's own code.
    So it derives from BaseException, as KeyboardInterrupt does.
    An `except Exception` that falls back or counts beside the measurement lets it through.
    """


class BudgetSpent(Stopped):
    """The launch's budget (launcher.budget_s) ran out while the process measured: its runs are pending again."""


@dataclasses.dataclass(frozen=True)
class RunError:
    """Why a run failed: the exception's type and message, and the traceback (or the log's last lines)."""

    type: str
    message: str = ""
    traceback: str = ""
    known: str | None = None  # the known upstream issue it is (its address: train/known_issues.py)

    def line(self, limit: int = 300) -> str:
        """`Type: first line of its message`, cut to `limit` in its middle.

        A known issue reads `Type [known: address]: ...`.
        A message's end often says what to do (`raise launcher.timeout_min`): a cut keeps its last third.
        """
        lines = self.message.strip().splitlines()
        kind = f"{self.type} [known: {self.known}]" if self.known else self.type
        text = f"{kind}: {lines[0]}" if lines else kind
        if len(text) <= limit:
            return text
        tail = (limit - 5) // 3
        return f"{text[: limit - 5 - tail]} ... {text[len(text) - tail :]}"


BUDGET = "Budget"  # the interruption of runs that the launch's budget (launcher.budget_s) stopped or left unstarted


class Interrupted(TypedDict):
    """How a run that is pending again was stopped: by what, when, and why (where it is known)."""

    type: str  # KeyboardInterrupt, SystemExit, JobEnded, Budget...
    at: str
    reason: NotRequired[str]


@dataclasses.dataclass(frozen=True)
class Status:
    """What status.json holds.

    A run without one is pending (planned, not started).
    """

    state: str = PENDING
    updated_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    resubmitted_at: str | None = None
    # the job and process the run executes in
    job_id: str | None = None
    host: str | None = None
    log: str | None = None
    pid: int | None = None
    parallelism: int = 1  # runs that ran at once
    tasks: int | None = None  # the job's tasks where they are the run's ranks (launcher=slurm, dist=ddp/fsdp)
    tracker_id: str | None = None  # its W&B run id
    code: dict[str, str] | None = None  # the code it measured: its launch's snapshot's modules -> content hash
    # The repository and commit of the code under test as its launch found it (records/code.py `under_test`)
    code_under_test: dict[str, Any] | None = None
    ci: dict[str, str | None] | None = None  # the CI run that launched it: provider, branch, run id, commit, url, repo
    error: RunError | None = None  # failed: why
    interrupted: Interrupted | None = None  # pending again after Ctrl-C or a preemption
    attempts: tuple[dict[str, Any], ...] = ()  # how earlier starts ended (a requeue, a resume)
    warnings: tuple[str, ...] = ()  # what went wrong beside the run (W&B)
    # where the run's time went, in seconds:
    # - startup_s: from its process's start (or the previous run's end in the same process) to its first step;
    # - warmup_s: its warm-up steps;
    # - window_s: the measured window;
    # - records_s: from the window's end to its records written. Of which:
    #   - counted_s: the steps counted for syncs and FLOPs, and the probes of the GPU's neighbours and clocks;
    #   - summarized_s: the summary made;
    #   - written_s: the step rows and summary written;
    #   - wandb_s
    timing: dict[str, float] | None = None
    unreadable: str | None = None  # read, not written: why status.json could not be read; the run is pending

    def __post_init__(self) -> None:
        if self.state not in WRITTEN:
            raise ValueError(f"unknown run state {self.state!r}; states: {', '.join(WRITTEN)}")
        if isinstance(self.error, dict):  # as status.json holds it
            object.__setattr__(self, "error", RunError(**known_fields(RunError, self.error)))
        object.__setattr__(self, "attempts", tuple(self.attempts))
        object.__setattr__(self, "warnings", tuple(self.warnings))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Status":
        return cls(**known_fields(cls, data))

    def to_json(self) -> dict[str, Any]:
        data = {f: getattr(self, f) for f in _FIELDS}
        data["error"] = dataclasses.asdict(self.error) if self.error else None
        data["attempts"], data["warnings"] = list(self.attempts), list(self.warnings)
        keep = ("state", "attempts", "warnings", "parallelism")
        return {k: v for k, v in data.items() if (v is not None or k in keep) and k != "unreadable"}

    @property
    def over_budget(self) -> bool:
        """Whether the launch's budget (launcher.budget_s) stopped this run or left it unstarted."""
        return self.state == PENDING and (self.interrupted or {}).get("type") == BUDGET

    def history(self) -> list[dict[str, Any]]:
        """The attempts, this one added if it started.

        That is what a new start of the run keeps of the past.
        """
        if self.started_at is None:
            return list(self.attempts)
        cause = self.error.type if self.error else (self.interrupted or {}).get("type")
        attempt = {"state": self.state, "started_at": self.started_at, "updated_at": self.updated_at}
        attempt |= {"job_id": self.job_id, "host": self.host, "error": cause}
        if self.error:  # why it failed, kept whole: a later start must not lose it
            attempt |= {"message": self.error.message, "traceback": self.error.traceback}
        return [*self.attempts, attempt]

    def error_line(self, limit: int = 300) -> str:
        return self.error.line(limit) if self.error else ""

    def why_not_done(self, limit: int = 300) -> str:
        """A failed run's error, or a pending one's interruption ('' where neither is known)."""
        return self.error_line(limit) or (self.interrupted or {}).get("reason", "")[:limit]


_FIELDS = tuple(f.name for f in dataclasses.fields(Status))
declare(STATUS, "status", Status)


def read_status(run_dir: Path, move_aside: bool = False) -> Status:
    """The run's status.

    A run with no status is pending.
    A status that cannot be read (or is not a status) reads as pending, with `unreadable` saying why.
    With `move_aside`, the file is also moved aside.
    The run or its launcher asks for that before writing a new one.
    """
    path = Path(run_dir) / STATUS
    record = read_record(path)
    if record is None:
        return Status()
    if not isinstance(record, Unreadable):
        return Status.from_json(record)
    aside = quarantine(path) if move_aside else None
    return Status(unreadable=f"{record.reason}{f'; moved aside to {aside.name}' if aside else ''}")
