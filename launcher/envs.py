"""Software environments as a sweep axis.

A run asks for package versions: `torch=2.9.1`, `env.packages.numpy=2.3.5`.
They are resolved and built once with uv into a cache, before anything is submitted.

An environment is a virtualenv of this Python.
It holds the requested packages and what they need.
torch brings the torchvision release published for it, whose wheel names that torch exactly.
A run reaches everything else it imports from perfsweep's environment, through a .pth file.
That covers perfsweep's own requirements: Hydra, submitit, W&B...
The .pth file comes after the environment's own packages.
So nothing perfsweep pins is installed over a version under test.

An environment's folder:

- is named by the hash of its resolved requirements and of the perfsweep environment it reaches;
- is built in a temporary folder and renamed when complete, so a half-built environment is never used;
- is built by one launch at a time: another that asks for it meanwhile waits, then uses it;
- is found again without resolving, through a request index.

The same set asked twice from one installation is one folder.
Another installation, or one made again elsewhere, has its own.
So removing one leaves no other's broken.
`torch=current` with no `env.packages` is the environment perfsweep runs in: nothing to build.

A pin may name a commit of your repository instead of a release: `env.repo=PATH +env.packages.mylib=<40-hex>`.
That commit's files (git archive) are built into a wheel with uv, once, into the cache's commits/ folder.
The wheel is installed with what it requires, resolved as a release's would be.
`bisect --git` measures commits this way.
"""

import dataclasses
import functools
import hashlib
import json
import os
import platform
import re
import shutil
import site
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock, Timeout
from packaging.utils import canonicalize_name

from perfsweep.conf.schema import COMMIT, commit_pins

SHORT_COMMIT = re.compile(r"^[0-9a-fA-F]{7,40}$")  # what may be a commit's hash, short or upper-case

CURRENT = "current"
RECORD = "perfsweep-env.json"  # in each environment's folder: what it was asked for and what it holds
_REQUESTS = ".requests"  # the cache's index: one file per request, naming the environment that serves it
_PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# Built wheels only: a release published as source alone, or with no wheel for this Python, is refused in a second.
# It is not compiled for minutes or hours (torch's) before it fails or, worse, measures a local build.
WHEELS = ("--only-binary", ":all:")


class EnvError(Exception):
    """An environment that cannot be resolved or built.

    Its message gives the reason, and the versions that would work.
    """


class Unresolvable(EnvError):
    """No set of packages for this Python satisfies the request.

    A release may have no wheel for it, or not exist.
    That is a fact of the index, unlike a download or a disk that failed.
    """


@dataclasses.dataclass(frozen=True)
class Request:
    """The package versions a run asks for, sorted by name.

    Empty pins mean perfsweep's own environment.
    """

    pins: tuple[tuple[str, str], ...]
    index_url: str | None = None
    repo: str | None = None  # the repository whose commits the pins of COMMIT's form name

    @property
    def label(self) -> str:
        pins = (
            f"{name}@{version[:12]}" if COMMIT.match(version) else f"{name}=={version}" for name, version in self.pins
        )
        return " ".join(pins) or CURRENT

    @property
    def commits(self) -> dict[str, str]:
        """The pins that name a commit of `repo`: package -> commit."""
        return commit_pins(dict(self.pins))

    @property
    def key(self) -> str:
        repo = [self.repo] if self.commits else []  # a request of releases alone keeps the key it had
        text = json.dumps([self.pins, self.index_url, _python_tag(), _base(), *repo])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def request_of(torch: str, packages: dict[str, str], index_url: str | None = None, repo: str | None = None) -> Request:
    pins = dict(packages)
    if torch != CURRENT:
        pins["torch"] = torch
    pairs = tuple(sorted((name.lower(), str(version)) for name, version in pins.items()))
    return Request(pairs, index_url, str(Path(repo).expanduser().resolve()) if repo else None)


