"""What a compiled run's model ran as: its compiled graphs counted in one step, and the table's NOT COMPILED flag."""

import shutil

import torch

from perfsweep import records
from perfsweep.analysis.groups import configurations, labels, speedups
from perfsweep.analysis.views import export, plots, replicates
from perfsweep.analysis.views.table import view
from perfsweep.conf.schema import CompileConf
from perfsweep.records import load_sweep
from perfsweep.train.compiled_graphs import compiled_graphs, graph_breaks, watch_recompiles
from tests.helpers import write_run
from tests.untraceable import Tagged

COMPILED = CompileConf(name="default", enabled=True, backend="eager")  # Dynamo alone: no backend's build to wait for


def test_a_traced_function_runs_its_graph_and_one_on_an_untraceable_subclass_runs_none():
    plain, tagged = torch.randn(8), torch.randn(8).as_subclass(Tagged)
    traced = torch.compile(lambda x: torch.relu(x) * 2, backend="eager")
    skipped = torch.compile(lambda x: torch.relu(x) * 2, backend="eager")
    traced(plain), skipped(tagged)  # compiled in a warm-up, as a run's are
    assert compiled_graphs(lambda: traced(plain), COMPILED)["graphs_run"] == 1
    ran_eagerly = compiled_graphs(lambda: skipped(tagged), COMPILED)
    assert ran_eagerly["graphs_run"] == 0
    assert "Unsupported tensor subclass overridden attribute access" in ran_eagerly["graph_breaks"], "the process's"
    assert compiled_graphs(lambda: traced(plain), CompileConf()) is None, "nothing compiled: nothing counted"


def test_the_table_flags_a_compiled_run_that_ran_no_graph_with_its_processs_breaks(tmp_path):
    sweep = tmp_path / "sweep"
    for name, graphs in (("compiled", 2), ("eager_after_all", 0), ("unknown", None)):
        write_run(sweep, name, "tensor" if name == "compiled" else name, "contiguous", 100.0)
        summary = records.read_json(sweep / name / records.SUMMARY)
        breaks = {"Unsupported tensor subclass overridden attribute access": 3, "graph break in loop": 1}
        compiled = {"backend": "inductor", "graphs_run": graphs, "graph_breaks": breaks}
        records.write_json(sweep / name / records.SUMMARY, summary | {"compiled": compiled})
    (flag,) = [line for line in view(sweep).flags if line.startswith("NOT COMPILED")]
    assert flag.startswith("NOT COMPILED eager_after_all: torch.compile ran none of its ops in a compiled graph")
    assert "its process: Unsupported tensor subclass overridden attribute access (3); graph break in loop (1)." in flag
    limit = "Dynamo's recompile_limit (8) hit at 'forward' (models.py:16): its further variants run eagerly"
    summary = records.read_json(sweep / "eager_after_all" / records.SUMMARY)
    summary["compiled"]["graph_breaks"] |= {limit: 1}
    records.write_json(sweep / "eager_after_all" / records.SUMMARY, summary)
    (hit,) = [line for line in view(sweep).flags if line.startswith("NOT COMPILED")]
    assert f"its process: {limit} (1); Unsupported" in hit, "the limit first: past it, every variant runs eagerly"
    assert hit.endswith("or a larger torch._dynamo.config.recompile_limit, keeps it compiled"), "its own process's"
    paired = {"sides": ["compiled", "eager_after_all"], "side": 1, "blocks": [0, 1], "block_steps": [5]}
    records.write_json(sweep / "eager_after_all" / records.SUMMARY, summary | {"paired": paired})
    (hit,) = [line for line in view(sweep).flags if line.startswith("NOT COMPILED")]
    assert hit.endswith("give each compiled configuration a process of its own (pairing=process)"), hit
    shown = view(sweep)
    column = next(i for i, header in enumerate(shown.header) if header.startswith("vs "))
    cells = {row[shown.header.index("input_type")]: row[column] for row in shown.rows}
    assert cells["eager_after_all"].endswith(" NOT COMPILED"), "beside its figure, not only below the table"
    assert not cells["unknown"].endswith("NOT COMPILED") and cells["tensor"] == "1.00x"
    baseline = tmp_path / "baseline"
    shutil.copytree(sweep, baseline)
    summary = records.read_json(baseline / "compiled" / records.SUMMARY)
    records.write_json(
        baseline / "compiled" / records.SUMMARY, summary | {"compiled": summary["compiled"] | {"graphs_run": 0}}
    )
    shown = view(baseline)
    cells = {row[shown.header.index("input_type")]: row[column] for row in shown.rows}
    assert cells["unknown"].endswith(" NOT COMPILED"), "a speed-up over a baseline that ran eagerly is no compile's"
    shown = replicates.view(baseline)
    column = next(i for i, header in enumerate(shown.header) if header.startswith("vs "))
    assert all(row[column].endswith(" NOT COMPILED") for row in shown.rows if row[0] != "tensor"), shown.rows
    runs = [r for r in load_sweep(sweep) if r.state == "done"]
    figure = plots.speedups_figure(speedups(runs, 0.95), labels(configurations(runs)), 0.95, 0.05)
    plotted = {label.get_text().split(" ")[0]: label.get_text() for label in figure.axes[0].get_yticklabels()}
    assert plotted["eager_after_all"].endswith(" NOT COMPILED") and not plotted["unknown"].endswith(" NOT COMPILED")
    for name in ("eager_after_all", "unknown"):  # both asked torch.compile for its default mode
        record = records.read_json(sweep / name / records.CONFIG)
        record["config"]["compile"] = {"enabled": True, "mode": "default"}
        records.write_json(sweep / name / records.CONFIG, record)
    backends = {row["model"]["extra_info"]["input_type"]: row["model"]["backend"] for row in export.pytorch_v3(sweep)}
    assert backends == {
        "tensor": "eager",
        "eager_after_all": "compile:default NOT COMPILED",
        "unknown": "compile:default",
    }


