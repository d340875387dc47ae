"""W&B's server and key as this machine has them, and the settings of every W&B run."""

import netrc
import os
from urllib.parse import urlparse

NO_KEY = "no W&B API key (run `wandb login` or set WANDB_API_KEY): nothing was uploaded"
# wandb.Settings for every W&B run perfsweep makes:
# - no console capture;
# - no W&B metadata file (its command line, paths, host and user). The run's env.* config holds what matters,
#   redacted;
# - no git or code capture;
# - no requirements.txt of every installed package. Listing them reads each package's metadata: 0.3 s of a CPU per
#   run, between a sweep's processes. The run's env.packages config holds the versions that matter.
WANDB_SETTINGS = {
    "console": "off",
    "silent": True,
    "x_disable_meta": True,
    "disable_git": True,
    "save_code": False,
    "x_save_requirements": False,
}


def server_url() -> str:
    """The W&B server: WANDB_BASE_URL, else W&B's own."""
    return (os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").rstrip("/")


def wandb_key() -> str | None:
    """The W&B key: WANDB_API_KEY, else netrc's for the server (what `wandb login` writes)."""
    if os.environ.get("WANDB_API_KEY"):
        return os.environ["WANDB_API_KEY"]
    try:
        credentials = netrc.netrc(os.environ.get("NETRC")).authenticators(urlparse(server_url()).hostname)
    except (OSError, netrc.NetrcParseError):
        return None
    return credentials[2] if credentials else None


def has_wandb_key() -> bool:
    return wandb_key() is not None
