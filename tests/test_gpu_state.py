"""The GPU's state over a run's measured blocks (train/gpu_state.py), read through a stand-in for NVML: there is
no GPU here. Then the host's RAPL energy, read from a made-up sysfs, and what the flags and table make of both."""

import dataclasses
import json
import statistics
import types

import numpy as np
import pytest
import torch

from perfsweep.analysis.statistics.host_flags import figures, seen
from perfsweep.analysis.views.table import table_view
from perfsweep.records import BudgetSpent, RunRecord
from perfsweep.records.host import GpuBlock, HostBlock, HostState
from perfsweep.train import gpu_state
from perfsweep.train.gpu_state import COUNTER, INTEGRATED, GpuReader
from perfsweep.train.host_state import HostReader
from perfsweep.train.instrumented import energy_of, host_of
from perfsweep.train.window import Window
from tests import synthetic


class NotSupported(Exception):
    """NVML's answer where the GPU lacks a query."""


class StandInNvml:
    """A stand-in for NVML (the pynvml module), not NVML: a GPU whose SM clock falls from 1980 to 1590 MHz under its
    power cap between two readings, drawing 300 W of a 350 W limit, beside another process (pid 4242)."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU, NVML_FEATURE_ENABLED = 0, 2, 0, 1
    NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL = 0, 1

    def __init__(self, energy_counter: bool = True):
        self.reads, self.energy_counter = 0, energy_counter

    def nvmlDeviceGetClockInfo(self, handle, clock):  # noqa: N802 (NVML's names)
        if clock == self.NVML_CLOCK_MEM:
            return 2619
        self.reads += 1
        return 1980 if self.reads == 1 else 1590

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):  # noqa: N802
        return 0x1 if self.reads == 1 else 0x4  # idle, then the software power cap

    def nvmlDeviceGetPowerUsage(self, handle):  # noqa: N802
        return 300_000  # mW

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):  # noqa: N802
        return 350_000

    def nvmlDeviceGetTemperature(self, handle, sensor):  # noqa: N802
        return 60 + 10 * (self.reads > 1)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):  # noqa: N802
        if not self.energy_counter:
            raise NotSupported("the GPU has no energy counter")
        return 1_000_000 + 150_000 * (self.reads > 1)  # mJ

    def nvmlDeviceGetViolationStatus(self, handle, policy):  # noqa: N802
        held_s = 0.1 * (self.reads > 1) if policy == self.NVML_PERF_POLICY_POWER else 0.0  # 0.1 s under the power cap
        return types.SimpleNamespace(referenceTime=0, violationTime=int((5.0 + held_s) * 1e9))  # ns since boot

    def nvmlDeviceGetApplicationsClock(self, handle, clock):  # noqa: N802
        return 1500

    def nvmlDeviceGetDefaultApplicationsClock(self, handle, clock):  # noqa: N802
        return 1500

    def nvmlDeviceGetMaxClockInfo(self, handle, clock):  # noqa: N802
        return 1980

    def nvmlDeviceGetPersistenceMode(self, handle):  # noqa: N802
        return 1

    def nvmlDeviceGetComputeRunningProcesses(self, handle):  # noqa: N802
        return [types.SimpleNamespace(pid=4242)]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle):  # noqa: N802
        return []


def a_block(nvml: StandInNvml) -> GpuBlock:
    reader = GpuReader(nvml, handle=0)
    return reader.block(reader.read(), reader.read())


def test_a_block_holds_the_clocks_the_reasons_in_force_the_power_and_the_counters_energy():
    block = a_block(StandInNvml())
    assert (block.sm_mhz_start, block.sm_mhz_end, block.memory_mhz_end) == (1980, 1590, 2619)
    assert block.reasons == ["power cap"], "idle is no reason"
    assert (block.power_w_end, block.power_limit_w, block.temperature_c_end) == (300, 350, 70)
    assert block.energy_j == pytest.approx(150) and block.energy_source == COUNTER
    assert block.power_held_s == pytest.approx(0.1) and block.thermal_held_s == 0.0, "within the block, not at its ends"


def test_a_gpu_without_an_energy_counter_integrates_its_power_over_the_block():
    block = a_block(StandInNvml(energy_counter=False))
    assert block.energy_source == INTEGRATED and block.energy_j is not None and 0 <= block.energy_j < 1


def _on_gpu(seconds: float = 0.5) -> HostState:
    reader = GpuReader(StandInNvml(), handle=0)
    host = HostState.of([HostBlock(wall_s=seconds, cpus=2, process_cpu_s=seconds, gpu=a_block(StandInNvml()))])
    return dataclasses.replace(host, gpu_settings=[dataclasses.asdict(s) for s in reader.settings()])


def test_the_flags_name_the_clock_that_fell_its_reason_and_the_other_process():
    said = seen(_on_gpu())
    assert "SM clock 1980 -> 1590 MHz, reason: power cap" in said
    assert "GPU held below its clocks by its power cap for 20% of its window" in said, "0.1 s of 0.5 s"
    assert "thermal" not in said
    assert "another process on the GPU: pids 4242" in said
    assert "SM clock 1980 -> 1590 MHz, power 300 W (NVML energy counter) of a 350 W limit" in figures(_on_gpu())


def _rapl(root, joules: float) -> None:
    package = root / "sys/class/powercap/intel-rapl:0"
    package.mkdir(parents=True, exist_ok=True)
    (package / "name").write_text("package-0\n")
    (package / "max_energy_range_uj").write_text("262143328850\n")
    (package / "energy_uj").write_text(f"{int(joules * 1e6) % 262143328850}\n")


def test_a_cpu_packages_energy_comes_from_rapl_its_counters_wrap_undone(tmp_path):
    _rapl(tmp_path, 262142.328850)  # 1 J below the counter's wrap
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/stat").write_text("cpu  1 0 1 9\n" + "".join(f"cpu{n} 1 0 1 9\n" for n in range(4)) + "intr 5\n")
    reader = HostReader(root=tmp_path, cpus={0})
    start = reader.read()
    _rapl(tmp_path, 262144.828850)  # 1.5 J past it
    block = reader.block(start, reader.read())
    assert block.cpu_energy_j == pytest.approx(2.5) and block.machine_cpus == 4
    elsewhere = HostReader(root=tmp_path / "elsewhere", cpus={0})
    assert elsewhere.read().energy_uj is None, "no RAPL: unknown, not 0"
    assert elsewhere.block(elsewhere.read(), elsewhere.read()).machine_cpus is None


def _on_cpu(cpus: int, others_cpu_s: float, machine_cpus: int | None = 2) -> HostState:
    """A run's host over one block of 2 s on a 2-CPU machine whose packages used 100 J (RAPL); the run used 2
    CPU-seconds, and /proc/stat's ticks are not known (no resolution)."""
    block = HostBlock(2.0, cpus, 2.0, 2.0 + others_cpu_s, others_cpu_s, cpu_energy_j=100.0, machine_cpus=machine_cpus)
    return HostState.of([block])


