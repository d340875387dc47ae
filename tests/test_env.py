"""What a run records of its surroundings: versions, code, and other work on its GPU."""

import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
import torch

from perfsweep import records
from perfsweep.train.env import environment, gpu_uuid, lineage, neighbours, parse_compute_apps
from perfsweep.train.instrumented import execute
from tests.helpers import ROOT, TINY, launch_here

ENV = "perfsweep.train.env"

# nvidia-smi's answer on a two-GPU host (typed here: no GPU can exist on the test machine).
COMPUTE_APPS = """\
GPU-1b6a2b31-aaaa-bbbb-cccc-000000000001, 4242, python, 1234
GPU-1b6a2b31-aaaa-bbbb-cccc-000000000001, 777, /usr/bin/other_job, 20480
GPU-99999999-aaaa-bbbb-cccc-000000000002, 888, python, [N/A]
"""


def test_other_processes_on_the_runs_gpu_are_found():
    found = parse_compute_apps(COMPUTE_APPS, "1b6a2b31-aaaa-bbbb-cccc-000000000001", own={4242})
    assert found == [{"pid": 777, "name": "/usr/bin/other_job", "used_mib": 20480}]


def test_the_runs_job_and_launcher_are_not_work_beside_it():
    # the launcher (4242) holds a CUDA context from its device checks; the run itself is 4300
    found = parse_compute_apps(COMPUTE_APPS, "1b6a2b31-aaaa-bbbb-cccc-000000000001", own={4300, 4242, 1})
    assert [row["pid"] for row in found] == [777]
    here = lineage(os.getpid())
    assert {os.getpid(), os.getppid()} <= here and lineage(os.getppid()) == here - {os.getpid()}
    child = subprocess.Popen(["sleep", "5"])  # as a launcher's run descends from it
    try:
        assert lineage(child.pid) == here | {child.pid}
    finally:
        child.kill()
        child.wait()


def test_no_other_process_means_an_empty_list():
    assert parse_compute_apps(COMPUTE_APPS, "99999999-aaaa-bbbb-cccc-000000000002", own={888}) == []
    assert parse_compute_apps("", "x", own={1}) == []


def test_on_cpu_gpu_neighbours_are_unknown_and_load_is_recorded():
    seen = neighbours(torch.device("cpu"))
    assert seen["gpu_processes"] is None and len(seen["loadavg"]) == 3


def test_environment_names_the_machine_and_code():
    env = environment(torch.device("cpu"))
    assert env["cpu"] and env["cpu_count"] == os.cpu_count() and env["python"]
    assert torch.__version__.startswith(env["packages"]["torch"])
    assert env["code"]["path"] and "commit" in env["code"]


def test_a_gpu_is_named_by_its_uuid_as_nvidia_smi_writes_it(monkeypatch):
    # torch's device properties, faked (no GPU here): torch writes the UUID bare, NVML and nvidia-smi with "GPU-"
    bare = "1b6a2b31-aaaa-bbbb-cccc-000000000001"
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace(uuid=bare))
    assert gpu_uuid(torch.device("cuda")) == f"GPU-{bare}"
    assert parse_compute_apps(COMPUTE_APPS, gpu_uuid(torch.device("cuda")), own={4242})[0]["pid"] == 777


@pytest.mark.slow
def test_a_process_start_is_read_to_the_clock_tick_not_a_second_early():
    """/proc/stat's boot time is whole seconds: a start counted from it was up to 1 s early (a fixed bias in every
    recorded start-up on one boot). Counted on the boot clock, it falls between the parent's clock readings."""
    before = time.time()
    out = subprocess.run(
        [sys.executable, "-c", f"import time; from {ENV} import process_started_at as s; print(s(), time.time())"],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    started, child_now = map(float, out.stdout.split())
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert before - 2 * tick <= started <= child_now


@pytest.mark.slow
def test_a_forked_runs_start_up_counts_from_its_fork(tiny_plan):
    (spec,) = tiny_plan("input_type=tensor", "memory_format=contiguous").runs
    run_dir = Path(spec.config.runs_dir) / spec.sweep_name / spec.name
    forked_at = time.time() - 100  # as a job would pass it, its fork long before the run's first step
    execute(spec, run_dir, "id", {"parallelism": 1, "ready_since": forked_at})
    status = records.read_status(run_dir)
    assert status.state == "done" and 100 <= status.timing["startup_s"] < 100 + 60
    assert "ready_since" not in records.read_json(run_dir / records.STATUS), "how it was launched, not a status field"


@pytest.mark.slow
def test_runs_one_after_another_in_a_process_count_their_start_up_from_the_run_before(tmp_path):
    """launcher=debug runs each run in the launcher's process, a pack each: the first run's start-up counts from
    the process's start (this test worker's: its imports alone take seconds), the second's from the first's end.
    Counted both from the process's start, the two would differ by one short run only."""
    args = [*TINY, "input_type=tensor", "memory_format=contiguous,channels_last", "tracker.mode=disabled"]
    assert launch_here(*args, "launcher=debug", f"runs_dir={tmp_path}").returncode == 0
    statuses = [records.read_status(p.parent) for p in (tmp_path / "default").glob("*/status.json")]
    since_the_run_before, since_the_process_start = sorted(s.timing["startup_s"] for s in statuses)
    assert since_the_run_before < since_the_process_start / 2
