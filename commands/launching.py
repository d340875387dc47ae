"""Launch a plan once: check it, build its environments, run it, then show its views."""

import shlex
import sys
import time
from pathlib import Path

from perfsweep import user_command
from perfsweep.commands.views import show_sweep
from perfsweep.launcher.process_end import interrupted
from perfsweep.records.words import counted, listed

MULTIRUN = ("-m", "--multirun")  # every launch is a sweep: accepted, changes nothing


def said(plan) -> None:
    """What the planner says before anything runs: a value or an axis that gave way, and to what."""
    for line in plan.notices:
        print(f"perfsweep: {line}", file=sys.stderr)


def launch_plan(
    plan_of,
    argv: list[str],
    show: bool = True,
    quiet_envs: bool = False,
    progress=None,
    shown: list[str] = (),
    pinned: dict | None = None,
) -> int:
    """Plan by calling `plan_of`, check the plan, build its environments, and launch it.

    It then prints the views of the records, or where to follow the jobs.
    With `show` false, it prints no views.
    `quiet_envs` says the environments were built and reported before.
    `progress` counts the runs over several launches (launcher/progress.py); by default, this one's alone.
    `shown` names the runs the views show, where they are more than the plan's: a resume's sweep, done runs included.
    `pinned` keeps the code of one command's launches (launcher/submit.py `launch`).
    A budget (launcher.budget_s) counts from here: the planning, checks and builds are the launch's time too.
    """
    from perfsweep.launcher.submit import launch

    began = time.time()
    plan = None
    try:
        plan = plan_of()
        if not plan.runs:
            print(f"{plan.sweep_dir}: every run is done; nothing to run")
            return 0
        pythons = _checked(plan, show, quiet_envs)
        _announce(plan)
        outcome = launch(plan, argv, _runner(), pythons, progress, began=began, pinned=pinned)
    except _stops() as error:
        return _stopped(error, plan)
    return _ended(plan, outcome, show, shown)


def _checked(plan, show: bool, quiet_envs: bool) -> dict:
    """The plan's problems raised as a PlanError; else the Python of each environment its runs need, built."""
    from perfsweep.launcher import envs
    from perfsweep.launcher.validate import validate
    from perfsweep.sweeps.plan import PlanError
    from perfsweep.train.checks import problems as run_problems

    problems = validate(plan, run_problems)
    if problems:
        raise PlanError(problems)
    if show:  # (a sweep in rounds says it once, before its first: commands/auto.py)
        said(plan)
    try:
        say = (lambda line: None) if quiet_envs else print
        return envs.for_plan(plan.runs, plan.settings.launcher.name, say)
    except envs.EnvError as error:
        raise PlanError([str(error)]) from error


def _announce(plan) -> None:
    """The sweep's folder, its runs and how many run at once; how its comparisons' sides share processes; its budget."""
    from perfsweep.launcher.backends import backend_for
    from perfsweep.sweeps.pairing import described

    if line := floor_line(plan):
        print(line)
    print(f"sweep {plan.sweep_dir}: {counted(len(plan.runs), 'run')}, {plan.settings.launcher.parallelism} at a time")
    if pairing := described(list(plan.runs)):
        print(pairing)
    budget = plan.settings.launcher.budget_s
    if budget is not None and backend_for(plan.settings.launcher).on_this_host:
        where = plan.origin("launcher.budget_s")
        print(
            f"budget: launcher.budget_s={budget:g} ({where}): no run starts that would end after {budget:g} s, and "
            "none measures past it; launcher.budget_s=null runs every run"
        )


def machine_here(plan) -> tuple[str, bool]:
    """The device the plan's runs would run on, as records name it, and whether it is a GPU."""
    from perfsweep.records import noise
    from perfsweep.train.host_settings import gpu_name

    gpu = gpu_name() if plan.settings.device != "cpu" else None
    return (gpu, True) if gpu else (f"CPU {noise.cpu_model()}", False)


def floor_line(plan) -> str | None:
    """This machine's noise floor, where `perfsweep noise` measured one (records/noise.py); None elsewhere.

    It is of the configuration that measured it.
    It is the paired floor where a comparison's sides share a process, else the floor of runs apart.
    It says where that run's host load is unknown.
    It is the floor of the longest time it kept within the launch's budget (else its shortest), or of 10 minutes.
    It lists a folder and reads one file.
    A launch on other machines (Slurm's nodes) shows none.
    """
    from perfsweep.launcher.backends import backend_for
    from perfsweep.records import noise
    from perfsweep.sweeps.pairing import groups

    runs_dir = Path(plan.settings.runs_dir)
    if not (runs_dir / noise.FOLDER).is_dir() or not backend_for(plan.settings.launcher).on_this_host:
        return None  # a Slurm node is another machine than the one the floor was measured on
    floor = noise.read_floor(runs_dir, noise.machine_kind(*machine_here(plan), noise.torch_version()))
    if floor is None:
        return None
    spread = floor.paired if any(group.paired for group in groups(plan.runs)) else floor.apart
    where = ("runs_dir=", "sweep_name=", "tracker.")  # where it wrote, not what it measured
    measured = shlex.join(
        ["--processes", str(floor.processes), *(o for o in floor.overrides if not o.startswith(where))]
    )
    measured = f"{user_command()} noise {measured}"
    blind = ", though what else ran on its host then is unknown" if noise.host_unknown(floor) else ""
    budget = plan.settings.launcher.budget_s if backend_for(plan.settings.launcher).on_this_host else None
    said_s = noise.SAID_BUDGET_S if budget is None else noise.budget_within(spread, budget)
    during = noise.BUDGETS.get(said_s, f"{said_s} s")
    during += f" (the floor kept nearest this launch's budget, {budget:g} s)" if budget is not None else ""
    return (
        f"this machine decides about {noise.decided(spread, said_s)} in {during} of the configuration that "
        f"`{measured}` measured on {floor.measured[:10]}{blind}"
    )