def test_the_cpu_packages_energy_is_a_runs_own_only_where_it_had_the_machine_to_itself():
    """RAPL counts every process's energy: a run beside another one, or pinned to some of the CPUs, gets none."""
    alone = _on_cpu(cpus=2, others_cpu_s=0.19)  # below 10% of the run's own CPU time
    assert alone.energy_shared == "" and alone.joules_per_sample(100.0) == pytest.approx(0.5)
    pinned = _on_cpu(cpus=1, others_cpu_s=0.0)
    assert pinned.energy_shared == "the run's process may use 1 of the machine's 2 CPUs"
    assert pinned.joules_per_sample(100.0) is None
    beside = _on_cpu(cpus=2, others_cpu_s=0.21)
    assert beside.energy_shared == "other processes used over 10% of the run's CPU time beside it"
    assert beside.joules_per_sample(100.0) is None
    recorded_before = HostState.from_json(json.loads(json.dumps(dataclasses.asdict(_on_cpu(2, 0.0, None)))))
    assert recorded_before.energy_shared == "", "a record without the machine's CPUs is read as the run's"
    assert _on_gpu().energy_shared == "", "a GPU's energy counter is its own"


def test_the_table_says_shared_where_the_packages_energy_held_other_processes(tmp_path):
    levels = {("tensor", "contiguous"): 50.0, ("subclass", "contiguous"): 60.0}
    runs = synthetic.sweep(levels, 2, synthetic.Noise(), np.random.default_rng(0))
    own, pinned, beside = _on_cpu(2, 0.0), _on_cpu(1, 0.0), _on_cpu(2, 1.0)
    hosts = {"tensor": [own, pinned], "subclass": [beside, beside]}  # each configuration's two runs
    mixed = [
        dataclasses.replace(run, summary=dataclasses.replace(run.summary, host=hosts[run.axes["input_type"]].pop()))
        for run in _training(runs)
    ]
    shown = table_view(tmp_path, mixed)
    for header in ("J/sample", "samples/J"):
        assert [row[shown.header.index(header)] for row in shown.rows] == ["shared", "shared"], "one shared run is"
        assert [row[shown.fields.index(header)] for row in shown.records] == [None, None]
    assert shown.notes[-1] == (
        "shared (J/sample, samples/J): RAPL counts the CPU packages' energy, every process's; the run's process may "
        "use 1 of the machine's 2 CPUs; other processes used over 10% of the run's CPU time beside it. A run's own "
        "energy needs every CPU of the machine in its affinity, and others' CPU time under 10% of its own"
    )
    alone = table_view(tmp_path, _training(runs, own))
    assert "shared" not in {row[alone.header.index("J/sample")] for row in alone.rows}
    assert not any(note.startswith("shared") for note in alone.notes)


