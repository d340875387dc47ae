"""`table --format` (and `replicates`, `compare`): markdown as the terminal shows it, CSV and JSON as data, LaTeX.

The sweep is synthetic: three runs a configuration, axis values that each format must escape,
and a configuration whose baseline the sweep did not run.
"""

import csv
import dataclasses
import io
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from perfsweep.analysis.render import as_json, figure
from perfsweep.analysis.statistics.speedup import figures
from perfsweep.analysis.views.table import table_view, view
from perfsweep.records.repro import Repro
from tests import synthetic
from tests.helpers import launch_here, write_run

ODD = "sub_class&x%y|z"  # an axis value that LaTeX and markdown must escape
LEVELS = {
    ("tensor", "contiguous"): 50.0,
    (ODD, "contiguous"): 60.0,
    ("tensorbase", "contiguous"): 51.0,
    (ODD, "channels_last"): 58.0,  # no tensor in channels_last: no baseline along input_type
}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    runs = synthetic.sweep(LEVELS, 3, synthetic.Noise(bimodal=0.0), np.random.default_rng(3))
    return synthetic.write(runs, tmp_path_factory.mktemp("formats") / "sweep")


def table(sweep, *args: str) -> str:
    shown = launch_here("table", str(sweep), *args)
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def by_input_type(rows: list[dict]) -> dict[tuple[str, str], dict]:
    return {(row["input_type"], row["memory_format"]): row for row in rows}


def test_csv_gives_each_speed_up_as_a_ratio_its_bounds_and_its_word_in_columns_of_their_own(sweep):
    rows = by_input_type(list(csv.DictReader(io.StringIO(table(sweep, "--format", "csv")))))
    terminal = view(sweep)
    text = by_input_type([dict(zip(terminal.header, row, strict=True)) for row in terminal.rows])
    assert rows.keys() == text.keys() and len(rows) == len(LEVELS)
    above = terminal.above[1]  # the line above the table: model, batch, machine, torch, timer... and how to read it
    ran = above.split(" | times: ")[0]
    assert "CPU " in ran and " | torch " in ran and ran != above, above
    for key, row in rows.items():
        assert row["ran"] == ran, "each row names the machine, torch and settings it ran with"
        shown = text[key]["vs tensor"]
        assert float(row["step ms"]) > 0 and float(row["runs"]) == 3
        if shown == "1.00x":  # the baseline: its own ratio, no interval
            assert float(row["vs tensor"]) == 1 and row["vs tensor low"] == row["vs tensor word"] == ""
        elif shown == "-":  # no baseline ran: nothing compared
            assert row["vs tensor"] == row["vs tensor low"] == row["vs tensor high"] == row["vs tensor basis"] == ""
        else:
            ratio, low, high = (float(row[f"vs tensor{part}"]) for part in ("", " low", " high"))
            value, bounds = shown.split(" [")
            assert f"{figures(ratio, low, high, apart=1.0)[0]}x" == value and low < ratio < high
            assert bounds.startswith(", ".join(figures(ratio, low, high, apart=1.0)[1:]))
            assert shown.endswith(row["vs tensor word"]) and row["vs tensor word"] and row["vs tensor basis"]
            assert row["vs tensor level"] == "0.95", "a row pasted elsewhere says its interval's level"
    assert text[(ODD, "channels_last")]["vs tensor"] == "-" and text[("tensor", "contiguous")]["vs tensor"] == "1.00x"


def test_json_gives_the_same_values_with_null_for_what_is_unknown(sweep):
    found = json.loads(table(sweep, "--format", "json"))
    rows = by_input_type(found["rows"])
    as_csv = by_input_type(list(csv.DictReader(io.StringIO(table(sweep, "--csv")))))
    assert found["fields"] == list(next(iter(as_csv.values())))
    for key, row in rows.items():
        assert {f: "" if v is None else str(v) for f, v in row.items()} == as_csv[key]
    assert rows[(ODD, "channels_last")]["vs tensor"] is None and rows[("tensor", "contiguous")]["vs tensor"] == 1
    assert isinstance(rows[(ODD, "contiguous")]["vs tensor low"], float)
    assert found["title"] == f"{sweep.name}: time per phase of a step, by configuration", "what it is, pasted alone"
    assert found["above"][0].startswith(str(sweep))


