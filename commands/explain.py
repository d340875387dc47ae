"""`perfsweep explain SWEEP`: each decided difference of a sweep, by operator (analysis/views/explain.py).

A sweep run without explain=true is launched again with it, into a sweep folder inside it.
A sweep without a done run is refused: it decided nothing to explain.
"""

import argparse

from perfsweep.commands.run import run_sweep


def show_explanations(args: argparse.Namespace) -> int:
    """The sweep's explanations; for a sweep run without explain=true, those of its launch again with it.

    That launch goes into a sweep folder inside it, <sweep>/<sweep>-explain: W&B names it apart from others'.
    Its own runs decide and explain.
    So `history` and `export` over the runs folder leave it out.
    A later `explain` reads it, once it holds this sweep's launch with explain=true.
    """
    from perfsweep import records, user_command
    from perfsweep.analysis.groups import comparisons, configurations
    from perfsweep.analysis.render import text
    from perfsweep.analysis.views import explain
    from perfsweep.records import load_sweep

    sweep_dir = args.sweep_dir.resolve()
    runs = load_sweep(sweep_dir)
    views = explain.views(sweep_dir, runs)
    if explain.explained(runs) and not views:
        said = "; ".join(explain.failures(runs)) or "its runs have no baseline to compare with"
        raise ValueError(f"{sweep_dir}: nothing to explain: {said}")
    if views:
        print("\n\n".join(map(text, views)))
        print(*unfinished(sweep_dir, runs), sep="\n", end="")
        return 0
    if runs and not any(run.state == records.DONE for run in runs):  # it decided nothing; a launch again neither
        raise ValueError(
            f"{sweep_dir}: no run of it is done, so it decided nothing to explain: {_first(sweep_dir, runs)}"
        )
    if runs and not comparisons(configurations(runs)):  # its launch again would plan no comparison either
        raise ValueError(
            f"{sweep_dir}: nothing to explain: its runs have no baseline to compare with (a comparison needs two "
            "configurations that differ in one axis, such as memory_format=contiguous,channels_last)"
        )
    launched = records.last_launch(sweep_dir)
    if launched is None:
        raise ValueError(f"{sweep_dir}: no launch recorded in its {records.SWEEP}: nothing to launch again")
    again = records.explained_in(sweep_dir)
    dropped = ("runs_dir=", "sweep_name=", "explain=", "profile=", "+explain=", "++runs_dir=", "++sweep_name=")
    words = [w for w in launched["argv"] if not w.startswith(dropped)]
    words = words[1:] if words[:1] == ["run"] else words
    if words and "=" not in words[0] and not words[0].startswith(("-", "+", "~")):  # another command's launch
        pinned = "`env.repo=REPO +env.packages.PACKAGE=GOOD,BAD explain=true` (docs/sweeps.md)"
        commits = f"; two commits of a package are {pinned}" if words[0] == "bisect" else ""
        raise ValueError(
            f"{sweep_dir}: `{user_command()} {words[0]}` launched it, and explain launches again only a sweep's own "
            f"overrides. Launch what to explain as a sweep with explain=true{commits}"
        )
    words += ["explain=true", f"runs_dir={sweep_dir}", f"sweep_name={again.name}"]
    if again.is_dir():
        theirs = (records.last_launch(again) or {}).get("argv")
        if theirs != words:
            raise ValueError(
                f"{again} holds another launch than {sweep_dir.name}'s with explain=true ({' '.join(theirs or [])}): "
                "move it away, or explain that sweep"
            )
        theirs_runs = load_sweep(again)
        views = explain.views(again, theirs_runs)
        if views:
            print(
                f"from {again}, {sweep_dir.name}'s launch again with explain=true: its words and times are its own "
                f"runs', which `{user_command()} table {again}` shows, not {sweep_dir.name}'s:"
            )
            print("\n\n".join(map(text, views)))
            print(*unfinished(again, theirs_runs), sep="\n", end="")
            print(*other_code(sweep_dir, runs, again, theirs_runs), sep="\n", end="")
            print(*words_changed(sweep_dir, runs, again, theirs_runs), sep="\n", end="")
            return 0
    print(
        f"{sweep_dir}: no run has an ops record; its launch runs again with explain=true into {again}: "
        f"{first_time(runs)}; profiling each window makes it longer (a Python loop's operators, many times)"
    )
    status = run_sweep_again(words)
    theirs_runs = load_sweep(again)
    print(*other_code(sweep_dir, runs, again, theirs_runs), sep="\n", end="")
    print(*words_changed(sweep_dir, runs, again, theirs_runs), sep="\n", end="")
    return status


