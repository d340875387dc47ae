"""What a GPU stage hands on to the next machine.

Each is one packed file beside the stage's tables in DIR.
A GPU machine hands back a few files more easily than a folder of many.

DIR/runs.tar.gz holds the runs' records.
A stage cut short goes on elsewhere without running its finished runs again.
Its tables can be made again anywhere.

DIR/autotune.tar.gz holds what Inductor timed.
A max-autotune compile cut short goes on from the kernels it has timed, not from none.
The stage's runs keep Inductor's cache in DIR/inductor-cache (TORCHINDUCTOR_CACHE_DIR).
There Inductor writes two kinds of timings:

- each template-tuned op's choices (cache/<system hash>, JSON, after each op);
- each tuned Triton kernel's best launch config (<kernel>.best_config, beside the kernel's source).

Only these are packed.
The compiled kernels (hundreds, one per config tried) are built again from them, one config each.
They are not timed again.
Inductor uses them only on the same GPU model, CUDA and Triton (its system hash).

Both files are written after every step.
A stage's --resume unpacks its records.
Every run of a stage unpacks the timings, as Inductor's cache on one machine would have kept them.
"""

import json
import os
import tarfile
from collections.abc import Callable
from pathlib import Path

RECORDS = "runs.tar.gz"
AUTOTUNE = "autotune.tar.gz"
INDUCTOR_CACHE = "inductor-cache"


def inductor_env(out: Path) -> dict[str, str]:
    """The environment that puts the runs' Inductor cache in the stage's folder.

    It overrides whatever the machine had set.
    """
    return {"TORCHINDUCTOR_CACHE_DIR": str((out / INDUCTOR_CACHE).resolve())}


def pack(out: Path) -> None:
    """Packs out/runs into out/runs.tar.gz and Inductor's timings into out/autotune.tar.gz.

    Each is packed only where there is any.
    """
    runs = out / "runs"
    if runs.is_dir():
        _write(out / RECORDS, lambda archive: archive.add(runs, arcname="runs", filter=_is_record))
    cache = out / INDUCTOR_CACHE
    timed = autotuning_files(cache)

    def add_timed(archive: tarfile.TarFile) -> None:
        for path in timed:
            archive.add(path, arcname=str(path.relative_to(cache)))

    if timed:
        _write(out / AUTOTUNE, add_timed)


def unpack_records(out: Path) -> None:
    """Unpacks out/runs from out/runs.tar.gz where out/runs is missing.

    That is a stage going on on another machine.
    """
    packed = out / RECORDS
    if packed.is_file() and not (out / "runs").exists():
        with tarfile.open(packed) as archive:
            archive.extractall(out, filter="data")


def unpack_timings(out: Path) -> None:
    """Unpacks the timings in out/autotune.tar.gz that out/inductor-cache lacks.

    A timing already there is as new as the packed one, or newer.
    """
    packed, cache = out / AUTOTUNE, out / INDUCTOR_CACHE
    if packed.is_file():
        with tarfile.open(packed) as archive:
            missing = [member for member in archive.getmembers() if not (cache / member.name).exists()]
            archive.extractall(cache, members=missing, filter="data")


def autotuning_files(cache: Path) -> list[Path]:
    """Inductor's timings in its cache folder: the ops' choices and the kernels' best configs.

    Its temporary files, which start with a dot, are left out.
    """
    if not cache.is_dir():
        return []
    ops = [p for p in (cache / "cache").glob("*") if p.is_file()]
    return sorted(p for p in [*ops, *cache.rglob("*.best_config")] if not p.name.startswith("."))


def autotuned(out: Path) -> str:
    """What Inductor has timed, as "Inductor's timings kept: 12 ops, 140 kernels".

    Ops are those whose choices it timed.
    Kernels are those whose best config it found.

    Returns:
        That line, or '' where Inductor timed nothing.
    """
    cache = out / INDUCTOR_CACHE
    ops = kernels = 0
    for path in autotuning_files(cache):
        if path.suffix == ".best_config":
            kernels += 1
            continue
        try:
            timed = json.loads(path.read_text())["cache"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        ops += sum(len(by_inputs) for by_inputs in timed.values() if isinstance(by_inputs, dict))
    if not ops and not kernels:
        return ""
    return f"Inductor's timings kept: {ops} ops, {kernels} kernels"


def _is_record(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """The runs' records only.

    A launch's code snapshot, job logs, lock and half-written files are left out.
    """
    parts = Path(info.name).parts
    return None if any(p in (".code", ".submitit", ".lock") or p.endswith(".tmp") for p in parts) else info


def _write(packed: Path, add: Callable[[tarfile.TarFile], None]) -> None:
    """Writes a packed file whole, then moves it into place.

    A stage cut off while packing leaves the last one.
    """
    partial = packed.with_name(f".{packed.name}.tmp")
    with tarfile.open(partial, "w:gz") as archive:
        add(archive)
    os.replace(partial, packed)