def test_a_function_past_dynamo_s_recompile_limit_is_named_and_a_paired_process_gets_a_limit_a_side(monkeypatch):
    """Past its limit (8 variants) a function runs eagerly, with no graph break counted: its warning is counted.
    A process of two compiled sides, each compiling variants of one model's code, gets twice the limit."""
    import torch._dynamo

    monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 8)
    watch_recompiles(1)
    varied = torch.compile(lambda x: x * 2 + 1, backend="eager", dynamic=False)
    for size in range(1, 11):  # a variant a size
        varied(torch.ones(size))
    (hit,) = [reason for reason in graph_breaks() if reason.startswith("Dynamo's recompile_limit (8) hit at ")]
    assert hit.endswith(": its further variants run eagerly"), hit
    watch_recompiles(2)
    assert torch._dynamo.config.recompile_limit == 16
    again = torch.compile(lambda x: x * 3 + 1, backend="eager", dynamic=False)
    for size in range(1, 11):
        again(torch.ones(size))
    assert [reason for reason in graph_breaks() if "recompile_limit" in reason] == [hit], "within a side's limit each"


def test_compare_flags_a_configuration_that_compiled_in_a_and_ran_eagerly_in_b(tmp_path):
    """A change that breaks compiling may leave the times within the threshold: the gate fails (3) all the same."""
    from perfsweep.analysis.views import comment, compare

    for side, graphs in (("a", 2), ("b", 0)):
        write_run(tmp_path / side, "compiled", "tensor", "contiguous", 100.0)
        summary = records.read_json(tmp_path / side / "compiled" / records.SUMMARY)
        compiled = {"backend": "inductor", "graphs_run": graphs, "graph_breaks": {}}
        records.write_json(tmp_path / side / "compiled" / records.SUMMARY, summary | {"compiled": compiled})
    shown, status = compare.compare(tmp_path / "a", tmp_path / "b", threshold=0.05, loss_tolerance=0.05)
    assert [(line.phase, line.flag) for line in shown.items if line.flag] == [("compiled graphs", "NOT COMPILED IN B")]
    assert compare.timing(status) == compare.EXIT_POSSIBLE
    _, back = compare.compare(tmp_path / "b", tmp_path / "a", threshold=0.05, loss_tolerance=0.05)
    assert back == 0, "compiled again in B: no flag"
    assert comment.comment(shown, 0.05).startswith("### perfsweep: not compiled in B: resnet18; "), "fails the gate"
