"""The perfsweep command as a user runs it: a real local sweep through submitit, relaunching it, bad input,
Hydra's flags, the table, resume."""

import itertools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfsweep import records, typed_command
from perfsweep.commands import cli, launching
from perfsweep.launcher.process_end import CLOSED_OUTPUT
from perfsweep.launcher.slots import cpu_shares
from perfsweep.sweeps.plan import build_plan
from perfsweep.train.inputs import INPUT_TYPES
from tests import golden
from tests.helpers import (
    EXAMPLE,
    FAILS_AT_SEED_1,
    FAST,
    ONE_OF_TWO_FAILS,
    ROOT,
    TINY,
    assert_one_of_two_failed,
    launch,
    launch_here,
)


@pytest.fixture
def runs_dir(tmp_path):
    return tmp_path / "runs"


def _runs(sweep: Path) -> dict[str, records.Status]:
    return {p.parent.name: records.read_status(p.parent) for p in sorted(sweep.glob("*/status.json"))}


@pytest.mark.slow
def test_a_local_sweep_runs_every_run_to_done_each_in_a_process_of_its_own(local_sweep):
    sweep, *_ = local_sweep
    statuses = _runs(sweep)
    assert [s.state for s in statuses.values()] == ["done"] * 3
    assert [s.parallelism for s in statuses.values()] == [2] * 3
    assert len({s.pid for s in statuses.values()}) == 3, "each run in its own process"
    assert all((sweep / name / records.STEPS).exists() for name in statuses)
    assert sorted(records.read_manifest(sweep)["runs"]) == list(statuses)


def test_a_local_sweep_forks_its_runs_from_one_warm_job_of_submitits_local_executor(local_sweep):
    sweep, *_ = local_sweep
    jobs = records.submitted_jobs(sweep)
    assert {job["launcher"] for job in jobs.values()} == {"local"} and len(jobs) == 3
    assert list((sweep / ".submitit").glob("*_log.out")), "each run went through submitit's local executor"
    (job_id,) = {job["job_id"] for job in jobs.values()}  # one warm job forked every run (launcher.isolation=fork)
    assert int(job_id) not in {s.pid for s in _runs(sweep).values()}


def test_a_local_sweeps_jobs_run_the_launchs_snapshot_of_the_code(local_sweep):
    sweep, *_ = local_sweep
    (snapshot,) = (sweep / ".code").iterdir()
    code = snapshot / "perfsweep"
    assert (code / "train" / "instrumented.py").read_text() == (ROOT / "train" / "instrumented.py").read_text()
    for name in _runs(sweep):
        env = records.read_json(sweep / name / records.ENV)
        assert env["code"]["path"] == str(code), "jobs run the launch's snapshot, not the working tree"
        assert env["code"]["commit"] and env["code"]["source"] == str(ROOT)


def test_a_local_sweep_prints_its_progress_its_table_and_where_its_records_are(local_sweep):
    sweep, result, *_ = local_sweep
    assert "[3/3] done" in result.stdout
    table = result.stdout[result.stdout.index("| input_type") :]
    assert "| tensor " in table and "| subclass " in table and "1.00x" in table
    assert f"records: {sweep}" in result.stdout


def test_local_runs_are_pinned_one_at_a_time_to_each_listed_gpu_and_to_a_share_of_the_cpus(local_sweep):
    sweep, *_ = local_sweep
    by_gpu: dict[str, list] = {}
    by_share: dict[tuple, list] = {}
    for name in records.submitted_jobs(sweep):
        env = records.read_json(sweep / name / records.ENV)
        status = records.read_status(sweep / name)
        span = (status.started_at, status.finished_at)
        by_gpu.setdefault(env["cuda_visible_devices"], []).append(span)  # the run saw this GPU alone
        by_share.setdefault(tuple(env["cpus"]), []).append(span)
        assert env["torch_threads"] == len(env["cpus"]), "as many threads as the CPUs it was given"
    assert sorted(by_gpu) == ["0", "1"] and sorted(len(spans) for spans in by_gpu.values()) == [1, 2]
    assert sorted(by_share) == sorted(cpu_shares(2)), "two runs at once: each on its half of this host's CPUs"
    for spans in [*by_gpu.values(), *by_share.values()]:  # never two runs on one GPU, or one share, at once
        spans.sort()
        assert all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(spans))


