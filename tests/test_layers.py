"""The house goes one way: each module imports only the stages below its own, no module imports itself back in
a circle (imports inside functions count), every import of a stage names it under `perfsweep.`, and planning,
status and tables never load torch."""

import ast
import functools
import re
import subprocess
import sys

import pytest

from tests.helpers import ROOT

# stage -> the stages of perfsweep it may import (besides itself). launch.py, notebook.py, bench/ and gpu/ sit on top.
# commands/ runs the stages below it for the command line.
ALLOWED = {
    "conf": set(),
    "records": set(),
    "sweeps": {"conf", "records"},
    "launcher": {"conf", "records", "sweeps"},
    "train": {"conf", "records", "sweeps"},
    "analysis": {"conf", "records"},
    "commands": {"conf", "records", "sweeps", "launcher", "train", "analysis"},
}
TOP = ("launch", "notebook", "bench", "gpu")
STAGES = (*ALLOWED, *TOP)


def module_name(path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    module_name(p): p
    for p in [
        ROOT / "launch.py",
        ROOT / "notebook.py",
        *(f for stage in STAGES if (ROOT / stage).is_dir() for f in (ROOT / stage).rglob("*.py")),
    ]
}


PACKAGE = "perfsweep."


def imported_names(name: str) -> set[str]:
    """The module names that module `name` imports, as written, wherever in it (imports inside functions included):
    `from a.b import c` imports a.b.c where that is a module of perfsweep's, else a.b."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                module = f"{node.module}.{alias.name}"
                found.add(module if module.removeprefix(PACKAGE) in MODULES else node.module)
    return found


def imports(name: str) -> set[str]:
    """The project modules that module `name` imports, named as stages (perfsweep.train.step -> train.step)."""
    return {m.removeprefix(PACKAGE) for m in imported_names(name) if m.startswith(PACKAGE)} - {""}


@functools.cache
def graph() -> dict[str, set[str]]:
    """Each module's imports of the house: parsed once a worker that runs these tests, not by every worker that
    collects them."""
    return {name: imports(name) for name in MODULES}


def test_every_import_of_a_stage_names_it_under_perfsweep():
    """A bare `import train` would find a user's own train.py first (or be found by theirs)."""
    bare = [f"{name} imports {m}" for name in MODULES for m in imported_names(name) if m.split(".")[0] in STAGES]
    assert bare == []


def test_every_stage_imports_only_the_stages_below_it():
    against = [
        f"{name} imports {target}"
        for name, targets in graph().items()
        if name.split(".")[0] in ALLOWED
        for target in targets
        if (stage := target.split(".")[0]) != name.split(".")[0] and stage not in ALLOWED[name.split(".")[0]]
    ]
    assert against == []


def test_statistics_render_nothing():
    """analysis/statistics/ computes; the views render what it computes."""
    rendering = [
        f"{name} imports {target}"
        for name, targets in graph().items()
        if name.startswith("analysis.statistics")
        for target in targets
        if target.startswith(("analysis.views", "analysis.render"))
    ]
    assert rendering == []


def test_no_module_imports_itself_back():
    state: dict[str, str] = {}
    cycles = []

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for target in sorted(graph().get(name, ())):
            if state.get(target) == "open":
                cycles.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[name] = "closed"

    for name in sorted(graph()):
        if name not in state:
            visit(name, [name])
    assert cycles == []


def test_the_walk_sees_every_stage():
    assert {name.split(".")[0] for name in graph()} == set(STAGES)
    assert "records" in {t.split(".")[0] for t in graph()["analysis.views.table"]}, "the walk must find imports"
    assert "train.instrumented" in graph()["commands.launching"] and "records" in graph()["launcher.submit"]


@pytest.mark.parametrize("module", ["sweeps.plan", "launcher.run_states", "analysis.views.table"])
def test_planning_status_and_tables_load_no_torch(module):
    check = f"import perfsweep.{module}, sys; assert 'torch' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", check], cwd=ROOT, check=True, capture_output=True)


def test_the_views_load_no_scipy_stats():
    """scipy.stats takes a fresh process 0.3 s to import: the views test with scipy.special's functions instead."""
    views = "perfsweep.commands.views, perfsweep.analysis.views.compare, perfsweep.analysis.views.export"
    check = f"import {views}, sys; assert 'scipy.stats' not in sys.modules"
    subprocess.run([sys.executable, "-c", check], cwd=ROOT, check=True, capture_output=True)


def test_no_test_file_imports_another():
    """Shared helpers live in tests/helpers.py and tests/conftest.py, so each test file reads on its own."""
    found = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []
            found += [f"{path.name}: {name}" for name in names if re.search(r"\btests\.test_[a-z]", name)]
    assert found == []


# commands/NAME.py is the command `perfsweep NAME`, and bench/NAME.py measures NAME: they take the name of what they
# serve. A package's own modules (__init__, __main__, base) stand in each package.
NAMED_AFTER = ("commands", "bench")
EVERY_PACKAGE = {"__init__", "__main__", "base"}


def test_a_module_name_stands_once_outside_commands_and_bench():
    by_name: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        if name.split(".")[0] not in NAMED_AFTER and path.stem not in EVERY_PACKAGE:
            by_name.setdefault(path.name, []).append(name)
    assert {last: where for last, where in by_name.items() if len(where) > 1} == {}


def test_every_package_of_the_house_is_installed():
    """pyproject.toml lists the packages one by one: a folder left out is missing from a wheel, though an editable
    install finds it."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {name for name, path in MODULES.items() if path.name == "__init__.py"}
    assert {f"perfsweep.{name}" for name in found} - listed == set()