@dataclasses.dataclass(frozen=True)
class Env:
    path: Path
    request: Request
    resolved: tuple[str, ...]  # name==version of every package installed in it
    build_s: float | None  # None: found in the cache

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def for_plan(runs: list, launcher_name: str, say: Callable[[str], None] = print) -> dict[str, str]:
    """Build (or find) each environment the runs ask for, before anything is submitted.

    Returns:
        {run name: its Python}, for the runs outside perfsweep's own environment.

    Raises:
        EnvError: if one cannot be built, or cannot be used here.
    """
    wanted: dict[Request, list] = {}
    for spec in runs:
        env = spec.config.env
        request = request_of(spec.config.torch, env.packages, env.index_url, env.repo)
        if request.pins:
            wanted.setdefault(request, []).append(spec)
    if wanted and launcher_name == "debug":
        raise EnvError(
            f"launcher=debug runs every run in this process, which cannot change its packages; environment "
            f"{next(iter(wanted)).label} needs launcher=local or launcher=slurm"
        )
    if issues := [issue for request in wanted for issue in problems(request)]:
        raise EnvError("\n".join(issues))
    pythons = {}
    for request, specs in wanted.items():
        cache = Path(specs[0].config.env.dir).expanduser() if specs[0].config.env.dir else default_dir()
        env = ensure(request, cache, say)
        pythons |= {spec.name: str(env.python) for spec in specs}
    return pythons


def default_dir() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "perfsweep" / "envs"


def problems(request: Request) -> list[str]:
    """What is wrong with the request before anything is asked of the index."""
    found = [
        f"{name}=={version!r}: a package name and a version (e.g. 2.9.1) are needed"
        for name, version in request.pins
        if not _PIN.match(name) or not _PIN.match(version) or version == CURRENT
    ]
    if request.commits and not request.repo:
        found += [
            f"{name}={commit}: a commit; env.repo=PATH names its repository" for name, commit in request.commits.items()
        ]
    if request.repo:
        found += [
            f"{name}={version}: a commit of env.repo is named by its full 40-hex hash (git rev-parse {version})"
            for name, version in request.pins
            if SHORT_COMMIT.match(version) and not COMMIT.match(version)
        ]
    return found


def find(request: Request, cache: Path) -> Env | None:
    """The complete environment built for `request`, if the cache has one."""
    index = cache / _REQUESTS / request.key
    try:
        path = cache / index.read_text().strip()
        record = json.loads((path / RECORD).read_text())
    except (OSError, ValueError):
        return None
    if not (path / "bin" / "python").exists():
        return None
    os.utime(path / RECORD)  # its last use, for `envs`
    return Env(path, request, tuple(record["resolved"]), None)


@dataclasses.dataclass(frozen=True)
class Cached:
    """A cached environment as `perfsweep envs` lists it."""

    name: str
    requested: str
    size_mb: float  # its files', whether or not uv's cache holds them too
    own_mb: float  # what removing it frees: the files only it holds; uv links the others from its cache
    built_at: str
    last_used: float  # seconds since the epoch


def cached(cache: Path) -> list[Cached]:
    """The complete environments in the cache, the most recently used first.

    A half-built one is not listed.
    """
    found = []
    for record in cache.glob(f"*/{RECORD}"):
        try:
            fields = json.loads(record.read_text())
        except (OSError, ValueError):
            continue
        requested = " ".join(f"{name}=={version}" for name, version in sorted(fields["requested"].items()))
        size, own = _size_mb(record.parent)
        found.append(Cached(record.parent.name, requested, size, own, fields["built_at"], record.stat().st_mtime))
    return sorted(found, key=lambda env: env.last_used, reverse=True)


def prune(cache: Path, unused_days: float = 0.0) -> list[Cached]:
    """Remove the environments not used for `unused_days`, and the index entries that name them.

    With 0 days, it removes all of them.

    Returns:
        The environments removed.
    """
    removed = [env for env in cached(cache) if time.time() - env.last_used >= unused_days * 86400]
    for env in removed:
        shutil.rmtree(cache / env.name)
    for entry in (cache / _REQUESTS).glob("*") if (cache / _REQUESTS).is_dir() else []:
        if not (cache / entry.read_text().strip() / RECORD).is_file():
            entry.unlink()
    return removed


