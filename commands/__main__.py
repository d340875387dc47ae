"""python -m perfsweep.commands COMMAND ...: the views of a sweep's records alone (its --help lists them).

`perfsweep COMMAND` takes the same commands, beside those that launch.
"""

import argparse
import sys

from perfsweep.commands.cli import add_view_commands, parse, run
from perfsweep.commands.entry import run_to_end


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m perfsweep.commands", description="the views of a sweep's records")
    add_view_commands(parser.add_subparsers(title="commands", required=True, metavar="COMMAND"))
    return run(parse(parser, argv))


if __name__ == "__main__":
    run_to_end(lambda: main(sys.argv[1:]))
