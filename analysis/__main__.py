"""python -m analysis COMMAND ...: the views of a sweep's records.

table SWEEP_DIR [--csv]           one row per run: medians per phase, ratio to the baseline
runs SWEEP_DIR                    per-run statistics per phase (median, CI, IQR, p5/p95), noisy runs flagged
published SWEEP_DIR               the published figures the sweep reproduces, beside ours
compare SWEEP_A SWEEP_B [...]     two sweeps run by run; exit 1 on a regression
plots SWEEP_DIR                   PNG plots into SWEEP_DIR/plots/
"""

import sys
from pathlib import Path


def _runs(argv: list[str]) -> int:
    from analysis.summary import render

    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python -m analysis runs SWEEP_DIR", file=sys.stderr)
        return 2
    print(render(Path(argv[0])))
    return 0


def main(argv: list[str]) -> int:
    from analysis import compare, plots, published, replicates, table

    commands = {"table": table.main, "runs": _runs, "published": published.main, "compare": compare.main}
    commands.update(plots=plots.main, replicates=replicates.main)
    if not argv or argv[0] not in commands:
        print(__doc__, file=sys.stderr)
        return 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
