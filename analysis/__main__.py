"""python -m perfsweep.analysis COMMAND ...: the views of a sweep's records (its --help lists them)."""

import argparse
import sys

from perfsweep.commands.cli import add_view_commands, parse, run


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m perfsweep.analysis", description="the views of a sweep's records")
    add_view_commands(parser.add_subparsers(title="commands", required=True, metavar="COMMAND"))
    return run(parse(parser, argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
