"""What perfsweep says to its user, checked in one place: tests/golden/messages.txt holds every message a test
names, whole, so that its wording is read and reviewed as one text while the tests assert behaviour (exit codes,
records). The parts that differ from one test run to the next (the test's folder, this checkout, pids, the host)
are written as placeholders. PERFSWEEP_GOLDEN=update rewrites the entries of the tests it runs."""

import fcntl
import os
import re
import shlex
import socket
import sys
from pathlib import Path

from tests.helpers import ROOT

MESSAGES = Path(__file__).parent / "golden" / "messages.txt"
_HEADER = re.compile(r"^=== (.+) ===$", re.MULTILINE)
_PID = re.compile(r"\bpid \d+")


def entries(text: str) -> dict[str, str]:
    """The file's entries by name, each its text without the blank line that ends it."""
    parts = _HEADER.split(text)
    return {name: body.strip("\n") for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def render(by_name: dict[str, str]) -> str:
    return "".join(f"=== {name} ===\n{body}\n\n" for name, body in sorted(by_name.items()))


Places = dict[Path | str | re.Pattern, str]


def placeheld(text: str, places: Places) -> str:
    """`text` with each of `places` (a folder, string or pattern of this test run: its placeholder), then this
    checkout, the host's name and any pid as placeholders; longer places first, so a folder inside another is named
    as itself, and patterns last."""
    named = {str(place): name for place, name in places.items() if not isinstance(place, re.Pattern)}
    named[str(ROOT)] = "<repo>"
    named[f"{shlex.quote(sys.executable)} {ROOT}"] = f"python {ROOT}"  # where the shell's python is another
    for place in sorted(named, key=len, reverse=True):
        text = text.replace(place, named[place])
    for pattern, name in places.items():
        if isinstance(pattern, re.Pattern):
            text = pattern.sub(name, text)
    return _PID.sub("pid <pid>", text.replace(socket.gethostname(), "<host>")).rstrip().strip("\n")


def says(name: str, text: str, places: Places | None = None) -> None:
    """Assert that `text` (with `places` as placeholders) is the golden file's entry `name`."""
    shown = placeheld(text, places or {})
    if os.environ.get("PERFSWEEP_GOLDEN") == "update":
        _update(name, shown)
    golden = entries(MESSAGES.read_text()) if MESSAGES.is_file() else {}
    assert name in golden, f"{MESSAGES} has no entry {name!r}: PERFSWEEP_GOLDEN=update writes it"
    assert shown == golden[name], f"{name} now says:\n{shown}\n\n{MESSAGES} says:\n{golden[name]}"


def _update(name: str, shown: str) -> None:
    # tests run in parallel workers: one writes the file at a time
    with open(MESSAGES.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        golden = entries(MESSAGES.read_text()) if MESSAGES.is_file() else {}
        golden[name] = shown
        MESSAGES.write_text(render(golden))
