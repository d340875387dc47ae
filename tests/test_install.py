"""scripts/pip-sources: uv, which reads no pip configuration, is given the package sources pip is configured with."""

import os
import subprocess
import sys

from tests.helpers import ROOT

SCRIPT = ROOT / "scripts" / "pip-sources"


def uv_flags(env: dict[str, str]) -> list[str]:
    """The flags the script prints for pip as configured by `env` alone (no PIP_* variable of this machine's)."""
    mine = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    done = subprocess.run([sys.executable, SCRIPT], env=mine | env, capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


def test_pips_indexes_links_and_constraints_are_given_to_uv_with_pips_precedence(tmp_path):
    """A config file's [install] overrides its [global], and a PIP_* variable overrides both, as in pip."""
    config = tmp_path / "pip.conf"
    config.write_text(
        "[global]\n"
        "index-url = https://mirror.example/simple\n"
        "extra-index-url = file:///srv/a/simple file:///srv/b/simple\n"
        "find-links = /srv/global-wheels\n"
        "constraint = /srv/constraints.txt\n"
        "trusted-host = mirror.example\n"
        "no-index = false\n"
        "[install]\n"
        "find-links = /srv/install-wheels /srv/more-wheels\n"
    )
    flags = uv_flags({"PIP_CONFIG_FILE": str(config), "PIP_EXTRA_INDEX_URL": "https://extra.example/simple"})
    assert flags == [
        "--index-strategy", "unsafe-best-match",
        "--index-url", "https://mirror.example/simple",
        "--extra-index-url", "https://extra.example/simple",
        "--find-links", "/srv/install-wheels",
        "--find-links", "/srv/more-wheels",
        "--constraints", "/srv/constraints.txt",
        "--allow-insecure-host", "mirror.example",
    ]  # fmt: skip


def test_pip_without_configuration_leaves_uv_on_its_default_index():
    assert uv_flags({"PIP_CONFIG_FILE": os.devnull}) == ["--index-strategy", "unsafe-best-match"]


def test_pip_told_to_use_no_index_tells_uv_so():
    flags = uv_flags({"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "/srv/wheels"})
    assert flags == ["--index-strategy", "unsafe-best-match", "--find-links", "/srv/wheels", "--no-index"]