def test_launching_a_done_sweep_again_runs_nothing_and_its_table_prints_again(local_sweep, tmp_path):
    sweep = Path(shutil.copytree(local_sweep[0], tmp_path / "runs" / "default"))  # others read the shared one
    args = [*TINY, "input_type=tensor,subclass,tensorbase", "memory_format=contiguous", f"runs_dir={sweep.parent}"]
    args += ["launcher.parallelism=2", "launcher.gpus=[0,1]", "pairing=process"]
    finished = {name: status.finished_at for name, status in _runs(sweep).items()}
    again = launch_here(*args, "tracker.mode=disabled")
    assert again.returncode == 0, again.stderr
    assert {name: status.finished_at for name, status in _runs(sweep).items()} == finished, "nothing ran again"
    said = again.stdout.split("\nmodel=")[0]  # the table below is the machine's
    golden.says("a done sweep launched again", said, {sweep.parent: "<runs>"})
    table = launch_here("table", str(sweep))
    assert table.returncode == 0 and "| subclass " in table.stdout
    csv = launch_here("table", str(sweep), "--csv")
    header, *rows = csv.stdout.strip().splitlines()
    assert header.startswith("input_type,runs,data ms") and len(rows) == 3
    status = launch_here("status", str(sweep))
    assert status.stdout.startswith(f"{sweep}: 3 runs, 3 done") and status.returncode == 0
    assert status.stdout.rstrip().endswith(f"all done: `perfsweep table {sweep}` gives their figures"), status.stdout


@pytest.mark.slow
def test_a_debug_launch_records_its_runs_as_run_one_at_a_time_as_they_are(runs_dir):
    """Its runs share the launcher's process, whatever launcher.parallelism says (local runs record theirs: the
    local sweep above)."""
    result = launch_here(
        *TINY,
        "input_type=tensor,subclass",
        "memory_format=contiguous",
        "launcher=debug",
        "launcher.parallelism=2",
        "tracker.mode=disabled",
        f"runs_dir={runs_dir}",
    )
    assert result.returncode == 0, result.stderr
    statuses = [records.read_status(p.parent) for p in (runs_dir / "default").glob("*/status.json")]
    assert [s.parallelism for s in statuses] == [1, 1]
    assert "| runs one at a time |" in result.stdout


def test_bad_input_starts_nothing(runs_dir):
    result = launch_here(*TINY, "input_type=tensor,nosuch", "model.name=resnet_nosuch", f"runs_dir={runs_dir}")
    assert result.returncode == 2
    golden.says("launch: an input type and a model that do not exist", result.stderr, {runs_dir: "<runs>"})
    assert not runs_dir.exists()
    result = launch_here(*TINY, "model.name=resnet_nosuch", "precision=tf32", "device=cpu", f"runs_dir={runs_dir}")
    assert result.returncode == 2
    golden.says("launch: a model that does not exist and TF32 on a CPU", result.stderr, {runs_dir: "<runs>"})
    assert not runs_dir.exists()


@pytest.mark.slow
def test_a_failed_run_is_reported_and_the_rest_go_on(runs_dir):
    result = launch_here(*TINY, *ONE_OF_TWO_FAILS, "launcher=debug", f"runs_dir={runs_dir}")
    assert_one_of_two_failed(result, runs_dir / "default")
    assert re.search(r"FAILED resnet18\S+-model.in_chans=4-\w+: ValueError", result.stdout), "which configuration"
    assert "NO FIGURES model.in_chans=4: none of its runs is done, so the table has no row for it" in result.stdout
    said = f"1 configuration of {runs_dir / 'default'} without a done run, so without figures: model.in_chans=4"
    for command, *options in (["table"], ["table", "--csv"], ["export", "--format", "bmf"], ["report"]):
        shown = launch_here(command, str(runs_dir / "default"), *options)
        assert shown.returncode == 1 and said in shown.stderr, (command, shown.stderr)
    assert (runs_dir / "default" / "report.html").is_file(), "what was measured is written all the same"


def test_hydra_flags_work_as_in_any_hydra_app():
    help_text = launch_here("--help")
    assert help_text.returncode == 0
    assert "perfsweep" in help_text.stdout and "input_type: " + ", ".join(sorted(INPUT_TYPES)) in help_text.stdout
    one = ("input_type=tensor", "memory_format=contiguous", "repeats=1")
    cfg = launch_here("run", "--cfg", "job", "model=resnet50", "precision=amp_bf16", *one)
    assert cfg.returncode == 0, cfg.stderr
    assert "name: resnet50" in cfg.stdout and "autocast_dtype: bfloat16" in cfg.stdout
    assert cfg.stdout.startswith("# the sweep's one run, "), cfg.stdout.splitlines()[0]