def test_latex_escapes_axis_values_and_has_a_row_per_configuration(sweep):
    written = table(sweep, "--format", "latex")
    body = written[written.index(r"\midrule") : written.index(r"\bottomrule")].splitlines()[1:]
    assert written.count(r"\begin{tabular}") == written.count(r"\end{tabular}") == 1
    assert len(body) == len(LEVELS) and all(line.endswith(r"\\") for line in body)
    assert r"sub\_class\&x\%y\textbar{}z" in written and ODD not in written


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="needs pdflatex")
def test_latex_compiles_with_booktabs(sweep, tmp_path):
    document = "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n%s\\end{document}\n"
    (tmp_path / "table.tex").write_text(document % table(sweep, "--format", "latex"))
    made = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "table.tex"], cwd=tmp_path, capture_output=True
    )
    assert made.returncode == 0, made.stdout.decode(errors="replace")[-3000:]


def test_markdown_is_the_terminals_table_with_a_bar_in_a_value_escaped(sweep):
    assert table(sweep, "--format", "markdown") == table(sweep)
    assert r"sub_class&x%y\|z" in table(sweep)


def test_a_format_that_does_not_exist_is_refused_with_those_that_do(sweep):
    refused = launch_here("table", str(sweep), "--format", "xlsx")
    assert refused.returncode == 2
    assert "xlsx" in refused.stderr and all(f"'{f}'" in refused.stderr for f in ("markdown", "latex", "csv", "json"))
    both = launch_here("table", str(sweep), "--csv", "--format", "json")
    assert both.returncode == 2 and "--csv" in both.stderr and "--format json" in both.stderr


def _bell_sweep(tmp_path) -> str:
    levels = {("tensor", "contiguous"): 50.0, ("bell\x07", "contiguous"): 55.0}
    runs = synthetic.sweep(levels, 1, synthetic.Noise(), np.random.default_rng(0))
    return str(synthetic.write(runs, tmp_path / "sweep"))


def test_a_value_latex_cannot_write_is_named(tmp_path):
    refused = launch_here("table", _bell_sweep(tmp_path), "--format", "latex")
    assert refused.returncode == 2 and "'bell\\x07'" in refused.stderr and "input_type" in refused.stderr


def test_markdown_shows_a_control_character_as_its_escape(tmp_path):
    shown = launch_here("table", _bell_sweep(tmp_path), "--format", "markdown")
    assert shown.returncode == 0, shown.stderr
    assert "| bell\\x07 " in shown.stdout and "\x07" not in shown.stdout


def test_replicates_and_compare_give_their_speed_ups_and_times_as_numbers_too(sweep, tmp_path):
    shown = launch_here("replicates", str(sweep), "--format", "csv")
    assert shown.returncode == 0, shown.stderr
    rows = list(csv.DictReader(io.StringIO(shown.stdout)))
    assert len(rows) == len(LEVELS) and all(float(row["step ms [95% CI] low"]) > 0 for row in rows)
    assert sorted(row["vs tensor"] for row in rows)[0] == "" and "1.0" in [row["vs tensor"] for row in rows]
    again = shutil.copytree(sweep, tmp_path / "again")  # the same runs in another folder: compare refuses one folder
    compared = launch_here("compare", str(sweep), str(again), "--format", "json")
    lines = json.loads(compared.stdout)["rows"]
    steps = [line for line in lines if line["phase"] == "step"]
    assert len(steps) == len(LEVELS) and all(line["B speed-up [95%]"] == 1 for line in steps)
    assert all(isinstance(line["A ms"], float) and line["B speed-up [95%] basis"] for line in steps)


