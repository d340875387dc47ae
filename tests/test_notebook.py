"""perfsweep.notebook: the analysis docs/analysis.md shows, run as written, and what its DataFrames hold."""

import re

import pytest

from perfsweep import notebook
from perfsweep.records import STEPS, load_sweep, read_steps
from tests.helpers import ROOT, TINY


def notebook_example() -> str:
    text = (ROOT / "docs" / "analysis.md").read_text()
    section = text[text.index("## In a notebook") :]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL)[1]


@pytest.mark.slow
def test_the_docs_notebook_analysis_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(notebook_example(), "docs/analysis.md", "exec"), {})
    said = capsys.readouterr().out
    assert re.search(r"subclass / tensor: \d+\.\d+", said), said
    assert "axes.input_type" in said and "count" in said


def test_a_row_per_run_with_its_axes_figures_and_machine_and_a_row_per_step(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = notebook.launch(
        *TINY, "input_type=tensor,subclass", "memory_format=contiguous", "launcher=debug", "tracker.mode=disabled"
    )
    runs, loaded = notebook.runs(folder), load_sweep(folder)
    assert list(runs["run"]) == [run.name for run in loaded] and set(runs["state"]) == {"done"}
    assert list(runs["axes.input_type"]) == [run.axes["input_type"] for run in loaded]
    assert list(runs["summary.median_ms.step_ms"]) == [run.summary.median_ms["step_ms"] for run in loaded]
    assert list(runs["config.model.batch_size"]) == [16, 16] and set(runs["machine.torch"]) == {loaded[0].torch_version}
    assert runs["status.error"].isna().all()
    assert list(runs["repro"]) == [run.repro.command for run in loaded]
    assert runs["repro"].str.startswith("perfsweep ").all()
    assert "summary.host.joules_per_sample" in runs, "energy, unknown on this CPU, is a column all the same"
    steps = notebook.steps(folder)
    assert len(steps) == sum(read_steps(run.path / STEPS).num_rows for run in loaded)
    assert set(steps["run"]) == {run.name for run in loaded} and "step_ms" in steps


def test_a_launch_that_fails_raises_naming_what_it_recorded(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(notebook.LaunchFailed, match="exited 2; nothing was recorded"):
        notebook.launch(*TINY, "input_type=no_such_type", "launcher=debug")
