"""The local tier of the pre-flight, without torch: the files and caches this machine must have before a run.

- `missing_init_checkpoints`, `check_init_checkpoints`: the ``init_from`` folders trials name, then (optionally)
  the pre-training checkpoints their ``init_recipe`` names (`kdgrid.core.pretrained.needed`).
- `hub_environment`: with a sweep that needs the Hugging Face Hub, everything it needs cached here (checked
  without the network), and the environment its workers then run with (offline).
- `create_store`: the results store created and writable, last, so that a refused run leaves no trace.

``kdgrid plan`` applies `check_init_checkpoints` (hand-made folders only: recipe checkpoints are listed instead);
``kdgrid run`` / ``resume`` apply all of them (`kdgrid.sweep_run`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from kdgrid.core.model.shapes import is_local_source
from kdgrid.core.pretrained.needed import missing_message, needed_checkpoints
from kdgrid.core.trial_rules import HUB_ID
from kdgrid.errors import ConfigError
from kdgrid.grid.expand import store_problems
from kdgrid.launch.environment import CACHE_LOCATION_VARIABLES, OFFLINE_ENVIRONMENT
from kdgrid.prefetch import missing_items, sweep_needs
from kdgrid.prefetch import missing_message as missing_hub_message
from kdgrid.trial import Trial


def local_path_like(value: str) -> bool:
    """``value`` can only be a path on this machine, not a Hub id (``owner/model``): it starts with ``.``,
    ``/`` or ``~``, or has more or fewer than one ``/``."""
    return value.startswith((".", "/", "~")) or not HUB_ID.fullmatch(value)


def missing_init_checkpoints(trials: Iterable[Trial]) -> list[str]:
    """The ``init_from`` checkpoints the trials need that are not directories here, each once, in order:
    every ``general_distillation`` source, and a ``pretrain`` / ``preload`` source that can only be a path
    (`local_path_like`). Relative paths are relative to the working directory."""
    missing: dict[str, None] = {}
    for trial in trials:
        source = trial.init_from
        if not source or trial.init == "random" or source in missing:
            continue
        if (trial.init == "general_distillation" or local_path_like(source)) and not is_local_source(source):
            missing[source] = None
    return list(missing)


def check_init_checkpoints(trials: Iterable[Trial], *, recipes: bool = True) -> None:
    """Refuse, in one `ConfigError` naming every one, trials whose ``init_from`` checkpoint is missing here;
    then (with ``recipes``) trials whose ``init_recipe`` checkpoint is not made yet, each with the
    ``kdgrid pretrain`` command that makes it (`kdgrid.core.pretrained.needed`). ``recipes=False``: `kdgrid plan`,
    which lists those instead (`kdgrid.core.pretrained.needed.listing`), and a run that makes them first."""
    trials = list(trials)
    missing = missing_init_checkpoints(trials)
    if missing:
        raise ConfigError(
            f"{len(missing)} init_from checkpoint(s) missing (relative paths are relative to the working "
            f"directory {Path.cwd()}): " + ", ".join(missing)
        )
    if recipes:
        not_made = [needed for needed in needed_checkpoints(trials) if not needed.present]
        if not_made:
            raise ConfigError(missing_message(not_made))


def hub_environment(trials: Iterable[Trial], sweep: str, *, online: bool = False) -> dict[str, str]:
    """The environment variables the workers of ``trials`` run with, as far as the Hub is concerned.

    Nothing for trials that need nothing from the Hub (the demo, generated tasks, local teachers) or with
    ``online`` (every job fetches what it needs itself); else `kdgrid.launch.environment.OFFLINE_ENVIRONMENT`,
    once every item is in this machine's caches (checked without the network), with the cache locations set here
    (``HF_HOME``, ``HF_HUB_CACHE``, ``HF_DATASETS_CACHE``), so that jobs on other machines read the caches
    checked here (`kdgrid.launch.environment` says how each executor's jobs get them).

    Raises:
        ConfigError: something is missing; the message names it and ``kdgrid prefetch <sweep>``.
    """
    if online:
        return {}
    needs = sweep_needs(trials)
    if not needs:
        return {}
    missing = missing_items(needs)
    if missing:
        raise ConfigError(missing_hub_message(missing, [sweep]))
    locations = {name: os.environ[name] for name in CACHE_LOCATION_VARIABLES if name in os.environ}
    return {**OFFLINE_ENVIRONMENT, **locations}


def create_store(store: Path) -> None:
    """Create the results store (and its parents) and check every folder kdgrid writes into there: the last
    step of a run's pre-flight, so that a run refused before leaves nothing.

    Raises:
        ConfigError: why rows could not be written there (`kdgrid.grid.expand.store_problems`), in one line.
    """
    problems = store_problems(store, create=True)
    if problems:
        raise ConfigError("; ".join(problems))
