"""Property-based tests of the command line (hypothesis): generated overrides of every shape (real keys and made-up
ones, values of any characters, brackets, quotes, sweeps, encodings) planned and checked as a launch plans and checks
them. The property: a refusal, exit status 2, that says why, with no traceback and nothing written; never a crash.

PERFSWEEP_FUZZ_EXAMPLES=N tries N inputs (default 50: about 15 s); the count tried is printed at the end of a test
run.
"""

import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import EXAMPLES, TRIED, launch_here

KEYS = (
    "model", "model.name", "model.source", "model.image_size", "model.batch_size", "memory_format", "precision",
    "precision.autocast_dtype", "input_type", "compile", "compile.mode", "optim.lr", "workload", "workload.size",
    "steps", "warmup_steps", "seed", "threads", "device", "repeats", "order", "sweep_name", "label", "profile",
    "launcher.parallelism", "launcher.timeout_min", "launcher.timeout_retries", "launcher.gpus", "launcher.setup",
    "launcher.sbatch_extra", "launcher.isolation", "launcher.runs_per_job", "tracker", "tracker.mode",
    "tracker.project", "hydra.job.name",
)  # fmt: skip
# Characters that mean something to the grammar, and some that mean nothing to it.
ALPHABET = string.ascii_letters + string.digits + " ,.=:+-_*~'\"()[]{}$\\/@#%é\u00a0\u200b\n\t\x00\x7f"

values = (
    st.text(ALPHABET, max_size=12)
    | st.integers(-(2**70), 2**70).map(str)
    | st.floats().map(repr)
    | st.lists(st.text(string.ascii_letters + ",", max_size=5), max_size=3).map(lambda items: f"[{','.join(items)}]")
    | st.sampled_from(["null", "true", "False", "range(0,3)", "choice(a,b)", "${steps}", "???", "-1", "0", "1e400"])
)
overrides = st.builds(
    lambda prefix, key, value: f"{prefix}{key}={value}",
    st.sampled_from(["", "", "", "+", "++", "~"]),
    st.sampled_from(KEYS) | st.text(string.ascii_letters + "._", min_size=1, max_size=10),
    values,
) | st.text(ALPHABET, min_size=1, max_size=15)

FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.slow
@FUZZ
@given(st.lists(overrides, min_size=1, max_size=3))
def test_any_command_line_is_refused_clearly_or_planned_never_crashed(tmp_path_factory, generated):
    """`launcher.wait=false` on the local launcher is itself refused, last, so that no sweep ever runs here: every
    command line ends in the checks' refusal (exit 2), whatever else it holds."""
    runs = tmp_path_factory.mktemp("runs")
    pinned = ["launcher=local", "launcher.name=local", "launcher.wait=false", f"runs_dir={runs}"]
    result = launch_here("steps=1", *generated, *pinned)
    TRIED["command-line overrides: inputs tried (plan, checks)"] += 1
    assert result.returncode == 2, (generated, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and result.stderr.strip(), (generated, result.stderr)
    assert not any(runs.iterdir()), generated
