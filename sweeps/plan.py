"""Sweep file + Hydra overrides -> a validated, de-duplicated list of RunSpecs.

A sweep file (sweeps/<name>.yaml) holds `params` in the form of Hydra's
`hydra.sweeper.params`: axis -> value or comma-separated values. The command
line's overrides come after them, so they narrow, widen or replace any axis.
Every run's config is composed by Hydra before anything runs; all composition
errors are reported together.
"""

import dataclasses
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from conf.schema import Config
from sweeps import compose
from sweeps.compose import Setting
from sweeps.spec import RunSpec, safe_name

SWEEPS_DIR = Path(__file__).resolve().parent
# Settings of the sweep as a whole: one value for every run.
SWEEP_WIDE = ("launcher", "tracker", "sweep", "sweep_name", "runs_dir")


class PlanError(ValueError):
    """The sweep cannot be planned; `problems` lists every reason found."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(f"- {p}" for p in problems))


@dataclasses.dataclass(frozen=True)
class Plan:
    """The runs of one sweep and where their records go."""

    sweep_dir: Path
    runs: tuple[RunSpec, ...]

    @property
    def settings(self) -> Config:
        """The sweep-wide settings (launcher, tracker...), equal in every run."""
        return self.runs[0].config


def available_sweeps() -> list[str]:
    return sorted(p.stem for p in SWEEPS_DIR.glob("*.yaml"))


def sweep_params(name: str) -> list[str]:
    """The overrides that sweep file `name` stands for."""
    path = SWEEPS_DIR / f"{name}.yaml"
    if safe_name(name) != name or not path.is_file():
        raise PlanError([f"unknown sweep {name!r} (sweep={name}); available: {', '.join(available_sweeps())}"])
    params = OmegaConf.to_container(OmegaConf.load(path)).get("params") or {}
    return [f"{key}={value}" for key, value in params.items()]


def expand(overrides: list[str]) -> list[list[Setting]]:
    """The sweep file's params, then the command line's overrides -> the settings of each run."""
    parser = OverridesParser.create()
    try:
        chosen = [o for o in parser.parse_overrides(overrides) if o.get_key_element() == "sweep"]
        if any(o.is_sweep_override() for o in chosen):
            raise PlanError(["sweep= takes one sweep file; run sweeps one at a time"])
        name = chosen[-1].value() if chosen else Config.sweep
        return compose.expand(sweep_params(name) + overrides)
    except PlanError:
        raise
    except Exception as error:  # Hydra's parser errors name the bad override
        raise PlanError([f"{error}"]) from error


def compose_runs(runs: list[list[Setting]]) -> list[Config]:
    """Each run's typed config; every distinct composition error, together."""
    configs, errors = compose.compose_all(runs)
    if errors:
        raise PlanError([f"{message}\n  (in the run: {run})" for message, run in errors.items()])
    return configs


def _sweep_dir(config: Config) -> Path:
    name = config.sweep_name or config.sweep
    if safe_name(name) != name:
        raise PlanError([f"sweep_name={name!r} must be a plain folder name (letters, digits, _ . = -)"])
    return Path(config.runs_dir) / name


def build_plan(overrides: list[str]) -> Plan:
    """Expand, compose and de-duplicate the sweep that `overrides` describe."""
    configs = compose_runs(expand(overrides))
    varying = [k for k in SWEEP_WIDE if len({repr(getattr(c, k)) for c in configs}) > 1]
    if varying:
        raise PlanError([f"{k} is a setting of the whole sweep and cannot be swept" for k in varying])
    runs: dict[str, RunSpec] = {}
    sweep_dir = _sweep_dir(configs[0])
    for config in configs:
        spec = RunSpec(config=config, sweep_name=sweep_dir.name)
        runs.setdefault(spec.run_id, spec)
    return Plan(sweep_dir=sweep_dir, runs=tuple(runs.values()))
