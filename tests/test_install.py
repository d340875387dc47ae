"""scripts/pip-sources: uv, which reads no pip configuration, is given the package sources pip is configured with."""

import importlib.machinery
import importlib.util
import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT

SCRIPT = ROOT / "scripts" / "pip-sources"


def _script():
    loader = importlib.machinery.SourceFileLoader("pip_sources", str(SCRIPT))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("pip_sources", loader))
    loader.exec_module(module)
    return module


sources = _script()


def uv_flags(listing: str) -> list[str]:
    """The flags for pip's configuration as `pip config list` prints it."""
    return sources.flags(sources.effective(listing))


def test_a_pip_install_section_overrides_global_and_a_pip_variable_overrides_both():
    listing = "\n".join(
        [
            ":env:.find-links='/srv/env-wheels'",
            "global.extra-index-url='file:///srv/a/simple file:///srv/b/simple'",
            "global.find-links='/srv/global-wheels'",
            "global.index-url='https://mirror.example/simple'",
            "install.find-links='/srv/install-wheels'",
            "install.index-url='https://install.example/simple'",
        ]
    )
    assert uv_flags(listing) == [
        "--index-strategy", "unsafe-best-match",
        "--index-url", "https://install.example/simple",
        "--extra-index-url", "file:///srv/a/simple",
        "--extra-index-url", "file:///srv/b/simple",
        "--find-links", "/srv/env-wheels",
    ]  # fmt: skip


def test_an_empty_value_is_no_value_as_in_pip():
    listing = "global.index-url='https://mirror.example/simple'\ninstall.index-url=''\n:env:.extra-index-url=''"
    assert uv_flags(listing) == [
        "--index-strategy",
        "unsafe-best-match",
        "--index-url",
        "https://mirror.example/simple",
    ]


def test_constraints_bind_builds_too_and_hosts_certificates_binaries_hashes_and_pre_releases_are_given():
    listing = "\n".join(
        [
            "global.cert='/etc/ssl/bundle.crt'",
            "global.constraint='/srv/c.txt'",
            "global.no-binary='numpy, scipy'",
            "global.pre='yes'",
            "global.require-hashes='t'",
            "global.trusted-host='mirror.example\\nother.example'",
            "install.no-index='off'",
        ]
    )
    assert uv_flags(listing) == [
        "--index-strategy", "unsafe-best-match",
        "--cert", "/etc/ssl/bundle.crt",
        "--constraints", "/srv/c.txt", "--build-constraints", "/srv/c.txt",
        "--allow-insecure-host", "mirror.example",
        "--allow-insecure-host", "other.example",
        "--no-binary", "numpy",
        "--no-binary", "scipy",
        "--require-hashes",
        "--prerelease", "allow",
    ]  # fmt: skip


def test_a_switch_pip_would_refuse_is_refused_naming_what_pip_takes():
    with pytest.raises(SystemExit, match=r"pip's no-index is 'maybe'; pip takes one of \[.*'yes'\]"):
        uv_flags("global.no-index='maybe'")


def run_script(env: dict[str, str]) -> list[str]:
    """The script's flags for a pip configured by `env` alone: no config file, no PIP_* variable of this machine's."""
    mine = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    done = subprocess.run(
        [sys.executable, SCRIPT],
        env=mine | {"PIP_CONFIG_FILE": os.devnull} | env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


def test_pip_itself_is_asked_and_its_variables_reach_uv():
    flags = run_script({"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "/srv/wheels", "PIP_ISOLATED": "1"})
    assert flags == ["--index-strategy", "unsafe-best-match", "--find-links", "/srv/wheels", "--no-index"]


def test_pip_without_configuration_leaves_uv_on_its_default_index():
    assert run_script({}) == ["--index-strategy", "unsafe-best-match"]
