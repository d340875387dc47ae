"""scripts/gpu-check plans every GPU stage on any machine: the dry run composes and checks each sweep with
device=cuda, prints each step's command and an estimate, and runs nothing (the stages themselves need a GPU)."""

import subprocess

from bench import gpu_check
from tests.conftest import ROOT


def test_the_dry_run_plans_every_stage_and_runs_nothing(tmp_path):
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu-check"), "all", "--dry-run"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("stage ")] == [
        f"stage {stage}" for stage in gpu_check.STAGES
    ]
    for sweep in gpu_check.SEED_SWEEPS + gpu_check.TIMM_SWEEPS:
        assert f"launch.py sweep={sweep} steps=30 warmup_steps=10" in out and "device=cuda" in out
    assert "-m pytest -m gpu" in out and "bench.overhead --synced" in out and "compile=eager,default," in out
    assert "nothing stops the stages; nothing was run" in out
    assert not (ROOT / "results" / "GPU-torchVERSION").exists() and not list(tmp_path.iterdir())


def test_a_stage_that_a_check_stops_is_reported():
    bad = gpu_check.Step("bad", ["true"], sweep=["sweep=subclass_gpu", "input_type=nosuch", "device=cuda"])
    seconds, notes = gpu_check.plan_step(bad)
    assert seconds == 0 and any("input_type/nosuch" in note for note in notes)
