"""The Hugging Face environment a sweep's jobs run with, made to hold wherever a job runs.

`kdgrid.sweep_run` decides it (`OFFLINE_ENVIRONMENT` once everything a sweep needs is cached, with the cache
locations of this machine) and sets it in ``os.environ`` while the executor runs (`environment`). Each kind of job
then gets it its own way:

- in this process (the local executor with ``local_workers=0``): ``huggingface_hub`` and ``datasets`` read
  ``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE`` into module constants when they are imported
  (``huggingface_hub.constants.HF_HUB_OFFLINE``, which ``huggingface_hub.is_offline_mode()`` returns and
  ``transformers`` asks before every download; ``datasets.config.HF_HUB_OFFLINE``), and `kdgrid run` has imported
  them before it knows the sweep: `sync_offline_switches` recomputes those constants from ``os.environ`` as the
  libraries do at import, and `environment` restores them afterwards;
- local worker processes inherit ``os.environ`` and import the libraries after it is set;
- Ray: the trainable applies `hub_variables` itself before its job (`apply_environment`), so actors of a cluster
  joined with ``ray.init(address=...)``, by kdgrid or by the caller before `kdgrid` ran, get them too;
- SLURM: each array task's script exports them in its setup lines (`export_lines`), so profiles that set
  ``--export=NONE`` get them as well, before Python starts.

The plugins this process loaded from ``KDGRID_PLUGINS`` or a sweep file's ``plugins:`` (`kdgrid.plugins`) travel
the same ways: `job_variables` is the Hub's variables plus ``KDGRID_PLUGINS`` naming them all, and each job's
process loads them when it starts.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from kdgrid.plugins import plugin_environment

# Set for the workers of a run once every item is cached: the libraries then never contact the Hub.
OFFLINE_ENVIRONMENT: dict[str, str] = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
# Where the libraries find their caches: handed to jobs on other machines so they read the caches the pre-flight
# checked (the same paths of a shared filesystem).
CACHE_LOCATION_VARIABLES = ("HF_HOME", "HF_HUB_CACHE", "HF_DATASETS_CACHE")
# Every variable a job is handed as this process has it (`hub_variables`).
HUB_VARIABLES = (*OFFLINE_ENVIRONMENT, "TRANSFORMERS_OFFLINE", *CACHE_LOCATION_VARIABLES)
_TRUE = ("1", "ON", "YES", "TRUE")  # what both libraries count as true


def _is_true(value: str | None) -> bool:
    return value is not None and value.strip().upper() in _TRUE


def hub_variables(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The `HUB_VARIABLES` set in ``environ`` (default ``os.environ``): what a job elsewhere is handed."""
    env = os.environ if environ is None else environ
    return {name: env[name] for name in HUB_VARIABLES if name in env}


def job_variables() -> dict[str, str]:
    """`hub_variables` of ``os.environ`` plus ``KDGRID_PLUGINS`` naming the plugins this process loaded
    (`kdgrid.plugins.plugin_environment`): every variable a job elsewhere is handed."""
    return {**hub_variables(), **plugin_environment()}


# The module constants the libraries decide offline mode by: (module, attribute).
_SWITCHES = (
    ("huggingface_hub.constants", "HF_HUB_OFFLINE"),
    ("datasets.config", "HF_HUB_OFFLINE"),
    ("datasets.config", "HF_DATASETS_OFFLINE"),
)


def sync_offline_switches() -> None:
    """Make the offline constants of the already imported ``huggingface_hub`` and ``datasets`` say what
    ``os.environ`` says now, computed as each library computes them at import (a library not imported yet will
    read the environment itself)."""
    hub = sys.modules.get("huggingface_hub.constants")
    hub_offline = _is_true(os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE"))
    if hub is not None:
        hub.HF_HUB_OFFLINE = hub_offline
    config = sys.modules.get("datasets.config")
    if config is not None:
        flag = os.environ.get("HF_DATASETS_OFFLINE")
        offline = hub_offline if flag is None else _is_true(flag)
        config.HF_HUB_OFFLINE = offline
        config.HF_DATASETS_OFFLINE = offline


def apply_environment(variables: Mapping[str, str]) -> None:
    """Set ``variables`` in ``os.environ`` for good (a job's own process) and sync the libraries' switches."""
    os.environ.update(variables)
    sync_offline_switches()


@contextmanager
def environment(variables: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``variables`` set while the block runs, and the libraries' offline switches following
    it (`sync_offline_switches`); both exactly as they were afterwards. Nothing changes for no variables. What
    starts inside inherits the variables: local worker processes, a Ray runtime started here, ``sbatch`` (and its
    scripts export them: `export_lines`)."""
    if not variables:
        yield
        return
    before = {name: os.environ.get(name) for name in variables}
    switches = {
        (module, name): getattr(sys.modules[module], name)
        for module, name in _SWITCHES
        if module in sys.modules and hasattr(sys.modules[module], name)
    }
    apply_environment(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        for (module, name), value in switches.items():
            setattr(sys.modules[module], name, value)


def export_lines(variables: Mapping[str, str]) -> list[str]:
    """Shell lines exporting ``variables`` (quoted), for a job script's setup."""
    return [f"export {name}={shlex.quote(value)}" for name, value in variables.items()]