def _first(sweep_dir, runs) -> str:
    """What to do before explaining a sweep without a done run: follow its runs, fix their failure, or run them."""
    from perfsweep import records, user_command

    failed = [run for run in runs if run.state == records.FAILED]
    if any(run.state == records.RUNNING for run in runs):
        return f"`{user_command()} status {sweep_dir}` follows its runs; explain once they are done"
    if failed and len(failed) == len(runs):
        return f"its runs failed ({failed[0].name}: {failed[0].error_line(limit=120)})"
    return f"`{user_command()} resume {sweep_dir} launcher.budget_s=null` runs them, then explain"


def first_time(runs) -> str:
    """'14 runs, which took 35 s the first time': their own times (status.json's timing), summed.

    A run's start-up is left out: in the launching process (launcher=debug) it counts from that process's start.
    """
    from perfsweep.launcher.progress import duration
    from perfsweep.records.words import counted

    took = sum(v for r in runs for k, v in (r.status.timing or {}).items() if k != "startup_s")
    said = counted(len(runs), "run")
    return f"{said}, which took {duration(took)} the first time" if took else said


def other_code(sweep_dir, runs, again, theirs) -> list[str]:
    """A line where the launch again measured other code than the sweep.

    Its explanations are of that code.
    """
    from perfsweep import records
    from perfsweep.analysis.views.compare import changes, code_of, differences

    done = [[run for run in found if run.state == records.DONE] for found in (runs, theirs)]
    differ = differences(*done, of=code_of) if all(done) else {}
    if not differ:
        return []
    return [
        f"\n{again.name} measured other code than {sweep_dir.name}: {changes(differ)}. Its explanations are of that "
        f"code. To explain what {sweep_dir.name} measured, check its code out, move {again} away, and explain again\n"
    ]


def words_changed(sweep_dir, runs, again, theirs) -> list[str]:
    """Lines where the launch again decided a comparison otherwise than the sweep did, or left it undecided.

    Its explanations are of its own words.
    """
    from perfsweep.analysis.statistics.verdict import FASTER, SLOWER, THE_SAME

    ours, its = (compared_words(folder, found) for folder, found in ((sweep_dir, runs), (again, theirs)))
    changed = [f"{pair} ({ours[pair]} -> {its[pair]})" for pair in ours if pair in its and ours[pair] != its[pair]]
    otherwise = [said for said in changed if said.endswith((f"-> {SLOWER})", f"-> {FASTER})", f"-> {THE_SAME})"))]
    left = [said for said in changed if said not in otherwise]
    lines = [f"{again.name} decided otherwise than {sweep_dir.name}: {'; '.join(otherwise)}"] if otherwise else []
    lines += [f"{again.name} left undecided what {sweep_dir.name} decided: {'; '.join(left)}"] if left else []
    if not lines:
        return []
    return [
        f"\n{'. '.join(lines)}. Its explanations are of its own runs; their profiled windows measure apart from the "
        "sweep's, and more runs a side (repeats=N) decide both alike\n"
    ]


def compared_words(sweep_dir, runs) -> dict[str, str]:
    """Each comparison of the sweep's done runs with its baseline ('subclass vs tensor') -> the word it decided."""
    from perfsweep.analysis.views import explain

    names, found = explain.decided(sweep_dir, runs)
    return {f"{names[v.config.key]} vs {names[v.base.key]}": word or "one run a side" for v, _, word in found}


def unfinished(sweep_dir, runs) -> list[str]:
    """A line where some of the sweep's runs are not done: the views rest on the others, and resume runs them."""
    from perfsweep import records, user_command
    from perfsweep.records.words import counted

    left = [run for run in runs if run.state != records.DONE]
    if not left:
        return []
    states = ", ".join(f"{sum(r.state == s for r in left)} {s}" for s in sorted({r.state for r in left}))
    return [
        f"\n{counted(len(left), 'run')} of the sweep's {len(runs)} not done ({states}): the views rest on the done "
        f"ones; `{user_command()} resume {sweep_dir}` runs them\n"
    ]


def run_sweep_again(words: list[str]) -> int:
    return run_sweep(argparse.Namespace(overrides=words, argv=words))