def _runner():
    """What runs a run in its job: train's run, its ranks and its paired sides."""
    from perfsweep.launcher.run_job import Runner
    from perfsweep.train.instrumented import execute, execute_sides, lazy_imports
    from perfsweep.train.ranks.start import task_rank

    return Runner(execute, imports=lazy_imports, rank=task_rank, execute_sides=execute_sides)


def _stops() -> tuple[type[BaseException], ...]:
    """What ends a launch early; `_stopped` says why."""
    from perfsweep import records
    from perfsweep.launcher.submit import SubmissionFailed
    from perfsweep.launcher.sweepdir import SweepDirError
    from perfsweep.records.lock import SweepLocked
    from perfsweep.sweeps.plan import PlanError

    return PlanError, SweepDirError, SweepLocked, SubmissionFailed, records.RecordWriteError, KeyboardInterrupt


def _stopped(error: BaseException, plan) -> int:
    """Say why the launch ended early, and return its exit status."""
    from perfsweep import records
    from perfsweep.launcher.backends import backend_for
    from perfsweep.launcher.submit import SubmissionFailed

    if isinstance(error, KeyboardInterrupt):
        where = plan.sweep_dir if plan else "SWEEP_DIR"
        said = (
            "Runs on this host were stopped: a running run is pending again (its unfinished steps are dropped; it "
            "starts over), runs not started are pending, done runs are kept. "
            f"`{user_command()} resume {where}` (or the same command) runs what is not done."
        )
        if plan and not backend_for(plan.settings.launcher).on_this_host:
            said = (
                "Jobs already submitted go on in the cluster's queue: "
                f"`{user_command()} status {where}` follows them and names their job ids "
                "(scancel stops them; with --clusters where it names a cluster)."
            )
        print(f"\nperfsweep: {interrupted(error)}. {said}", file=sys.stderr)
        return getattr(error, "status", 130)
    if isinstance(error, SubmissionFailed):
        print(f"perfsweep: {error}", file=sys.stderr)
        return 1
    if isinstance(error, records.RecordWriteError):  # the launcher's own files, before anything was submitted
        print(f"perfsweep: nothing was submitted: {error}", file=sys.stderr)
        return 1
    print(f"perfsweep: nothing was run:\n{error}", file=sys.stderr)
    return 2


def _ended(plan, outcome, show: bool, shown: list[str] = ()) -> int:
    """What the launch did: runs skipped or busy, jobs submitted, or the views; its exit status."""
    if skipped := len(outcome.skipped):
        were = "was" if skipped == 1 else "were"
        print(f"{counted(skipped, 'run')} {were} already done and {were} not run again")
    if busy := len(set(outcome.busy) - set(outcome.stuck)):
        print(
            f"{counted(busy, 'run')} {'is' if busy == 1 else 'are'} still queued or running from an earlier launch; "
            "not submitted again"
        )
    for line, runs in _by_value(outcome.stuck).items():  # a job that will never run them: the launch did not either
        print(f"{counted(len(runs), 'run')} not submitted again: {'its' if len(runs) == 1 else 'their'} job is {line}")
    stuck = 1 if outcome.stuck else 0
    if not outcome.followed and not outcome.job_ids:
        print("nothing submitted")
        return stuck
    if not outcome.followed:
        submitted = len(plan.runs) - len(outcome.skipped) - len(outcome.busy)
        jobs = "job" if len(outcome.job_ids) == 1 else "jobs"
        print(f"submitted {counted(submitted, 'run')} as {jobs} {', '.join(outcome.job_ids)}")
        print(f"follow them: {user_command()} status {plan.sweep_dir}")
        return stuck
    from perfsweep import records
    from perfsweep.launcher.run_states import stranded

    statuses = {spec.name: records.read_status(plan.sweep_dir / spec.name) for spec in plan.runs}
    # the runs the launch's budget (launcher.budget_s) stopped or left unstarted: no failure
    unstarted = {name: status for name, status in statuses.items() if status.over_budget}
    names = list(shown) or list(statuses)  # a resume plans only what is not done: the views show the rest too
    shown_runs = records.load_sweep(plan.sweep_dir, names) if unstarted else []
    unmeasured = without_done_runs(shown_runs)
    if show:
        left = stranded(plan.sweep_dir) if outcome.not_done or outcome.busy else None  # as status says of them
        show_sweep(plan.sweep_dir, names, plan.settings.tracker, stranded=left)
        if unstarted:
            print(budget_line(plan, unstarted, unmeasured, shown_runs, set(outcome.skipped)))
    # an earlier launch's runs, in flight still: this launch submitted none of them, so it followed none
    elsewhere = [name for name in set(outcome.busy) - set(outcome.stuck) if statuses[name].state != records.DONE]
    if elsewhere:
        print(
            f"perfsweep: {counted(len(elsewhere), 'run')} of an earlier launch not done: this launch did not follow "
            f"{'it' if len(elsewhere) == 1 else 'them'}; `{user_command()} status {plan.sweep_dir}` does",
            file=sys.stderr,
        )
    return 1 if set(outcome.not_done) - set(unstarted) or unmeasured or stuck or elsewhere else 0