def test_help_says_its_config_comes_before_the_sweep_file_and_how_to_see_a_runs():
    """The default sweep runs batch 16 at 32 px; the root config's batch 64 at 224 px never runs as shown."""
    shown = " ".join(launch_here("--help").stdout.split())
    assert "== Config == The config before the sweep file: sweeps/default.yaml sets its own values over it" in shown
    first_run = launch_here("--cfg", "job").stdout
    assert "batch_size: 16" in first_run and "image_size: 32" in first_run, "what --help points to"


def test_help_lists_a_config_dirs_options_as_groups_and_its_sweep_files_as_sweeps():
    """A config dir's sweeps/ holds sweep files (sweep=NAME): Hydra would list it as a group no override selects."""
    shown = launch_here("--config-dir", str(EXAMPLE / "perf"), "--help")
    assert shown.returncode == 0, shown.stderr
    groups = shown.stdout.split("== Configuration groups ==")[1].split("== Config ==")[0]
    assert "model: " in groups and "smallcnn" in groups and "sweeps" not in groups, groups
    assert "Sweep files (sweep=NAME): " in shown.stdout and "imagelib_step" in shown.stdout.splitlines()[-1]


def test_the_config_dir_hydra_reads_holds_its_options_alone(tmp_path):
    """At a project's root a config dir holds a virtual environment: --help copies its options, not the tree."""
    from perfsweep.commands.hydra import config_dir

    for root in ("one", "two"):
        for path in ("sweeps/s.yaml", "model/m.yaml", "model/timm/r.yaml", ".venv/lib/a.yaml", "a/b/c/d.yaml"):
            (tmp_path / root / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / root / path).write_text(f"name: {root}\n")
    copy = config_dir((tmp_path / "one",))
    kept = sorted(str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file())
    assert kept == ["model/m.yaml", "model/timm/r.yaml"], kept
    other = config_dir((tmp_path / "two",))
    assert other != copy and (other / "model" / "m.yaml").read_text() == "name: two\n", "each dir its own copy"


def test_help_lists_every_command_of_the_parser_with_what_it_does():
    shown = launch_here("--help")
    assert shown.returncode == 0, shown.stderr
    header = " ".join(shown.stdout.split("== Configuration groups ==")[0].split())
    missing = [name for name, about in cli.commands().items() if f" {name} {' '.join(about.split())}" not in header]
    assert not missing, f"--help does not list {missing}"


@pytest.mark.parametrize(
    ("words", "unbuffered"),
    [("--help", False), ("--help", True), ("status --help", False)],  # Hydra's help; argparse's, which exits
)
def test_a_command_whose_reader_has_gone_ends_quietly(words, unbuffered):
    """`perfsweep --help | head -3`, where `head` has gone before the command writes: nothing said, status 120."""
    reader, writer = os.pipe()
    os.close(reader)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"} | (
        {"PYTHONUNBUFFERED": "1"} if unbuffered else {}
    )
    try:
        shown = subprocess.run(
            [sys.executable, str(ROOT / "launch.py"), *words.split()],
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=60,
        )
    finally:
        os.close(writer)
    assert (shown.returncode, shown.stderr) == (CLOSED_OUTPUT, "")


def test_ctrl_c_in_a_view_ends_with_a_line_and_the_shells_status_not_a_traceback(tmp_path):
    """A view of thousands of runs takes seconds to draw: a Ctrl-C there is the user's, not a crash."""
    interrupted = (
        "from unittest import mock; import launch; mock.patch.object(launch, 'main', side_effect=KeyboardInterrupt)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", f"{interrupted}.start(); launch.cli()"], cwd=ROOT, capture_output=True, text=True
    )
    assert (shown.returncode, shown.stderr) == (130, "\nperfsweep: interrupted\n")


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        (
            "import launch; mock.patch.object(launch, 'main', side_effect=KeyError('x')).start(); launch.cli()",
            "KeyError",
        ),
        (
            "import launch; mock.patch.object(launch, 'main', side_effect=BrokenPipeError()).start(); launch.cli()",
            "Broken",
        ),
        (
            "import runpy, sys; from perfsweep.commands import cli; sys.argv = ['x', 'history', '.']; "
            "mock.patch.object(cli, 'run', side_effect=KeyError('x')).start(); "
            "runpy.run_module('perfsweep.commands', run_name='__main__')",
            "KeyError",
        ),
    ],
    ids=["perfsweep", "another-pipe", "python-m-commands"],
)
def test_an_error_perfsweep_did_not_foresee_exits_70_never_a_verdicts_status(entry, error):
    """compare's 1 is a regression: a crash that exited 1 would fail a CI gate as a slowdown would.
    A broken pipe whose reader is not the command's output's is such an error too."""
    shown = subprocess.run(
        [sys.executable, "-c", f"from unittest import mock; {entry}"], cwd=ROOT, capture_output=True, text=True
    )
    assert shown.returncode == 70, shown.stderr
    assert shown.stderr.startswith("perfsweep: an error it did not foresee ended it (exit status 70)"), shown.stderr
    assert shown.stderr.rstrip().splitlines()[-1].startswith(error), "the error last, where one line is read"