def _training(runs: list[RunRecord], host: HostState | None = None) -> list[RunRecord]:
    """The runs with a training step's throughput (16 samples a step), and `host` as their host."""
    return [
        dataclasses.replace(
            run, summary=dataclasses.replace(run.summary, samples_per_s=16e3 / run.summary.median("step"), host=host)
        )
        for run in runs
    ]


def test_the_table_gives_joules_a_sample_and_samples_a_joule_else_unknown(tmp_path):
    levels = {("tensor", "contiguous"): 50.0, ("subclass", "contiguous"): 60.0}
    runs = synthetic.sweep(levels, 1, synthetic.Noise(), np.random.default_rng(0))
    unknown = table_view(tmp_path, _training(runs, HostState.of([HostBlock(wall_s=1.0, cpus=2, process_cpu_s=1.9)])))
    assert "samples/J" not in unknown.header
    assert {row[unknown.header.index("J/sample")] for row in unknown.rows} == {"unknown"}
    (why,) = [note for note in unknown.notes if note.startswith("unknown: ")]
    assert "J/sample, where no energy counter was read: NVML's on a GPU; on a CPU, RAPL's in /sys/class" in why, why
    measured = _training(runs, _on_gpu(seconds=2.0))  # 150 J over 2 s: 75 W
    shown = table_view(tmp_path, measured)
    assert not [note for note in shown.notes if note.startswith("unknown: ")], shown.notes
    older = table_view(tmp_path, _training(runs))  # records of a perfsweep that read no host state
    assert "unknown: J/sample, where its runs recorded no host state (an older perfsweep)" in older.notes
    for row, run in zip(shown.records, measured, strict=True):
        per_sample = row[shown.fields.index("J/sample")]
        assert per_sample == pytest.approx(75 / run.summary.samples_per_s)
        assert row[shown.fields.index("samples/J")] == pytest.approx(1 / per_sample)


def test_wandb_gets_joules_a_sample_where_the_energy_was_read_and_nothing_else():
    one = synthetic.sweep({("tensor", "contiguous"): 50.0}, 1, synthetic.Noise(), np.random.default_rng(0))
    (run,) = _training(one)
    assert energy_of(run.summary) == {}
    measured = dataclasses.replace(run.summary, host=_on_gpu(seconds=2.0))
    assert energy_of(measured) == {
        "joules_per_sample": pytest.approx(75 / run.summary.samples_per_s),
        "samples_per_joule": pytest.approx(run.summary.samples_per_s / 75),
    }