def test_memory_by_phase_is_a_number_a_phase_as_data():
    memory = {"phase_memory_mib": {"forward": 12.5, "backward": 3.0}, "phase_memory_kind": "rss"}
    runs = synthetic.sweep(LEVELS, 2, synthetic.Noise(), np.random.default_rng(0))
    runs = [dataclasses.replace(r, summary=dataclasses.replace(r.summary, **memory)) for r in runs]
    shown = table_view(Path("sweep"), runs)
    (row, *_) = json.loads(as_json(shown))["rows"]
    header = "MiB by phase (net on a CPU)"
    assert row[f"{header} forward"] == 12.5 and row[f"{header} backward"] == 3.0 and row[f"{header} optimizer"] is None
    assert shown.rows[0][shown.header.index(header)] == "forward 12.5 backward 3"


@pytest.mark.parametrize("form", ["markdown", "csv", "json"])
def test_a_sweep_with_a_configuration_without_a_done_run_exits_1_in_every_format(tmp_path, form):
    for name, input_type in (("a", "tensor"), ("b", "subclass")):
        write_run(tmp_path, name, input_type, "contiguous", 100.0, state="failed")
    failed = launch_here("table", str(tmp_path), "--format", form)
    assert failed.returncode == 1, failed.stdout
    assert f"no run of {tmp_path} is done" in failed.stderr
    commands = launch_here("table", str(tmp_path), "--repro", "--format", form)
    assert commands.returncode == 0 and not commands.stderr, "the commands are an answer: they measure them again"
    shutil.rmtree(tmp_path / "a")
    write_run(tmp_path, "a", "tensor", "contiguous", 100.0)
    one = launch_here("table", str(tmp_path), "--format", form)
    assert one.returncode == 1 and "without figures: subclass" in one.stderr, "b's configuration has no figures"
    shutil.rmtree(tmp_path / "b")
    write_run(tmp_path, "b", "subclass", "contiguous", 100.0)
    assert launch_here("table", str(tmp_path), "--format", form).returncode == 0


def test_counts_of_one_read_in_the_singular(tmp_path):
    write_run(tmp_path, "a", "tensor", "contiguous", 100.0)
    assert f"{tmp_path}: 1 run, 1 done, 0 failed, 0 not finished" in launch_here("table", str(tmp_path)).stdout


def test_the_header_names_the_rows_constant_axes_though_a_failed_run_had_other_values(tmp_path):
    """A failed run of another model: the rows are all resnet18's, and say so, though the sweep varied the model."""
    for name, input_type in (("a", "tensor"), ("b", "subclass")):
        write_run(tmp_path, name, input_type, "contiguous", 100.0)
    write_run(tmp_path, "c", "tensor", "contiguous", 100.0, state="failed")
    config = json.loads((tmp_path / "c/config.json").read_text())
    config["axes"]["model"], config["config"]["model"]["name"] = "tiny_cnn", "tiny_cnn"
    (tmp_path / "c/config.json").write_text(json.dumps(config))
    header = launch_here("table", str(tmp_path)).stdout.splitlines()[1]
    assert header.startswith("model=resnet18 memory_format=contiguous precision=fp32 compile=eager |"), header


def test_a_configuration_launched_alone_into_a_sweep_is_compared_with_its_baseline_there(tmp_path):
    """A later launch of one input type recorded no baseline along input_type: the sweep's runs record tensor."""
    for name, input_type, baselines in (("a", "tensor", {"input_type": "tensor"}), ("b", "subclass", {})):
        write_run(tmp_path, name, input_type, "contiguous", 100.0 if name == "a" else 50.0)
        config = json.loads((tmp_path / name / "config.json").read_text())
        config["config"]["baselines"] = baselines
        (tmp_path / name / "config.json").write_text(json.dumps(config))
    rows = json.loads(launch_here("table", str(tmp_path), "--format", "json").stdout)["rows"]
    assert {row["input_type"]: row["vs tensor"] for row in rows} == {"tensor": 1.0, "subclass": pytest.approx(0.5)}


