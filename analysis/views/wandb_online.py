"""What must reach W&B (`sync`, `report --wandb`).

The settings are resolved and the server checked before any work.
Every wait is bounded by tracker.timeout_s.
A failure gives a message that says what to do, never a traceback or a hang.

    entity    tracker.entity, else the key's default entity (asked of the server), else an error naming
              tracker.entity=NAME
    server    WANDB_BASE_URL, else W&B's; unreachable within tracker.timeout_s: an error that says the runs stay
              offline and how to sync them later
"""

import base64
import dataclasses
import json
import threading
import urllib.error
import urllib.request
from pathlib import Path

from perfsweep import user_command
from perfsweep.conf.schema import TrackerConf
from perfsweep.conf.tracking import NO_KEY, server_url, wandb_key

OVERRIDABLE = {"entity": str, "project": str, "timeout_s": float}


class WandbUnreachable(RuntimeError):
    """The W&B server did not answer in time: nothing was uploaded (exit 1)."""


class WandbSettingsError(ValueError):
    """A setting W&B needs is missing or wrong (exit 2)."""


def with_overrides(conf: TrackerConf, overrides: list[str]) -> TrackerConf:
    """`conf` with tracker.entity=, tracker.project=, tracker.timeout_s= overrides from the command line."""
    changes = {}
    for override in overrides:
        key, _, value = override.partition("=")
        name = key.removeprefix("tracker.")
        if not key.startswith("tracker.") or not _ or name not in OVERRIDABLE:
            allowed = ", ".join(f"tracker.{k}=..." for k in OVERRIDABLE)
            raise WandbSettingsError(f"{override!r} is not a setting here; these are: {allowed}")
        try:
            changes[name] = OVERRIDABLE[name](value)
        except ValueError:
            raise WandbSettingsError(f"{override!r}: {name} takes a {OVERRIDABLE[name].__name__}") from None
    return dataclasses.replace(conf, **changes)


def kept_offline(conf: TrackerConf) -> TrackerConf:
    """The tracker settings, online made offline.

    What is logged here is sent by a sync, or by --wandb's upload.
    """
    return dataclasses.replace(conf, mode="offline") if conf.mode == "online" else conf


def offline(sweep_dir: Path) -> str:
    """What a sweep's command that could not reach W&B leaves, and what sends it later."""
    return f"the runs stay offline in {sweep_dir}; run `{user_command()} sync {sweep_dir}` later"


def check_server(conf: TrackerConf, later: str) -> None:
    """WandbUnreachable unless the server answers (anything, an error page included) within conf.timeout_s."""
    url = server_url()
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=conf.timeout_s).close()
    except urllib.error.HTTPError:
        return  # it answered
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise WandbUnreachable(f"W&B server {url} unreachable: {reason}; {later}") from None


def default_entity(conf: TrackerConf, api_key: str) -> str | None:
    """The entity the key's runs go to by default: W&B's GraphQL `viewer { entity }`, within conf.timeout_s."""
    auth = base64.b64encode(f"api:{api_key}".encode()).decode()
    request = urllib.request.Request(
        f"{server_url()}/graphql",
        data=json.dumps({"query": "query Viewer { viewer { entity } }"}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Basic {auth}"},
    )
    with urllib.request.urlopen(request, timeout=conf.timeout_s) as answer:
        return ((json.load(answer).get("data") or {}).get("viewer") or {}).get("entity")


def resolve_entity(conf: TrackerConf, api_key: str, later: str) -> TrackerConf:
    """`conf` with its entity: tracker.entity, else the key's default; WandbSettingsError if neither."""
    if conf.entity:
        return conf
    try:
        entity = default_entity(conf, api_key)
        why = "the server gave none for this key"
    except urllib.error.HTTPError as error:
        entity, why = None, f"the server answered {error.code} {error.reason} (is the key valid?)"
    except (urllib.error.URLError, OSError, ValueError) as error:
        entity, why = None, f"asking the server failed: {getattr(error, 'reason', error)}"
    if not entity:
        raise WandbSettingsError(
            f"no W&B entity: set tracker.entity=NAME (your W&B user or team) on this command; {why}; {later}"
        )
    return dataclasses.replace(conf, entity=entity)


def go_online(conf: TrackerConf, later: str) -> TrackerConf:
    """Check a key, a server that answers, and an entity, before anything is sent.

    Returns:
        `conf` with its entity.

    Raises:
        WandbSettingsError: no key, or no entity.
        WandbUnreachable: the server did not answer.
    """
    key = wandb_key()
    if key is None:
        raise WandbSettingsError(NO_KEY)
    check_server(conf, later)
    return resolve_entity(conf, key, later)


def within(seconds: float, what: str, fn, *args):
    """fn(*args) in a thread given `seconds`.

    Raises WandbUnreachable if it has not returned by then, or if it raises.
    W&B's clients retry for minutes on a network that drops.
    """
    outcome: dict[str, object] = {}

    def work() -> None:
        try:
            outcome["value"] = fn(*args)
        except Exception as error:  # reported below, with what was being done
            outcome["error"] = error

    thread = threading.Thread(target=work, name="wandb", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise WandbUnreachable(
            f"{what} did not finish within tracker.timeout_s={seconds:g} s (W&B server {server_url()})"
        )
    if "error" in outcome:
        error = outcome["error"]
        raise WandbUnreachable(f"{what} failed: {type(error).__name__}: {str(error).strip().splitlines()[0][:300]}")
    return outcome["value"]