def test_with_the_machines_price_the_table_gives_what_a_million_samples_cost(tmp_path):
    one = synthetic.sweep({("tensor", "contiguous"): 50.0}, 2, synthetic.Noise(), np.random.default_rng(0))
    priced = [dataclasses.replace(r, fields={**r.fields, "cost.per_hour": 3.6}) for r in _training(one)]
    shown = table_view(tmp_path, priced)
    (row,) = shown.records
    rates = [r.summary.samples_per_s for r in priced]
    expected = 3.6 / 3600 * 1e6 / statistics.geometric_mean(rates)  # $1e-3 a second, at the runs' throughput
    assert row[shown.fields.index("$/1M samples")] == pytest.approx(expected, rel=1e-6)
    assert "$/1M samples" not in table_view(tmp_path, _training(one)).header, "no price: no column"


def test_a_gpu_run_without_nvml_has_no_energy_not_the_cpu_packages(monkeypatch):
    monkeypatch.setattr(gpu_state, "here", lambda device: None)  # NVML cannot reach the GPU (no GPU here)
    window = Window(
        rows=[], seconds=1.0, timer="cuda_event", ended_at=0.0, host=[HostBlock(1.0, 2, 1.0, cpu_energy_j=50.0)]
    )
    assert host_of(window, torch.device("cpu")).energy_j == 50.0
    assert host_of(window, torch.device("cuda")).energy_j is None


def test_the_gpu_settings_are_read_when_asked_not_once_a_process():
    nvml = StandInNvml()
    reader = GpuReader(nvml, handle=0)
    assert "4242" in reader.settings()[2].state
    nvml.nvmlDeviceGetComputeRunningProcesses = lambda handle: []
    assert reader.settings()[2].state == "none", "the next run reads the GPU as it is then"


def test_a_rapl_counter_without_a_range_is_not_read(tmp_path):
    _rapl(tmp_path, 1.0)
    (tmp_path / "sys/class/powercap/intel-rapl:0/max_energy_range_uj").write_text("0\n")
    assert HostReader(root=tmp_path, cpus={0}).read().energy_uj is None


def test_a_runs_start_clock_is_read_after_its_warm_up_as_its_window_begins(monkeypatch):
    """An idle GPU's clock (345 MHz on an H200) rises only in the warm-up: read before it, every first run of a sweep
    was flagged DRIFT though its window ran at full clock."""
    from perfsweep.sweeps.plan import build_plan
    from perfsweep.train import instrumented

    said = []
    monkeypatch.setattr(
        instrumented, "clocks", lambda device: said.append("clock") or {"source": "cpu_mhz", "mhz": 1.0}
    )
    warmed_up, run_window = instrumented.warmed_up, instrumented.run_window
    monkeypatch.setattr(instrumented, "warmed_up", lambda *a: (warmed_up(*a), said.append("warmed up"))[0])
    monkeypatch.setattr(instrumented, "run_window", lambda *a: said.append("window") or run_window(*a))
    overrides = ["model=tiny_cnn", "model.image_size=32", "model.batch_size=2", "steps=2", "warmup_steps=1"]
    (spec,) = build_plan([*overrides, "input_type=tensor", "memory_format=contiguous", "repeats=1"]).runs
    instrumented.measure(spec.config, torch.device("cpu"))
    assert said == ["window", "warmed up", "clock", "window"], "the warm-up's steps, then the clock, then the window's"