def test_vs_takes_an_input_type_of_the_user_s_own_by_its_import_path_too(tmp_path):
    write_run(tmp_path, "a", "tensor", "contiguous", 100.0)
    write_run(tmp_path, "b", "MyTensor", "contiguous", 50.0)
    config = json.loads((tmp_path / "b/config.json").read_text())
    config["config"]["input_type"]["_target_"] = "mylib.tensors.MyTensor"
    (tmp_path / "b/config.json").write_text(json.dumps(config))
    shown = launch_here("table", str(tmp_path), "--vs", "input_type=mylib.tensors.MyTensor", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    rows = json.loads(shown.stdout)["rows"]
    assert {row["input_type"]: row["vs MyTensor"] for row in rows} == {"MyTensor": 1.0, "tensor": pytest.approx(2.0)}


def test_a_constant_argument_of_the_users_own_model_is_in_the_header_where_no_column_shows_it():
    """width=32 and width=64 are two models: two launches of one sweep file must not read alike."""
    rng = np.random.default_rng(0)
    for width in (32, 64):
        runs = synthetic.sweep(synthetic.grid(), 2, synthetic.Noise(), rng)
        runs = [dataclasses.replace(r, fields=r.fields | {"model.kwargs.width": width}) for r in runs]
        assert f"model.kwargs.width={width}" in table_view("synthetic", runs).above[1]
    both = [
        dataclasses.replace(r, fields=r.fields | {"model.kwargs.width": 32 + 32 * (i % 2)}) for i, r in enumerate(runs)
    ]
    assert "model.kwargs.width=" not in table_view("synthetic", both).above[1], "a value that varies is no constant"


def test_a_field_of_an_axis_option_set_on_the_command_line_is_in_the_header():
    """compile=eager,default compile.mode=max-autotune: the row says default, and the compiled runs ran max-autotune."""
    rng = np.random.default_rng(1)
    runs = synthetic.sweep(synthetic.grid(), 2, synthetic.Noise(), rng)
    words = ("compile=eager,default", "compile.mode=max-autotune")
    typed = [
        dataclasses.replace(r, fields=r.fields | {"compile.mode": "max-autotune"}, repro=Repro(words)) for r in runs
    ]
    assert "compile.mode=max-autotune" in table_view("synthetic", typed).above[1]
    untyped = [
        dataclasses.replace(r, fields=r.fields | {"compile.mode": "default"}, repro=Repro(words[:1])) for r in runs
    ]
    assert "compile.mode=" not in table_view("synthetic", untyped).above[1], "its option's own mode: its name says it"
    eager = [
        dataclasses.replace(r, fields=r.fields | {"compile.enabled": False}, repro=Repro(("compile=eager", words[1])))
        for r in typed
    ]
    assert "compile.mode=" not in table_view("synthetic", eager).above[1], "typed, and read by no run: nothing ran it"


def test_the_line_of_what_ran_says_how_long_each_run_measured_and_on_which_day():
    """A report is read later, elsewhere: 20 steps after 3 warm-up, on the day the runs started (UTC)."""
    rng = np.random.default_rng(2)
    runs = synthetic.sweep(synthetic.grid(), 2, synthetic.Noise(), rng)
    runs = [dataclasses.replace(r, fields=r.fields | {"steps": 20, "warmup_steps": 3}) for r in runs]
    assert "at a time | 20 steps after 3 warm-up, on 2026-01-01 |" in table_view("synthetic", runs).above[1]
    later = dataclasses.replace(runs[-1], status=dataclasses.replace(runs[-1].status, started_at="2026-01-02T00:01:00"))
    assert "on 2026-01-01 to 2026-01-02 |" in table_view("synthetic", [*runs[:-1], later]).above[1]
    damaged = [dataclasses.replace(r, fields=r.fields | {"steps": []}) for r in runs]  # a record's fuzzed field
    assert "steps after" not in table_view("synthetic", damaged).above[1], "only counts that every run shares"


def test_a_time_reads_as_a_whole_number_from_1000_to_a_million():
    """3 significant digits, but no 1.65e+03: where .3g would round up to 1000, the whole number reads already."""
    assert [figure(v) for v in (999.4, 999.7, 1650.2, 999_999.7, None)] == ["999", "1000", "1650", "1e+06", "-"]
