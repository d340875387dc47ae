"""scripts/uv-install: uv, which reads no pip configuration, is given the package sources pip is configured with."""

import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers import ROOT

SCRIPT = ROOT / "scripts" / "uv-install"


def _script():
    loader = importlib.machinery.SourceFileLoader("uv_install", str(SCRIPT))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("uv_install", loader))
    loader.exec_module(module)
    return module


script = _script()


def uv_flags(listing: str) -> list[str]:
    """uv's flags for pip's configuration as `pip config list` prints it."""
    return script.uv_flags(script.effective(listing))


def uv_environment(listing: str) -> dict[str, str]:
    """uv's variables for it."""
    return script.uv_environment(script.effective(listing))


def test_a_pip_install_section_overrides_global_and_a_pip_variable_overrides_both():
    listing = "\n".join(
        [
            ":env:.find-links='/srv/env-wheels /srv/more-wheels'",
            "global.extra-index-url='file:///srv/a/simple file:///srv/b/simple'",
            "global.find-links='/srv/global-wheels'",
            "global.index-url='https://mirror.example/simple'",
            "install.find-links='/srv/install-wheels'",
            "install.pypi-url='https://install.example/simple'",
        ]
    )
    assert uv_environment(listing) == {
        "UV_INDEX_URL": "https://install.example/simple",
        "UV_EXTRA_INDEX_URL": "file:///srv/a/simple file:///srv/b/simple",
        "UV_FIND_LINKS": "/srv/env-wheels,/srv/more-wheels",
    }
    assert uv_flags(listing) == ["--index-strategy", "unsafe-best-match"], "no URL on uv's command line"


def test_pip_s_proxy_timeout_and_retries_reach_uv():
    listing = "global.proxy='http://proxy.example:3128'\n:env:.default-timeout='180'\ninstall.retries='7'"
    assert uv_environment(listing) == {
        "HTTPS_PROXY": "http://proxy.example:3128",
        "HTTP_PROXY": "http://proxy.example:3128",
        "UV_HTTP_TIMEOUT": "180",
        "UV_HTTP_RETRIES": "7",
    }


def test_an_empty_value_is_no_value_as_in_pip():
    listing = "global.index-url='https://mirror.example/simple'\ninstall.index-url=''\n:env:.extra-index-url=''"
    assert uv_environment(listing) == {"UV_INDEX_URL": "https://mirror.example/simple"}


def test_constraints_bind_builds_too_and_hosts_certificates_binaries_hashes_and_pre_releases_are_given():
    listing = "\n".join(
        [
            "global.cert='/etc/ssl/bundle.crt'",
            "global.constraint='/srv/c.txt'",
            "global.no-binary='numpy, scipy'",
            "global.pre='yes'",
            "global.require-hashes='t'",
            "global.trusted-host='mirror.example\\nother.example'",
            "install.no-binary='pandas'",
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
        "--no-binary", "pandas",
        "--require-hashes",
        "--prerelease", "allow",
    ]  # fmt: skip


def test_a_switch_pip_would_refuse_is_refused_naming_what_pip_takes():
    with pytest.raises(SystemExit, match=r"pip's no-index is 'maybe'; pip takes one of \[.*'yes'\]"):
        uv_flags("global.no-index='maybe'")


def wheel(folder: Path, name: str, version: str) -> None:
    """A wheel of an empty package: what a resolver reads of it."""
    dist = f"{name.replace('-', '_')}-{version}"
    with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as made:
        made.writestr(f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        made.writestr(f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        made.writestr(f"{dist}.dist-info/RECORD", "")


def test_uv_finds_what_pip_s_variables_point_it_to_and_asks_no_index_where_pip_would_not(tmp_path):
    """pip is configured by variables alone here (no config file): no index, and a folder of wheels."""
    wheel(tmp_path, "perfsweep-probe", "1.0")
    mine = {key: value for key, value in os.environ.items() if not key.startswith(("PIP_", "UV_"))}
    pip = {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path), "PIP_ISOLATED": "1"}
    command = [sys.executable, SCRIPT, "--dry-run", "--python", sys.executable]
    found = subprocess.run([*command, "perfsweep-probe"], env=mine | pip, capture_output=True, text=True, timeout=60)
    assert found.returncode == 0 and "+ perfsweep-probe==1.0" in found.stderr, found.stderr
    missing = subprocess.run([*command, "six"], env=mine | pip, capture_output=True, text=True, timeout=60)
    assert missing.returncode != 0 and "six" in missing.stderr, "no index asked: six is in no wheel of the folder"


def test_the_install_compiles_every_folder_of_the_package():
    """scripts/install compiles perfsweep's bytecode folder by folder: those are pyproject.toml's top packages."""
    import tomllib

    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    tops = {name.split(".")[1] for name in packages if name.count(".") >= 1}
    line = next(line for line in (ROOT / "scripts" / "install").read_text().splitlines() if " conf " in line)
    assert line.startswith(".venv/bin/python -m compileall -q conf ")
    assert set(line.split()[4:]) == tops, "a folder of the package that the install leaves uncompiled"
