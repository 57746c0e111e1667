"""Where a recipe's checkpoint lives, whether it exists, and its manifest; the same conventions as the cache of
fine-tuned teachers (`kdgrid.core.model.teacher_cache`): a folder named by the recipe's content key under the kdgrid
cache, holding what ``save_pretrained`` writes for the model and the tokenizer plus a JSON file describing it.

Layout, under ``kdgrid.assets.cache_dir()/pretrained/``:

- ``<key>/``: the finished checkpoint (a ``BertForMaskedLM`` of the student's shape, its tokenizer), with
  ``pretrain.json`` (`MANIFEST`: the recipe, steps done, package versions) and, for general distillation, the
  same text as ``general_distillation.json`` (what ``init: general_distillation`` copies into a trial's result).
  It appears whole, once training has finished: it is filled under a temporary name and renamed (`publish`).
- ``<key>.work/``: the run's step checkpoints (`kdgrid.pretrain.step_checkpoint`), removed once published.
- ``<key>.lock``: the lock of the run making it (`kdgrid.pretrain.claim`: one maker per key), kept.
- ``<key>.recipe.json``: the recipe, as the jobs of `kdgrid run --make-checkpoints` read it, kept;
  ``<key>.<executor>.log``: the output of its jobs made by `kdgrid run --make-checkpoints` (local, ray), kept;
  ``<key>.slurm/<job id>/``: submitit's folder of its SLURM jobs.

Nothing here imports torch: `exists` and `artifact_dir` answer at once (for `kdgrid plan`).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from kdgrid.assets import cache_dir
from kdgrid.atomic_files import fsync_dir, write_file_atomically
from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.errors import ConfigError

MANIFEST = "pretrain.json"
# The note a general-distillation checkpoint carries (its manifest again): `kdgrid.core.job.init` reads it to tell a
# general-distillation folder from any other checkpoint.
GENERAL_DISTILLATION_INFO = "general_distillation.json"
MANIFEST_FORMAT = 1
WORK_SUFFIX = ".work"
LOCK_SUFFIX = ".lock"
VERSIONED_PACKAGES = ("kdgrid", "torch", "transformers", "datasets")


def pretrained_root() -> Path:
    """The folder holding every pre-trained and general-distilled checkpoint."""
    return cache_dir() / "pretrained"


def artifact_dir(recipe: PretrainRecipe) -> Path:
    """Where the finished checkpoint of ``recipe`` is (or will be)."""
    return pretrained_root() / recipe.key


def work_dir(recipe: PretrainRecipe) -> Path:
    """Where the step checkpoints of ``recipe``'s run are kept until it finishes."""
    return pretrained_root() / f"{recipe.key}{WORK_SUFFIX}"


def lock_path(recipe: PretrainRecipe) -> Path:
    """The file whose lock the run making ``recipe``'s checkpoint holds (`kdgrid.pretrain.claim`)."""
    return pretrained_root() / f"{recipe.key}{LOCK_SUFFIX}"


def recipe_path(recipe: PretrainRecipe) -> Path:
    """Where the recipe is written for the jobs that make its checkpoint (`kdgrid.pretrain.checkpoint_grid`)."""
    return pretrained_root() / f"{recipe.key}.recipe.json"


def log_path(recipe: PretrainRecipe, executor: str) -> Path:
    """Where the output of ``recipe``'s jobs run through ``executor`` is appended (`kdgrid.pretrain.checkpoint_grid`)."""
    return pretrained_root() / f"{recipe.key}.{executor}.log"


def exists(recipe: PretrainRecipe) -> bool:
    """Whether the finished checkpoint of ``recipe`` is there (its manifest says so)."""
    manifest = read_manifest(artifact_dir(recipe))
    return manifest is not None and bool(manifest.get("finished"))


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest of a checkpoint folder, or ``None`` when it has none."""
    path = folder / MANIFEST
    if not path.is_file():
        return None
    return read_manifest_file(path)


def read_manifest_file(path: Path) -> dict[str, Any]:
    """A manifest file's content; `ConfigError` naming the file when it is not a JSON object."""
    try:
        data = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"{path} is not a pretrain manifest ({error})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is not a pretrain manifest (not a JSON object)")
    return data


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in VERSIONED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def manifest(recipe: PretrainRecipe, steps_done: int, *, finished: bool, **extra: Any) -> dict[str, Any]:
    """What a checkpoint says about itself: the recipe (and its key), the steps done, whether the run finished,
    the package versions, the time it was written, and ``extra`` (e.g. the number of processes)."""
    return {
        "format": MANIFEST_FORMAT,
        "key": recipe.key,
        "objective": recipe.objective,
        "teacher": recipe.teacher,
        "student": recipe.student,
        "corpus": recipe.corpus,
        "steps": steps_done,
        "finished": finished,
        "recipe": recipe.to_dict(),
        "versions": package_versions(),
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **extra,
    }


def check_same_recipe(found: dict[str, Any], recipe: PretrainRecipe, where: Path) -> None:
    """Refuse (`ConfigError`) a checkpoint written by another recipe: its key names the recipe it belongs to."""
    if found.get("key") != recipe.key:
        raise ConfigError(
            f"{where} belongs to pretrain recipe {found.get('key')!r}, not {recipe.key!r} (this run's); "
            "resume with the recipe that wrote it, or give another work folder. Nothing was overwritten"
        )


def write_json(path: Path, data: dict[str, Any]) -> None:
    text = json.dumps(data, indent=2, sort_keys=True).encode()
    write_file_atomically(path, lambda handle: handle.write(text))


def publish(recipe: PretrainRecipe, fill: Callable[[Path], None], steps_done: int, **extra: Any) -> Path:
    """Make the finished checkpoint of ``recipe`` appear whole: ``fill(folder)`` writes the model and the
    tokenizer into a fresh temporary folder beside the final one, the manifest is added, and the folder is
    renamed into place. A checkpoint already there (another process finished first) is kept. Returns it."""
    final = artifact_dir(recipe)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = final.parent / f".{final.name}.{uuid.uuid4().hex}.tmp"
    staging.mkdir()
    try:
        fill(staging)
        info = manifest(recipe, steps_done, finished=True, **extra)
        write_json(staging / MANIFEST, info)
        if recipe.objective == "general_distillation":
            write_json(staging / GENERAL_DISTILLATION_INFO, info)
        fsync_dir(staging)
        if exists(recipe):
            shutil.rmtree(staging)
            return final
        os.replace(staging, final)
    except OSError:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
        if not exists(recipe):
            raise
        return final
    fsync_dir(final.parent)
    return final
