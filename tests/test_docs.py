"""Every command README.md and docs/ show is well formed as written: a sweep's overrides plan (their groups, values
and keys exist), a view's command line parses (its command and flags exist), Hydra's own flags answer. The results
page names sweeps that exist."""

import argparse
import re
import shlex
import statistics
from pathlib import Path

import pytest

from perfsweep.commands import cli
from perfsweep.commands.bisect import pinned
from perfsweep.commands.launching import MULTIRUN
from perfsweep.records import AUTO
from perfsweep.sweeps.plan import PlanError, build_plan
from tests.helpers import ROOT, launch_here

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PLACEHOLDER = re.compile(r" \[[^\]]*[A-Z]{2,}[^\]]*\]")  # [launcher.KEY=VALUE ...]: a slot, not a command's words
OPTIONAL = re.compile(r" \[(--[^\]]*)\]")  # [--csv]: a flag the command takes
COMMANDS = ("python launch.py ", "python -m perfsweep.commands ", "perfsweep ")


def shown_commands(page: Path) -> list[tuple[str, str]]:
    """The perfsweep commands of a page's bash blocks, each with the folder a `cd` before it in its block went to
    (from the repository's root), continuation lines joined, comments and `&&` split off."""
    found, fence, pending, folder = [], None, "", "."
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fence, folder = (line[3:].strip() if fence is None else None), "."
            continue
        if fence not in ("bash", "sh"):
            continue
        line = pending + line.split("  #")[0].strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        for part in line.split("&&"):
            part = part.strip().removeprefix(".venv/bin/")
            if part.startswith("cd "):
                folder = part.removeprefix("cd ").strip()
            elif part.startswith(COMMANDS):
                found.append((folder, part))
    return found


CASES = [
    (page.relative_to(ROOT).as_posix(), folder, command) for page in PAGES for folder, command in shown_commands(page)
]


def words(command: str) -> tuple[str, list[str]]:
    """('launch' or 'views', the arguments), optional [groups] opened and placeholder slots left out."""
    command = OPTIONAL.sub(r" \1", PLACEHOLDER.sub("", command))
    parts = shlex.split(command)
    if parts[:3] == ["python", "-m", "perfsweep.commands"]:
        return "views", parts[3:]
    return "launch", parts[2:] if parts[0] == "python" else parts[1:]


def test_the_pages_show_commands_and_the_readme_the_main_ones():
    shown = {command for _, _, command in CASES}
    assert len(CASES) >= 30 and "python launch.py compare runs/before runs/after" in shown
    linked = re.findall(r"\(docs/(\w+\.md)\)", (ROOT / "README.md").read_text())
    assert linked and all((ROOT / "docs" / name).is_file() for name in linked)


@pytest.mark.parametrize(("page", "folder", "command"), CASES)
def test_every_shown_command_parses_and_plans(page, folder, command, monkeypatch):
    """Parsed and planned, not run: a page's sweep runs for minutes (some on a GPU), and its view reads the reader's
    sweep folder. Hydra's flags run. (In the folder a `cd` of its block went to: a project of one's own.)"""
    monkeypatch.chdir(ROOT / folder)
    program, args = words(command)
    args = cli.with_config_dirs(args)
    monkeypatch.setattr(cli, "sweep_folder", Path)  # the pages' sweep folders exist on the reader's machine
    if program == "views":
        parser = argparse.ArgumentParser(prog="python -m perfsweep.commands", exit_on_error=False)
        cli.add_view_commands(parser.add_subparsers(required=True))
        cli.parse(parser, args)
        return
    if args and args[0] in cli.commands() and args[0] != "run":
        parsed = cli.parse(cli.parser(""), args)
        if args[0] == "bisect":  # its sweep plans, as its first point's does (a commit's code: where it is built)
            asked = [o for o in parsed.overrides if not o.startswith("repeats=")]
            pin = [] if parsed.git else [pinned(parsed.package or "torch", parsed.good)]
            assert build_plan([*asked, *pin, "repeats=1"]).runs
        return
    overrides = [a for a in args if a not in MULTIRUN]
    if AUTO in overrides:  # planned as its first look plans it
        overrides = [*(a for a in overrides if a != AUTO), "repeats=3"]
    if any(a.startswith("-") for a in overrides):  # Hydra's own flags: --help, --cfg job
        assert launch_here(*args).returncode == 0, f"{page}: {command}"
        return
    plan = build_plan(overrides)
    assert plan.runs and not plan.problems, f"{page}: {command}"


def test_the_results_page_names_sweeps_that_exist_and_links_every_machines_folder():
    """A sweep is named `sweep=NAME`, or as a word in backticks with an underscore (`subclass_slowdown`)."""
    page = (ROOT / "results" / "README.md").read_text()
    named = set(re.findall(r"sweep=(\w+)", page)) | set(re.findall(r"`([a-z0-9]+(?:_[a-z0-9]+)+)`", page))
    missing = named - {path.stem for path in (ROOT / "sweeps").glob("*.yaml")}
    assert named and not missing, f"results/README.md names sweeps that sweeps/ does not hold: {sorted(missing)}"
    linked = set(re.findall(r"\]\(([^)/]+)/README\.md\)", page))
    assert linked == {path.name for path in (ROOT / "results").iterdir() if path.is_dir()}


@pytest.mark.parametrize(
    ("command", "error", "said"),
    [
        ("python -m perfsweep.commands table runs/default --bogus", SystemExit, "unrecognized arguments: --bogus"),
        ("python launch.py model=no_such_model", PlanError, "Could not find 'model/no_such_model'"),
        ("python launch.py compare runs/before", SystemExit, "the following arguments are required: sweep_b"),
        ("python launch.py -m input_type=tensor,no_such_type", PlanError, "Could not find 'input_type/no_such_type'"),
    ],
)
def test_a_command_that_would_not_run_is_caught_naming_what_is_wrong(command, error, said, monkeypatch, capsys):
    with pytest.raises(error) as caught:
        test_every_shown_command_parses_and_plans("made up", ".", command, monkeypatch)
    if error is SystemExit:
        assert caught.value.code == 2, "argparse's exit status for words it does not take"
        assert said in capsys.readouterr().err
    else:
        assert said in str(caught.value)


def test_docstring_sentences_are_short():
    """One claim a sentence: the median docstring sentence has at most 12 words (bench/prose.py counts them)."""
    from perfsweep.bench import prose

    files = prose.python_files([ROOT])
    counts = prose.words([s for f in files for doc in prose.docstrings(f) for s in prose.sentences(doc)])
    assert len(counts) > 1000 and statistics.median(counts) <= 12