def test_a_config_dir_without_its_folder_is_a_bad_argument_not_a_regression():
    shown = subprocess.run([sys.executable, "launch.py", "compare", "--config-dir"], cwd=ROOT, capture_output=True)
    assert (shown.returncode, shown.stderr) == (2, b"perfsweep: --config-dir takes a folder: --config-dir DIR\n")


def test_commands_are_one_parser_and_name_what_is_wrong(runs_dir):
    typo = launch_here("stauts", str(runs_dir))
    assert typo.returncode == 2 and "invalid choice: 'stauts'" in typo.stderr and "'status'" in typo.stderr
    missing = launch_here("table", str(runs_dir))
    assert missing.returncode == 2 and f"no sweep folder at {runs_dir}" in missing.stderr
    for words, said in ((["--repeats=3"], "repeats=3"), (["--repeats", "3"], "repeats=3")):
        dashed = launch_here(*words)
        assert dashed.returncode == 2 and f"a setting is KEY=VALUE, without dashes: {said}" in dashed.stderr, words
    runs_dir.mkdir()
    for command in ("table", "runs", "replicates", "status", "report"):  # a folder, but none of a sweep
        empty = launch_here(command, str(runs_dir))
        assert empty.returncode == 2 and f"{runs_dir} is no sweep folder: it holds no sweep.json" in empty.stderr


def test_online_tracking_without_a_key_is_refused(runs_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "")
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    result = launch_here(*TINY, "tracker.mode=online", f"runs_dir={runs_dir}")
    assert result.returncode == 2
    golden.says("online tracking without a key", result.stderr, {runs_dir: "<runs>"})
    assert not runs_dir.exists()


