"""The host's state at a measured block's boundaries: what else used the run's CPUs while it ran.

A block is read where the run already synchronizes, before its clock starts and after it stops.
Each reading is this process's CPU time and a few small files: well under a millisecond.

- /proc/stat's lines of the CPUs the run may use: their busy time and steal.
  Others' CPU is their busy time less this process's and its children's.
  /proc/stat counts in ticks (10 ms), so a block's figure is within a tick a CPU.
- /proc's list of this process's children, and theirs: their CPU time.
  They are the run's own helpers, not neighbours: its W&B service, DataLoader and compile workers.
  Children that ended and were waited for count by os.times.
  A DataLoader's workers end so at each epoch's end.
- the cgroup's cpu.stat (v2, else v1): how often and how long the run's cgroup was throttled.
- cpufreq's scaling_cur_freq of the run's CPUs: their clock.
- RAPL's energy counters of the CPU packages (/sys/class/powercap), where readable: every process's energy.

A figure the machine cannot give is None, never 0; a block whose state cannot be read is still measured.
"""

import functools
import os
import time
from pathlib import Path
from typing import NamedTuple

from perfsweep.records.host import HostBlock

BUSY = (0, 1, 2, 5, 6)  # user, nice, system, irq, softirq: /proc/stat's columns of work (guest is within user)
STEAL = 7


class Reading(NamedTuple):
    """The host at one boundary; None where the machine cannot tell."""

    wall: float  # perf_counter
    process_cpu: float  # this process's user and system seconds
    busy: float | None  # the run's CPUs' busy seconds since boot
    steal: float | None
    throttled: int | None
    throttled_s: float | None
    mhz: float | None
    energy_uj: tuple[int, ...] | None  # each CPU package's RAPL counter
    children: dict["Child", float] | None = None  # each live descendant's CPU seconds
    reaped: float = 0.0  # the CPU seconds of the children that ended and were waited for


class Child(NamedTuple):
    """A descendant process, told apart from a later one that reuses its pid by its start time."""

    pid: int
    started: int  # /proc/PID/stat's starttime, in ticks since boot
    parent: int  # its parent's pid
    direct: bool  # this process's own child: os.times counts it once it ended and was waited for


MOST_CHILDREN = 256  # descendants read at a boundary: a run that starts more has its others' CPU overstated


def machine_cpus(stat: Path) -> int | None:
    """The machine's CPUs, by /proc/stat's lines of one CPU each; None where it cannot be read."""
    try:
        lines = stat.read_text().splitlines()
    except OSError:
        return None
    return sum(line.startswith("cpu") and line[3:4].isdigit() for line in lines) or None


def rapl_packages(root: Path) -> list[tuple[Path, int]]:
    """Each CPU package's RAPL domain (intel-rapl:N, named package-N) with its counter's range."""
    found = []
    for domain in sorted((root / "sys/class/powercap").glob("intel-rapl:*")):
        try:
            wrap = int((domain / "max_energy_range_uj").read_text())
            int((domain / "energy_uj").read_text())  # often root's alone: a counter this run cannot read is none
            if domain.name.count(":") == 1 and (domain / "name").read_text().startswith("package") and wrap > 0:
                found.append((domain, wrap))
        except (OSError, ValueError):
            continue
    return found


def cgroup_stat(root: Path) -> Path | None:
    """The cpu.stat of this process's cgroup that counts throttling (v2, else v1); None where there is none."""
    try:
        lines = (root / "proc/self/cgroup").read_text().splitlines()
    except OSError:
        lines = []
    found = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "" or "cpu" in controllers.split(","):
            found.append(root / "sys/fs/cgroup" / controllers / path.lstrip("/") / "cpu.stat")
    found += [root / "sys/fs/cgroup/cpu.stat", root / "sys/fs/cgroup/cpu/cpu.stat"]  # a container's own root
    for path in found:
        try:
            if "nr_throttled" in path.read_text():
                return path
        except OSError:
            continue
    return None


