#!/usr/bin/env python
"""perfsweep's entry point: plan a sweep from Hydra overrides, check it, run it through submitit, print its table.

perfsweep [run] [-m] [OVERRIDE ...]    run sweeps/<sweep>.yaml (default: sweeps/default.yaml), its axes
                                       narrowed or widened by Hydra overrides (model=a,b sweeps)
perfsweep --config-dir DIR [OVERRIDE ...]   the same with a folder of the user's sweep files and options
perfsweep status SWEEP_DIR             each run's state, job id and log
perfsweep resume SWEEP_DIR [launcher.KEY=VALUE ...]   run again every run of the sweep that is not done
perfsweep envs [--dir DIR] [--prune [--unused-days N]]   the environments built for package-version axes
perfsweep bisect --good A --bad B [--package NAME] [OVERRIDE ...]   the first release of a package (torch by
                                       default) between good and bad that shows the change the sweep measures
perfsweep table|runs|published|replicates|compare|plots|report|sync ...   the views of the records
                                       (also python -m perfsweep.analysis COMMAND)
perfsweep --help | --cfg job ...       Hydra's own flags, as in any Hydra app

`python launch.py ...` is the same command.
It parses the words and hands them to a command (commands/).
"""

import os
import sys

from perfsweep import COMMAND, typed_command
from perfsweep.commands.cli import parse, parser, run, with_config_dirs


def main(argv: list[str] | None = None) -> int:
    os.environ[COMMAND] = typed_command()  # its messages, and its jobs' (processes of their own), name it
    argv = with_config_dirs(sys.argv[1:] if argv is None else argv)
    if os.getcwd() not in sys.path:  # the user's own code imports from the launch's folder, as `python -m` has it
        sys.path.insert(0, os.getcwd())
    # No command: run a sweep. Its words go to it as they are, Hydra's flags (--help, --cfg...) included.
    if not argv or argv[0].startswith("-") or "=" in argv[0]:
        argv = ["run", *argv]
    words = ["run", "--", *argv[1:]] if argv[0] == "run" else argv
    args = parse(parser(__doc__.splitlines()[0]), words)
    args.argv = argv[1:] if argv[0] == "run" else argv
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