def ensure(request: Request, cache: Path, say: Callable[[str], None] = print) -> Env:
    """The environment for `request`: from the cache, or resolved and built into it.

    Raises:
        EnvError: if it cannot be resolved or built.
    """
    if found := find(request, cache):
        say(f"environment {request.label}: {found.path} (built before)")
        return found
    began = time.monotonic()
    wheels = {name: commit_wheel(Path(request.repo), name, commit, cache) for name, commit in request.commits.items()}
    resolved = resolve(request, wheels)
    name = hashlib.sha256("\n".join([_python_tag(), *_base(), *resolved]).encode()).hexdigest()[:16]
    path = cache / name
    cache.mkdir(parents=True, exist_ok=True)
    lock = FileLock(cache / f".{name}.lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        say(f"environment {request.label}: another launch is building it at {path}; waiting for it")
        lock.acquire()
    try:
        built = not (path / RECORD).is_file()
        if built:
            _build(request, resolved, path)
    finally:
        lock.release()
    _index(cache, request, name)
    env = Env(path, request, resolved, time.monotonic() - began)
    size, own = _size_mb(path)
    how = f"built in {env.build_s:.1f} s" if built else "built by another launch"
    say(f"environment {request.label}: {how}, {size:.0f} MB ({own:.0f} MB its own), at {path}")
    return env


def resolve(request: Request, wheels: dict[str, Path] | None = None) -> tuple[str, ...]:
    """name==version of every package the request installs, as uv resolves them for this Python.

    `wheels` are those built of the commits it pins (commit_wheel): package -> its wheel.
    """
    wheels = wheels or {}
    wanted = [f"{name} @ {wheels[name].as_uri()}" if name in wheels else f"{name}=={v}" for name, v in request.pins]
    if "torch" in dict(request.pins) and "torchvision" not in dict(request.pins):
        wanted.append("torchvision")  # its wheels name their torch exactly: the published pair
    command = [*_uv(), "pip", "compile", "-", "--python", sys.executable, "--no-header", "--no-annotate", *WHEELS]
    command += _index_args(request)
    done = subprocess.run(command, input="\n".join(wanted), capture_output=True, text=True)
    if done.returncode != 0:
        unsatisfiable = "No solution found" in done.stderr  # else uv could not ask (the network, the index)
        raise (Unresolvable if unsatisfiable else EnvError)(_why(request, done.stderr))
    return tuple(line.strip() for line in done.stdout.splitlines() if line.strip() and not line.startswith("#"))


class CannotInstall(Unresolvable):
    """A commit of the code under test that cannot be built into a wheel: a fact of that commit's files."""


def commit_wheel(repo: Path, name: str, commit: str, cache: Path) -> Path:
    """The wheel of package `name` built from `commit` of `repo`: from the cache, or built into it.

    The commit's files come from git archive, so neither the working tree nor its changes reach it.

    Raises:
        EnvError: the commit is not there.
        CannotInstall: its files do not build into a wheel of `name`.
    """
    tag = hashlib.sha256(_python_tag().encode()).hexdigest()[:8]  # a wheel may be built for this Python only
    folder = cache / "commits" / f"{canonicalize_name(name)}-{commit}-{tag}"
    if built := sorted(folder.glob("*.whl")):
        return built[0]
    archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", commit], capture_output=True)
    if archive.returncode != 0:
        said = archive.stderr.decode(errors="replace").strip().splitlines()
        raise EnvError(f"{name}@{commit[:12]}: git archive failed in {repo}: {said[-1] if said else 'no message'}")
    building = cache / "commits" / f".building-{commit}-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    try:
        (building / "source").mkdir(parents=True)
        subprocess.run(["tar", "-x", "-C", str(building / "source")], input=archive.stdout, check=True)
        command = [
            *_uv(),
            "build",
            "--wheel",
            "--quiet",
            "--python",
            sys.executable,
            "--out-dir",
            str(building / "out"),
        ]
        done = subprocess.run([*command, str(building / "source")], capture_output=True, text=True)
        wheels = sorted((building / "out").glob("*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            last = next((line for line in reversed(done.stderr.splitlines()) if line.strip()), "no wheel made")
            raise CannotInstall(f"{name}@{commit[:12]} cannot be built into a wheel: {last.strip()}")
        made = canonicalize_name(wheels[0].name.split("-")[0])
        if made != canonicalize_name(name):
            raise CannotInstall(f"{name}@{commit[:12]}: the commit builds {made}, not {name}")
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(building / "out", folder)
        except OSError:  # another launch built it meanwhile
            pass
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return sorted(folder.glob("*.whl"))[0]


@functools.cache  # asked once a process: pip takes a second or two to answer
def available(name: str, index_url: str | None = None) -> tuple[str, ...]:
    """The releases of `name` the index has for this Python, newest first.

    The index is `index_url`, else the default.
    None are returned if it cannot say.
    """
    index = ["--index-url", index_url] if index_url else []
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", name, "--disable-pip-version-check", *index],
        capture_output=True,
        text=True,
    )
    found = re.search(r"^Available versions: (.+)$", done.stdout, re.MULTILINE)
    return tuple(version.strip() for version in found[1].split(",")) if found else ()


def _why(request: Request, uv_says: str) -> str:
    said = " ".join(line.strip(" ×╰─▶│") for line in uv_says.splitlines() if line.strip(" ×╰─▶│"))
    reason = said[said.find("Because") :] if "Because" in said else said  # uv's why, without its headings
    reason = reason.split(" hint: ")[0]  # its hint names flags of its own, not perfsweep's
    lines = [f"environment {request.label} cannot be resolved for Python {_python_tag()}: {reason}"]
    for name, version in request.pins:
        if COMMIT.match(version):  # a commit of the user's repository: no index lists it
            continue
        versions = available(name)
        if versions and version not in versions:
            lines.append(
                f"{name}={version} is not a release this Python can install; the latest: {', '.join(versions[:8])}"
            )
        elif f"{name}=={version} has no usable wheels" in reason:
            lines.append(
                f"{name}={version} has no wheel for this Python, and environments are built from wheels only (a "
                f"source build would take long and measure a build of this machine's); the latest: "
                f"{', '.join(versions[:8])}"
            )
    return "\n".join(lines)


def _build(request: Request, resolved: tuple[str, ...], path: Path) -> None:
    """Build into a temporary folder beside `path` and rename it into place once complete."""
    building = path.with_name(f".building-{path.name}-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    began = time.monotonic()
    try:
        _run([*_uv(), "venv", "--quiet", "--python", sys.executable, str(building)], request)
        python = building / "bin" / "python"
        install = [*_uv(), "pip", "install", "--quiet", "--no-deps", "--python", str(python), *WHEELS]
        install += _index_args(request)
        _run([*install, "-r", "-"], request, "\n".join(resolved))
        purelib = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        # perfsweep's own packages come after the environment's: only what it lacks is taken from there
        Path(purelib, "perfsweep_base.pth").write_text("\n".join(_base()) + "\n")
        record = {
            "requested": dict(request.pins),
            **({"repo": request.repo} if request.commits else {}),
            "index_url": request.index_url,
            "resolved": list(resolved),
            "python": _python_tag(),
            "build_s": round(time.monotonic() - began, 1),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        (building / RECORD).write_text(json.dumps(record, indent=2))
        os.replace(building, path)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise


def _run(command: list[str], request: Request, stdin: str | None = None) -> None:
    done = subprocess.run(command, input=stdin, capture_output=True, text=True)
    if done.returncode != 0:
        last = next((line for line in reversed(done.stderr.splitlines()) if line.strip()), "no message")
        raise EnvError(f"environment {request.label} could not be built: {last.strip()}")


def _index(cache: Path, request: Request, name: str) -> None:
    index = cache / _REQUESTS
    index.mkdir(parents=True, exist_ok=True)
    partial = index / f".{request.key}.{os.getpid()}"
    partial.write_text(name + "\n")
    os.replace(partial, index / request.key)


def _index_args(request: Request) -> list[str]:
    return ["--index-url", request.index_url] if request.index_url else []


def _uv() -> list[str]:
    return [sys.executable, "-m", "uv"]


def _base() -> list[str]:
    """Where perfsweep's own packages are, which an environment reaches through its .pth file."""
    return site.getsitepackages()


def _python_tag() -> str:
    return f"{platform.python_implementation()} {platform.python_version()} {sys.platform}-{platform.machine()}"


def _size_mb(path: Path) -> tuple[float, float]:
    """The folder's files in MB, and those of them no other folder links to.

    uv links files from its cache.
    """
    files = [p.stat() for p in path.rglob("*") if p.is_file() and not p.is_symlink()]
    return sum(f.st_size for f in files) / 2**20, sum(f.st_size for f in files if f.st_nlink == 1) / 2**20