@pytest.mark.slow
@pytest.mark.parametrize("typed", ["perfsweep", "python launch.py"])
def test_advice_names_the_command_the_user_ran_in_the_launch_and_in_its_jobs(typed, tmp_path, user_module):
    """`perfsweep` is the installed command (pyproject's console script), `python launch.py` the script. A run's
    job is a process of its own: its warning that W&B was left behind names the command too."""
    command = (
        [str(Path(sys.executable).with_name("perfsweep"))] if typed == "perfsweep" else [sys.executable, "launch.py"]
    )
    sweep = tmp_path / "default"
    folder = user_module("fails_at_seed_1", FAILS_AT_SEED_1).parent
    one_fails = ["workload._target_=fails_at_seed_1.Step", "seed=0,1"]
    args = [*one_fails, "steps=2", "warmup_steps=1", "repeats=1", "tracker.timeout_s=0.001", f"runs_dir={tmp_path}"]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # venv activated
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    launched = subprocess.run([*command, *args], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert launched.returncode == 1, launched.stdout + launched.stderr
    (done,) = [r for r in records.load_sweep(sweep) if r.state == records.DONE]
    (warning,) = done.status.warnings
    assert f"`{typed} sync {sweep}` uploads its offline W&B run later" in warning
    status = subprocess.run(
        [*command, "status", str(sweep)], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env
    )
    assert f"re-run what is not done: {typed} resume {sweep}" in status.stdout, status.stdout + status.stderr


def test_advice_names_python_and_perfsweep_by_their_paths_where_the_shell_would_run_others(tmp_path, monkeypatch):
    """A venv not activated: the shell's `python` is another, and `perfsweep` is not on its PATH."""
    venv = Path(sys.executable).parent
    monkeypatch.setattr(sys, "argv", ["launch.py"])
    monkeypatch.setenv("PATH", f"{venv}{os.pathsep}/usr/bin")
    assert typed_command() == "python launch.py"
    monkeypatch.setenv("PATH", str(tmp_path))
    assert typed_command() == f"{sys.executable} launch.py"
    monkeypatch.setattr(sys, "argv", [str(venv / "perfsweep")])
    assert typed_command() == str(venv / "perfsweep")
    monkeypatch.setenv("PATH", str(venv))
    assert typed_command() == "perfsweep"


@pytest.mark.slow
def test_resume_runs_a_failed_run_again_and_keeps_its_history(runs_dir):
    args = [*TINY, "input_type=tensor", "memory_format=contiguous", "tracker.mode=disabled", "launcher=debug"]
    (spec,) = build_plan([*args, f"runs_dir={runs_dir}"]).runs
    run_dir = runs_dir / "default" / spec.name
    (run_dir / records.STEPS).mkdir(parents=True)  # a transient fault: the run cannot replace its step rows
    first = launch_here(*args, f"runs_dir={runs_dir}")
    assert first.returncode == 1 and "IsADirectoryError" in first.stdout
    (run_dir / records.STEPS).rmdir()

    resumed = launch_here("resume", str(runs_dir / "default"))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "[1/1] done" in resumed.stdout and "1 done, 0 failed" in resumed.stdout
    assert "[1/1] failed" not in resumed.stdout, "the earlier failure is history, not this launch's"
    status = records.read_status(run_dir)
    assert status.state == "done"
    assert [(a["state"], a["error"]) for a in status.attempts] == [("failed", "IsADirectoryError")]


def test_resume_of_a_folder_that_holds_no_sweep_is_refused_not_called_done(tmp_path):
    """A script that resumes a mistyped path and checks the exit status must not read success."""
    (tmp_path / "empty").mkdir()
    refused = launch_here("resume", str(tmp_path / "empty"))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"{tmp_path / 'empty'} is no sweep folder: it holds no sweep.json and no run's folder" in refused.stderr
    assert "every run is done" not in refused.stdout


@pytest.mark.gpu
def test_a_run_pinned_to_a_gpu_records_which_one(runs_dir):
    args = [*TINY, "input_type=tensor", "memory_format=contiguous", "tracker.mode=disabled", "launcher.gpus=[0]"]
    result = launch(*args, "device=cuda", f"runs_dir={runs_dir}")
    assert result.returncode == 0, result.stdout + result.stderr
    (run_dir,) = [p.parent for p in (runs_dir / "default").glob("*/env.json")]
    env = records.read_json(run_dir / records.ENV)
    assert env["cuda_visible_devices"] == "0" and env["gpu"]["uuid"].startswith(("GPU-", "MIG-"))


@pytest.mark.slow
def test_a_list_of_gpus_is_one_value_and_other_launchers_refuse_it(runs_dir):
    swept = launch_here(*TINY, "launcher.gpus=0,1", f"runs_dir={runs_dir}")
    assert swept.returncode == 2 and "launcher.gpus=0: Invalid value" in swept.stderr and "KEY=[a,b]" in swept.stderr
    slurm = launch_here(*TINY, "launcher=debug", "launcher.gpus=[1,1]", f"runs_dir={runs_dir}")
    assert slurm.returncode == 2 and "launcher.gpus=[1, 1] must list distinct GPU indices" in slurm.stderr


@pytest.mark.parametrize(("launcher", "said"), [("local", "Runs on this host were stopped"), ("slurm", "go on in the")])
def test_an_interrupted_launch_says_whether_its_jobs_stopped(launcher, said, capsys, tmp_path):
    """A Slurm launcher's jobs outlive it: Ctrl-C stops the launcher that follows them, not them."""
    plan = build_plan([*TINY, f"launcher={launcher}", f"runs_dir={tmp_path}"])
    assert launching._stopped(KeyboardInterrupt(), plan) == 130
    assert said in capsys.readouterr().err


def test_a_sigterm_as_the_command_ends_ends_it_as_killed_not_with_its_exit_status(tmp_path):
    """An exit handler (W&B's finish) still running when SIGTERM comes: the command must not report success."""
    code = (
        "import atexit, os, signal, sys\n"
        f"sys.argv = ['perfsweep', 'status', {str(tmp_path)!r}]\n"
        "import json, pathlib; pathlib.Path(sys.argv[2], 'sweep.json').write_text(json.dumps({'runs': {}}))\n"
        "from perfsweep.launch import cli\n"
        "atexit.register(lambda: os.kill(os.getpid(), signal.SIGTERM))\n"
        "cli()\n"
    )
    ended = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert ended.returncode == -15, ended.stdout + ended.stderr


def test_a_launch_into_a_folder_of_other_launches_runs_names_them_beside_its_own_table(tmp_path):
    """A size added to the folder, as compare advises to match two sweeps: the launch's table is its own runs'."""
    args = [*FAST, "tracker.mode=disabled", "launcher=debug", f"runs_dir={tmp_path}"]
    assert launch_here(*args).returncode == 0
    added = launch_here(*[a for a in args if not a.startswith("workload.size=")], "workload.size=20")
    assert added.returncode == 0, added.stderr
    said = f"{tmp_path / 'default'} also holds 1 run of other launches: `perfsweep table {tmp_path / 'default'}` "
    assert said + "shows every run of the folder" in added.stdout, added.stdout
