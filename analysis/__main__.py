"""python -m analysis COMMAND ...: the views of a sweep's records (python -m analysis --help lists them)."""

import argparse
import sys

from analysis.cli import add_commands, parse, run


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis", description="the views of a sweep's records")
    add_commands(parser.add_subparsers(title="commands", required=True, metavar="COMMAND"))
    return run(parse(parser, argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
