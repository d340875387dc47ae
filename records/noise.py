"""A machine's noise floor, as `perfsweep noise` measured it: one file a machine, under the runs dir.

    <runs_dir>/noise/<machine>.json           the latest floor of that machine's default configuration
    <runs_dir>/noise/<machine>+<hash>.json    the latest floor of another configuration, by its overrides' hash
    <runs_dir>/noise/<machine>-<time>/        the sweeps it measured it with: paired/ and apart/

The machine is named as the records name it: the GPU, else the CPU's model; and torch.
A launch reads its machine's file, where there is one, and says what it holds in a line.
That is the default configuration's floor, else the latest of another.
So a floor of a small configuration does not take the place of the default's.
"""

import dataclasses
import glob
import hashlib
import json
import platform
import re
from importlib import metadata
from pathlib import Path
from typing import Any

from perfsweep.records.files import known_fields, write_json

FOLDER = "noise"
BUDGETS = {60: "1 min", 600: "10 min", 3600: "1 h"}  # the machine's time a floor is given for, as said
BUDGETS_S = tuple(BUDGETS)
SAID_BUDGET_S = 600  # the one a launch names
WAYS = ("paired", "apart")  # one configuration as both sides of each process, and in a process a run
DURING = " during its runs"  # the settings its runs' hosts showed: a neighbour, steal


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_kind(device: str, gpu: bool, torch: str) -> str:
    """A machine's name for a file or a folder: 'cpu-amd-epyc-7763-64-core-processor-torch2.14.1'.

    `device` is the GPU's name, else the CPU's (RunRecord.device).
    """
    name = device.removeprefix("CPU ").lower()
    return re.sub(r"[^a-z0-9.]+", "-", f"{'' if gpu else 'cpu-'}{name}").strip("-") + f"-torch{torch}"


@dataclasses.dataclass(frozen=True)
class Spread:
    """The spread of one configuration's log step time, run paired or apart, and what it lets a sweep decide."""

    runs: int
    between: float  # between processes, beyond what their steps explain
    within: float  # a step's, within a run
    between_sides: float | None  # the part of `between` a paired ratio keeps; None apart
    run_cost_s: float  # a run's share of the time from its way's first run to its last, beyond its steps
    step_s: float
    floors: dict[str, float | None]  # budget in seconds -> the smallest difference decided at 95%; None: none is
    fixed_s: float = 0.0  # a launch's cost before its first run and after its last: paid once


@dataclasses.dataclass(frozen=True)
class NoiseFloor:
    """What `perfsweep noise` measured on one machine."""

    machine: str  # machine_kind
    device: str
    torch: str
    measured: str  # the date and time, ISO 8601
    overrides: list[str]
    processes: int  # a way's processes
    folder: str  # its sweeps' folder
    paired: Spread | None
    apart: Spread | None
    settings: list[dict[str, Any]]  # name, state, noisy (true, false or null: unknown), fix

    def write(self, runs_dir: Path) -> Path:
        path = floor_path(runs_dir, self.machine, self.overrides)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, dataclasses.asdict(self))
        return path

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "NoiseFloor":
        ways = {way: Spread(**known_fields(Spread, data[way])) if data.get(way) else None for way in WAYS}
        return cls(**{**known_fields(cls, data), **ways})


def floor_path(runs_dir: Path, machine: str, overrides: list[str] = ()) -> Path:
    """The file of a floor measured with these overrides: the machine's name, and their hash where there are any.

    Where the records go (runs_dir) is no part of the configuration.
    """
    measured = " ".join(o for o in overrides if not o.startswith("runs_dir="))
    named = f"{machine}+{hashlib.sha256(measured.encode()).hexdigest()[:8]}" if measured else machine
    return Path(runs_dir) / FOLDER / f"{named}.json"


def host_unknown(floor: NoiseFloor) -> bool:
    """Whether what else ran on the floor's host is unknown.

    Its runs' windows were then too short to tell.
    """
    return any(DURING in s["name"] and s["noisy"] is None for s in floor.settings)


def read_floor(runs_dir: Path, machine: str) -> NoiseFloor | None:
    """The machine's floor of its default configuration, else the latest of another; None where none can be read."""
    others = sorted(floor_path(runs_dir, machine).parent.glob(f"{glob.escape(machine)}+*.json"), key=_age)
    for path in [floor_path(runs_dir, machine), *others]:
        try:
            return NoiseFloor.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError, KeyError):
            continue
    return None


def _age(path: Path) -> float:
    """How long ago the file was written, in seconds: the latest first."""
    try:
        return -path.stat().st_mtime
    except OSError:
        return 0.0


def torch_version() -> str:
    """The installed torch's version, without importing it."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "?"


def budget_within(spread: Spread | None, budget_s: float) -> int:
    """Of the budgets whose floors the spread keeps, the longest within `budget_s` (a launch's), else the shortest:
    a longer one would promise a finer floor than the launch can reach."""
    kept = sorted(int(key) for key in (spread.floors if spread else {})) or [SAID_BUDGET_S]
    return max((kept_s for kept_s in kept if kept_s <= budget_s), default=kept[0])


def decided(spread: Spread | None, budget_s: int) -> str:
    """The smallest difference a way decides in the budget, as a user reads it: '±3.1%'."""
    if spread is None:
        return "unknown"
    value = spread.floors.get(str(budget_s))
    if value is not None:
        return f"±{value * 100:.2g}%"
    if spread.fixed_s >= budget_s:
        return f"none: a launch takes {spread.fixed_s:.0f} s before its first run and after its last"
    return "none: its runs take longer"
