"""Step checkpoints of a pre-training run, so a stopped, preempted or timed-out run resumes where it stopped.

A checkpoint is a folder ``step-<9 digits>/`` in the run's work folder (`kdgrid.core.pretrained.artifacts.work_dir`)
with ``state.pt`` (the model with its projections, the optimizer, the scheduler, the step) and
``checkpoint.json`` (the recipe's manifest: its key, the steps done). It is written by process 0 under a
temporary name and renamed, so a checkpoint is whole or absent; the newest `KEEP` are kept.

The data position is the step (`kdgrid.pretrain.data`), and the random state of every process is re-seeded from
(seed, step, rank) at each step (`kdgrid.pretrain.train`), so no generator state needs saving: a resumed run
draws what an uninterrupted one would have drawn.
"""

from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path
from typing import Any

import torch

from kdgrid.atomic_files import fsync_dir
from kdgrid.core.pretrained import artifacts
from kdgrid.core.pretrained.recipe import PretrainRecipe

STATE = "state.pt"
INFO = "checkpoint.json"
KEEP = 2
_NAME = re.compile(r"^step-(\d{9})$")


def step_folder(work: Path, step: int) -> Path:
    return work / f"step-{step:09d}"


def checkpoints(work: Path) -> list[tuple[int, Path]]:
    """The complete step checkpoints in ``work``, oldest first."""
    if not work.is_dir():
        return []
    found = []
    for path in work.iterdir():
        match = _NAME.match(path.name)
        if match and (path / STATE).is_file() and (path / INFO).is_file():
            found.append((int(match[1]), path))
    return sorted(found)


def check_work_folder(work: Path, recipe: PretrainRecipe) -> None:
    """Refuse a work folder that holds checkpoints of another recipe (`ConfigError`, nothing touched)."""
    for _, path in checkpoints(work):
        info = artifacts.read_manifest_file(path / INFO)
        artifacts.check_same_recipe(info, recipe, path)


def latest(work: Path, recipe: PretrainRecipe) -> tuple[int, dict[str, Any]] | None:
    """The newest checkpoint's step and state (tensors on the CPU), or ``None``; refuses another recipe's."""
    check_work_folder(work, recipe)
    found = checkpoints(work)
    if not found:
        return None
    step, path = found[-1]
    return step, torch.load(path / STATE, map_location="cpu", weights_only=True)


def save(work: Path, recipe: PretrainRecipe, step: int, state: dict[str, Any], world_size: int) -> Path:
    """Write the checkpoint of ``step`` whole, then drop all but the newest `KEEP`. Process 0 only."""
    work.mkdir(parents=True, exist_ok=True)
    final = step_folder(work, step)
    staging = work / f".{final.name}.{uuid.uuid4().hex}.tmp"
    staging.mkdir()
    try:
        torch.save(state, staging / STATE)
        artifacts.write_json(
            staging / INFO, artifacts.manifest(recipe, step, finished=False, world_size=world_size)
        )
        fsync_dir(staging)
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    fsync_dir(work)
    for _, old in checkpoints(work)[:-KEEP]:
        shutil.rmtree(old, ignore_errors=True)
    return final
