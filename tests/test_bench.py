"""The bench scripts run (smoke sizes, no figures asserted: figures are for people, not for pass/fail)."""

import subprocess
import sys

from tests.conftest import ROOT


def test_plan_scale_bench_prints_its_stages():
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "plan_scale.py"), "--runs", "100", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    assert out.startswith("100 runs, median of 1")
    assert all(f"\n{stage}" in out for stage in ("plan", "validate", "write", "total"))