class HostReader:
    """Reads the host for the CPUs this process may use; `root` is where /proc and /sys are."""

    def __init__(self, root: Path = Path("/"), cpus: set[int] | None = None):
        self.cpus = sorted(os.sched_getaffinity(0) if cpus is None else cpus)
        self.stat = root / "proc/stat"
        self.names = {f"cpu{cpu}" for cpu in self.cpus}
        self.cgroup = cgroup_stat(root)
        freqs = [root / f"sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq" for cpu in self.cpus]
        self.freqs = freqs if all(path.exists() for path in freqs) else []
        self.tick = 1 / os.sysconf("SC_CLK_TCK")
        self.proc = root / "proc"
        self.packages = rapl_packages(root)
        self.machine_cpus = machine_cpus(self.stat)

    def read(self) -> Reading:
        busy, steal = self._cpu_times()
        throttled, throttled_s = self._throttling()
        wall, own = time.perf_counter(), time.process_time()
        children, times = self._children(), os.times()
        reaped = times.children_user + times.children_system
        return Reading(wall, own, busy, steal, throttled, throttled_s, self._mhz(), self._energy(), children, reaped)

    def block(self, start: Reading, end: Reading) -> HostBlock:
        """The host over the block between two readings."""
        own = end.process_cpu - start.process_cpu
        children = _children_between(start, end)
        busy = None if None in (start.busy, end.busy) else end.busy - start.busy
        energy = self._energy_between(start.energy_uj, end.energy_uj)
        return HostBlock(
            wall_s=end.wall - start.wall,
            cpus=len(self.cpus),
            process_cpu_s=own,
            busy_s=busy,
            children_cpu_s=children,
            others_cpu_s=None if busy is None else max(0.0, busy - own - (children or 0.0)),
            tick_s=self.tick,
            steal_s=None if None in (start.steal, end.steal) else end.steal - start.steal,
            throttled=None if None in (start.throttled, end.throttled) else end.throttled - start.throttled,
            throttled_s=None if None in (start.throttled_s, end.throttled_s) else end.throttled_s - start.throttled_s,
            mhz_start=start.mhz,
            mhz_end=end.mhz,
            cpu_energy_j=energy,
            machine_cpus=self.machine_cpus if energy is not None else None,
        )

    def _children(self) -> dict[Child, float] | None:
        """Each live process this one started, and theirs, with its CPU seconds.

        None where /proc does not list a process's children.
        """
        found: dict[Child, float] = {}
        pending: list[str] = ["self"]
        while pending and len(found) < MOST_CHILDREN:
            pid = pending.pop()
            try:
                tasks = list((self.proc / pid / "task").iterdir())
                listed = [int(c) for task in tasks for c in (task / "children").read_text().split()]
            except (OSError, ValueError):
                if pid == "self":
                    return None
                continue  # a child that ended as it was read
            for child in listed:
                try:
                    fields = (self.proc / str(child) / "stat").read_text().rsplit(")", 1)[1].split()
                    key = Child(child, int(fields[19]), int(fields[1]), pid == "self")  # starttime, ppid
                    found[key] = (int(fields[11]) + int(fields[12])) * self.tick  # utime, stime
                except (OSError, ValueError, IndexError):
                    continue
                pending.append(str(child))
        return found

    def _energy(self) -> tuple[int, ...] | None:
        try:
            return tuple(int((package / "energy_uj").read_text()) for package, _ in self.packages) or None
        except (OSError, ValueError):  # RAPL's counters are often root's alone
            return None

    def _energy_between(self, start: tuple[int, ...] | None, end: tuple[int, ...] | None) -> float | None:
        """The packages' joules between two readings, each counter's wrap-around undone."""
        if start is None or end is None:
            return None
        ranges = [wrap for _, wrap in self.packages]
        return sum((b - a) % wrap for a, b, wrap in zip(start, end, ranges, strict=True)) / 1e6

    def _cpu_times(self) -> tuple[float | None, float | None]:
        """The run's CPUs' busy and steal seconds; None for what /proc/stat does not give for every one of them."""
        try:
            lines = [line.split() for line in self.stat.read_text().splitlines() if line.startswith("cpu")]
            mine = [[int(v) for v in fields[1:]] for fields in lines if fields[0] in self.names]
        except (OSError, ValueError):
            return None, None
        if len(mine) != len(self.names):
            return None, None
        busy = sum(sum(ticks[i] for i in BUSY if i < len(ticks)) for ticks in mine) * self.tick
        steal = sum(ticks[STEAL] for ticks in mine) * self.tick if all(len(t) > STEAL for t in mine) else None
        return busy, steal

    def _throttling(self) -> tuple[int | None, float | None]:
        """Throttled periods and seconds: v2's throttled_usec, v1's throttled_time (ns)."""
        if self.cgroup is None:
            return None, None
        try:
            stat = dict(line.split() for line in self.cgroup.read_text().splitlines() if line.count(" ") == 1)
            if "throttled_usec" in stat:
                seconds = int(stat["throttled_usec"]) / 1e6
            else:
                seconds = int(stat["throttled_time"]) / 1e9
            return int(stat["nr_throttled"]), seconds
        except (OSError, ValueError, KeyError):
            return None, None

    def _mhz(self) -> float | None:
        """The run's CPUs' mean clock; None where cpufreq does not show every one of them."""
        if not self.freqs:
            return None
        try:
            return sum(int(path.read_text()) for path in self.freqs) / len(self.freqs) / 1e3  # kHz
        except (OSError, ValueError):
            return None


def _children_between(start: Reading, end: Reading) -> float | None:
    """The CPU seconds of the run's descendants between two readings.

    A child started within the block counts whole.
    A child of this process that ended within it counts by os.times, with the descendants it waited for.
    What those had used before the block is taken off.
    A grandchild whose parent lives on is that parent's to count: it is lost to others' CPU.
    """
    if start.children is None or end.children is None:
        return None
    live = sum(max(0.0, cpu - start.children.get(child, 0.0)) for child, cpu in end.children.items())
    gone = {child.pid: child for child in start.children if child not in end.children}

    def waited_for(child: Child) -> bool:  # it and each parent up to this process's child ended
        while not child.direct and child.parent in gone:
            child = gone[child.parent]
        return child.direct

    before = sum(start.children[child] for child in gone.values() if waited_for(child))
    return live + max(0.0, end.reaped - start.reaped - before)


def here() -> HostReader:
    """A reader of the CPUs this process may use now (a run's slot may have set them), its files found once."""
    return _reader(frozenset(os.sched_getaffinity(0)))


@functools.cache
def _reader(cpus: frozenset[int]) -> HostReader:
    return HostReader(cpus=set(cpus))
