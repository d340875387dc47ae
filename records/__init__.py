"""perfsweep's records: the sweep and run folders on disk.

They are the source of truth every stage reads.

    <sweep_dir>/sweep.json             the sweep: uid, W&B group, the planned run names, launches
    <sweep_dir>/runs.jsonl             every planned run's config record (config.json's content), a line each
    <sweep_dir>/jobs.json              the job each submitted run went to: job id, log, launcher
    <sweep_dir>/published.yaml         the published figures of a config dir's sweep file, copied at launch
    <sweep_dir>/<run>/config.json      run id, axes (and their order), baseline, resolved config, its repro command
    <sweep_dir>/<run>/env.json         versions, device, host, git commit, Slurm job id
    <sweep_dir>/<run>/steps.parquet    one row per step (warm-up rows flagged)
    <sweep_dir>/<run>/summary.json     medians per phase, samples/s, memory, losses, the host over its blocks
    <sweep_dir>/<run>/status.json      pending | running | done | failed (written by lifecycle.py only)
    <any record>.corrupt-<time>        a record that could not be read, moved aside by a launch or its run
    <sweep_dir>/<run>/profile.pt.trace.json.gz   a torch.profiler trace of 3 steps (profile=true, explain=true)
    <sweep_dir>/<run>/ops.json         per-step operator calls and self times, phases' memory (explain=true)

Records are a format.
This package sits at the bottom, beside conf/.
It imports nothing else of perfsweep's.
Every stage reads and writes records only through it.
"""

from perfsweep.records.files import (
    BISECT,
    CONFIG,
    ENV,
    JOBS,
    OPS,
    PROFILE,
    PUBLISHED,
    RANKS,
    REPORT,
    RUNS,
    STATUS,
    STEPS,
    SUMMARY,
    SWEEP,
    RecordError,
    RecordWriteError,
    Unreadable,
    atomic_write,
    explained_in,
    flatten,
    json_line,
    known_fields,
    now,
    quarantine,
    read_json,
    read_record,
    read_steps,
    unwritable,
    write_json,
    write_jsonl,
    write_steps,
)
from perfsweep.records.host import HostBlock, HostState
from perfsweep.records.ops import DynamoCounts, OperatorTimes, Ops, OpsFailed, PhaseFigures, read_ops
from perfsweep.records.repro import Repro
from perfsweep.records.run import (
    Baseline,
    Compiled,
    PairedSummary,
    RankSummary,
    Reference,
    RunRecord,
    Summary,
    is_done,
    load_run,
    load_sweep,
    unreadable_records,
)
from perfsweep.records.status import (
    BUDGET,
    DONE,
    FAILED,
    FINAL,
    LOST,
    PENDING,
    RUNNING,
    STATES,
    UNKNOWN,
    UNREADABLE,
    WRITTEN,
    BudgetSpent,
    RunError,
    Status,
    Stopped,
    read_status,
)
from perfsweep.records.sweep import (
    AUTO,
    group_of,
    last_launch,
    planned_runs,
    read_manifest,
    record_jobs,
    repair,
    submitted_jobs,
    sweep_file_name,
    write_planned,
)

__all__ = [
    "BISECT", "CONFIG", "ENV", "JOBS", "OPS", "PROFILE", "PUBLISHED", "RANKS", "REPORT", "RUNS", "STATUS", "STEPS",
    "SUMMARY", "SWEEP",
    "RecordError", "RecordWriteError", "Unreadable",
    "atomic_write", "explained_in", "flatten", "json_line", "known_fields", "now", "quarantine", "read_json",
    "read_record", "read_steps", "sweep_file_name", "group_of", "unwritable", "write_json", "write_jsonl",
    "write_steps",
    "HostBlock", "HostState", "Repro",
    "DynamoCounts", "OperatorTimes", "Ops", "OpsFailed", "PhaseFigures", "read_ops",
    "Baseline", "Compiled", "PairedSummary", "RankSummary", "Reference", "RunRecord", "Summary", "is_done", "load_run",
    "load_sweep", "unreadable_records",
    "BUDGET", "DONE", "FAILED", "FINAL", "LOST", "PENDING", "RUNNING", "STATES", "UNKNOWN", "UNREADABLE", "WRITTEN",
    "BudgetSpent", "RunError", "Status", "Stopped", "read_status",
    "AUTO", "last_launch", "planned_runs", "read_manifest", "record_jobs", "repair", "submitted_jobs", "write_planned",
]  # fmt: skip