def test_a_run_across_gpus_counts_every_ranks_gpu_energy_over_its_straggler_s_blocks():
    """Each rank reads its own GPU: a block's energy is every rank's; a rank that could not read makes it unknown."""
    from perfsweep.train.ranks.combine import Ranks
    from perfsweep.train.ranks.measure import RankResult

    def result(rank: int, step_ms: float, joules: list[float | None]) -> RankResult:
        rows = [{"step": i, "step_ms": step_ms, "grad_sync": i % 2 == 0} for i in range(4)]
        gpus = [GpuBlock(sm_mhz_start=1980.0 + rank, energy_j=j, energy_source=COUNTER) for j in joules]
        blocks = [HostBlock(1.0, 2, 1.0, gpu=gpu) for gpu in gpus]
        window = Window(rows, 4 * step_ms / 1e3, "cuda_event", 0.0, blocks)
        return RankResult(rank, window, window, None, 0.0, (1.0, "cuda"), 4, {})

    ranks = Ranks((result(0, 10.0, [100.0, 110.0]), result(1, 12.0, [90.0, 95.0])), "ddp")
    assert ranks.run_rank.rank == 1, "the slower rank's steps are the run's"
    window = ranks.window()
    assert [block.gpu.energy_j for block in window.host] == [190.0, 205.0]
    assert [block.gpu.sm_mhz_start for block in window.host] == [1981.0, 1981.0], "the clocks are the run rank's"
    assert HostState.of(window.host).energy_j == 395.0
    assert window.host[0].gpu.energy_source == "NVML energy counter, 2 GPUs' sum", "a power two GPUs drew together"
    unread = Ranks((result(0, 10.0, [100.0, None]), result(1, 12.0, [90.0, 95.0])), "ddp").window()
    assert [block.gpu.energy_j for block in unread.host] == [190.0, None]
    assert [block.gpu.energy_source for block in unread.host] == ["NVML energy counter, 2 GPUs' sum", None]


def test_a_paired_process_reads_its_start_clock_after_every_side_s_warm_up(tmp_path, monkeypatch):
    """pairing=auto, the default: the sides warm up one after another, then the clock, then their blocks."""
    from perfsweep.train import instrumented
    from tests.helpers import TINY, launch_here

    said = []
    clock = {"source": "cpu_mhz", "mhz": 1.0}
    monkeypatch.setattr(instrumented, "clocks", lambda device: said.append("clock") or clock)
    warmed_up = instrumented.warmed_up
    monkeypatch.setattr(instrumented, "warmed_up", lambda *a: (warmed_up(*a), said.append("warmed up"))[0])
    sides = ["input_type=tensor,subclass", "memory_format=contiguous", "launcher=debug", "tracker.mode=disabled"]
    result = launch_here(*TINY, *sides, f"runs_dir={tmp_path}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert said[:3] == ["warmed up", "warmed up", "clock"], "two sides in one process"


def test_a_rapl_counter_this_run_cannot_read_is_left_out_once_not_tried_each_block(tmp_path):
    """energy_uj is often root's alone while its range is anyone's: a counter unread is none (here a folder)."""
    from perfsweep.train.host_state import rapl_packages

    _rapl(tmp_path, 1.0)
    counter = tmp_path / "sys/class/powercap/intel-rapl:0/energy_uj"
    counter.unlink()
    counter.mkdir()
    assert rapl_packages(tmp_path) == []
    assert HostReader(root=tmp_path, cpus={0}).read().energy_uj is None


def test_blocks_without_a_gpus_energy_have_no_energy_source():
    unread = [HostBlock(1.0, 2, 1.0, gpu=GpuBlock(energy_j=None, energy_source=None)) for _ in range(2)]
    assert HostState.of(unread).energy_source is None, "not the string 'None'"
    mixed = [HostBlock(1.0, 2, 1.0, gpu=GpuBlock(energy_j=j, energy_source=COUNTER)) for j in (1.0, 2.0)]
    assert HostState.of(mixed).energy_source == COUNTER and HostState.of(mixed).energy_j == 3.0


@pytest.mark.parametrize("query", ["nvmlDeviceGetPowerUsage", "nvmlDeviceGetViolationStatus"])
def test_a_stop_that_comes_as_the_gpu_is_read_stops_the_run(query, monkeypatch):
    """The run's time limit or the launch's budget may fire inside an NVML query: it is no NVML error to pass over."""
    nvml = StandInNvml()

    def stopped(*args):
        raise BudgetSpent("launcher.budget_s: the launch's budget ran out")

    monkeypatch.setattr(nvml, query, stopped, raising=False)
    with pytest.raises(BudgetSpent):
        GpuReader(nvml, "handle").read()