def _by_value(said: dict[str, str]) -> dict[str, list[str]]:
    """The keys of `said` under each value it gives, in order."""
    found: dict[str, list[str]] = {}
    for key, value in said.items():
        found.setdefault(value, []).append(key)
    return found


def without_done_runs(runs: list) -> list[str]:
    """The configurations of these runs that the budget left without a done run, by label: nothing is measured of them.

    A configuration whose runs failed on their own is the failure's, not the budget's.
    """
    from perfsweep import records
    from perfsweep.analysis.groups import configurations, labels

    configs = configurations(runs)
    named = labels(configs)
    return [
        named[c.key]
        for c in configs
        if not any(run.state == records.DONE for run in c.runs) and any(run.status.over_budget for run in c.runs)
    ]


def one_done_run(runs: list) -> tuple[int, int, int]:
    """How many configurations of these runs have one done run, how many have any, and how many there are.

    A configuration with one has within-run intervals, on which no comparison is decided.
    """
    from perfsweep import records
    from perfsweep.analysis.groups import configurations

    done = [sum(run.state == records.DONE for run in c.runs) for c in configurations(runs)]
    return done.count(1), sum(count > 0 for count in done), len(done)


def budget_line(plan, unstarted: dict, unmeasured: list[str], shown_runs: list, skipped: set[str] = frozenset()) -> str:
    """What the budget stopped and left unstarted, and why.

    It says what the host showed, what is decided, and how to run the rest: where more are left than the budget ran,
    the same budget runs part of them.

    `unmeasured`: the configurations without a done run.
    `shown_runs`: the sweep's runs, a resume's done ones included.
    `skipped`: the runs an earlier launch had done, which this one did not run.
    The same budget may leave the unmeasured undone again.
    So the way on is without it.
    """
    from perfsweep import records
    from perfsweep.analysis.statistics.host_flags import taken

    said = []
    for stopped, verb in ((True, "stopped"), (False, "not started")):
        these = [status for status in unstarted.values() if (status.started_at is not None) == stopped]
        if these:
            why = these[0].interrupted.get("reason", "").removeprefix("launcher.budget_s: ")
            said.append(f"{len(these)} {verb} ({why})" if why else f"{len(these)} {verb}")
    runs = records.load_sweep(plan.sweep_dir, [spec.name for spec in plan.runs])
    done = [run for run in runs if run.state == records.DONE]
    ran = sum(run.name not in skipped for run in done)  # what this launch's budget ran to done
    host = taken(done)
    budget = plan.settings.launcher.budget_s
    head = f"launcher.budget_s={budget:g}" if budget is not None else "an earlier launch's launcher.budget_s"
    resume = f"{user_command()} resume {plan.sweep_dir}"
    single, measured, configs = one_done_run(shown_runs)
    if not unmeasured:
        if not single:
            decided = "the sweep's done runs decide"
        elif single == configs:
            decided = "each configuration has one done run: its intervals are within-run, and no comparison is decided"
        else:
            has = "has" if single == 1 else "have"
            decided = f"{single} of {measured} configurations with a done run {has} only one: no comparison with "
            decided += "them is decided"
        then = f"{decided}. `{resume}` (or the same command) runs the rest"
        if not ran:  # the same budget may run none of them again
            then = f"{decided}. This launch's budget ran none to done: `{resume} launcher.budget_s=null` runs the rest"
        elif len(unstarted) > ran:  # at this pace the same budget runs part of them
            then = (
                f"{decided}. {counted(len(unstarted), 'run')} left, where this launch's budget ran {ran} to done: "
                f"`{resume}` (or the same command) runs about as many more; `{resume} launcher.budget_s=null` runs "
                "them all"
            )
    else:
        which = f"{counted(len(unmeasured), 'configuration')} without a done run" if measured else "no run is done"
        then = (
            f"{which}: nothing is decided of {listed(unmeasured)}. `{resume} launcher.budget_s=null` runs them "
            "without a budget; with this one, they may go undone again"
        )
    host = f"; the host: {host}" if host else ""
    return f"perfsweep: {head}: of {counted(len(plan.runs), 'run')}, {' and '.join(said)}{host}; {then}"
