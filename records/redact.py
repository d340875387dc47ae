"""What leaves the machine without secrets or the home directory.

That is W&B config and artifacts, and the HTML report.
These are redacted (shown as ***):

- launcher.setup, launcher.srun_args and launcher.sbatch_extra: shell lines and scheduler options, where an
  `export HF_TOKEN=...` lives;
- every key whose name says it holds a secret (TOKEN, KEY, SECRET, PASSWORD...);
- every `NAME=VALUE` with such a name inside a string.

The home directory shows as `~`.
The local records keep everything: `resume` needs the launcher settings.
"""

import os
import re
from pathlib import Path
from typing import Any

MASK = "***"
LAUNCHER_SHELL = ("launcher.setup", "launcher.srun_args", "launcher.sbatch_extra")
_SECRET_WORDS = {"KEY", "APIKEY", "PASS", "PASSWD", "CREDENTIAL", "CREDENTIALS", "AUTH", "COOKIE"}
_SECRET_PARTS = ("TOKEN", "SECRET", "PASSWORD")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*)=([^\s,;'\"\]]+)")
_SHELL_OVERRIDE = re.compile(rf"^(\+*(?:{'|'.join(re.escape(k) for k in LAUNCHER_SHELL)})[^=]*)=.*$", re.S)


def secret_name(name: str) -> bool:
    """A name that says its value is a secret: HF_TOKEN, WANDB_API_KEY, db.password, client_secret..."""
    parts = [p for p in re.split(r"[^A-Za-z0-9]+", name.upper()) if p]
    return any(p in _SECRET_WORDS or any(s in p for s in _SECRET_PARTS) for p in parts)


def _home() -> str | None:
    home = os.path.expanduser("~")
    return home.rstrip("/") if home not in ("", "/", "~") else None


def redact_text(text: str) -> str:
    """A string with secret assignments masked, a launcher shell setting's value masked, and home as ~."""
    text = _SHELL_OVERRIDE.sub(rf"\1={MASK}", text)
    text = _ASSIGNMENT.sub(lambda m: f"{m[1]}={MASK}" if secret_name(m[1]) else m[0], text)
    home = _home()
    if home:
        text = re.sub(rf"{re.escape(home)}(?=/|\b|$)", "~", text)
    return text


def redact(value: Any, key: str = "") -> Any:
    """A record (dicts, lists, strings) as it may leave the machine.

    `key` is its dotted place in the record.
    """
    if key and (secret_name(key.rsplit(".", 1)[-1]) or key.endswith(LAUNCHER_SHELL) or _under_shell(key)):
        return MASK
    if isinstance(value, dict):
        return {redact_text(str(k)): redact(v, f"{key}.{k}" if key else str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v, key) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Path):
        return redact_text(str(value))
    return value


def _under_shell(key: str) -> bool:
    return any(f"{shell}." in key for shell in LAUNCHER_SHELL)
