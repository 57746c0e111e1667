"""The cache of fine-tuned teachers: where a teacher made by `kdgrid teacher finetune` lives, and its key.

A cached teacher is ``kdgrid.assets.cache_dir()/teachers/<key>/`` where ``<key>`` is the SHA-256 (16 hex digits)
of the base weights' bytes, the task spec and the recipe (`teacher_key`); the directory holds what
``save_pretrained`` writes for the model and the tokenizer, plus ``teacher.json`` (`TEACHER_INFO`). The trial
alias ``minilm-l6`` (`MINILM_ALIAS`) names the MiniLM base fine-tuned on the trial's task with the default recipe.
Looking a teacher up needs neither torch nor transformers; making one is `kdgrid.core.teacher.finetune.finetune_teacher`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kdgrid.assets import cache_dir, teacher_dir
from kdgrid.core.data.registry import get_task
from kdgrid.errors import ConfigError, KdgridError

MINILM_ALIAS = "minilm-l6"

TEACHER_INFO = "teacher.json"


@dataclass(frozen=True)
class TeacherRecipe:
    """How a teacher is fine-tuned: AdamW with linear warm-up/decay; ``max_length`` in tokens."""

    lr: float = 5e-5
    epochs: int = 3
    batch_size: int = 32
    max_length: int = 128
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    seed: int = 0
    max_train_samples: int | None = None
    min_margin: float = (
        0.0  # the teacher's primary dev metric must exceed the majority class by more than this
    )

    def hashed(self) -> dict[str, Any]:
        """The fields that change the weights (``min_margin`` is a check, not part of the recipe's identity)."""
        fields = dataclasses.asdict(self)
        fields.pop("min_margin")
        return fields


@dataclass(frozen=True)
class TeacherRecord:
    """A cached teacher: its directory and what `teacher.json` says about it."""

    path: Path
    info: dict[str, Any]

    @property
    def dev_scores(self) -> dict[str, dict[str, float]]:
        return self.info["dev_scores"]


def teacher_cache_root() -> Path:
    """The directory holding every cached teacher."""
    return cache_dir() / "teachers"


_DIGESTS: dict[tuple[str, int, float], str] = {}


def _file_digest(path: Path) -> str:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime)
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 22), b""):
                digest.update(chunk)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def base_source(base: str) -> str:
    """The base weights' location: ``minilm-l6`` -> the offline MiniLM directory; else a directory or Hub name."""
    if base == MINILM_ALIAS:
        return str(teacher_dir())
    return base


def base_digest(base: str) -> str:
    """SHA-256 of a local base's weight files (name-independent), or of a Hub name for a Hub base."""
    source = Path(base_source(base)).expanduser()
    if not source.is_dir():
        return hashlib.sha256(f"hub:{base}".encode()).hexdigest()
    files = sorted(p for p in source.iterdir() if p.suffix in (".safetensors", ".bin") and p.is_file())
    if not files:
        raise ConfigError(f"base {base!r}: {source} has no weight files (*.safetensors, *.bin)")
    combined = hashlib.sha256()
    for path in files:
        combined.update(f"{path.name}:{_file_digest(path)}\n".encode())
    return combined.hexdigest()


def teacher_key(base: str, task: Any, recipe: TeacherRecipe) -> str:
    """16 hex digits naming the cached teacher of (base weights, task spec, recipe)."""
    payload = {
        "base": base_digest(base),
        "task": json.loads(json.dumps(dataclasses.asdict(task), default=str)),
        "recipe": recipe.hashed(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def cached_teacher(
    task_name: str, base: str = "minilm-l6", recipe: TeacherRecipe | None = None
) -> TeacherRecord | None:
    """The teacher cached for (base, task, recipe), or None."""
    task = get_task(task_name)
    path = teacher_cache_root() / teacher_key(base, task, recipe or TeacherRecipe())
    info = path / TEACHER_INFO
    if not info.is_file():
        return None
    return TeacherRecord(path, json.loads(info.read_text()))


def finetuned_teacher_dir(task_name: str, base: str = "minilm-l6") -> Path:
    """The cached teacher of ``base`` fine-tuned on a task with the default recipe; `KdgridError` naming the
    command that makes it when it is not cached yet."""
    record = cached_teacher(task_name, base)
    if record is None:
        raise KdgridError(
            f"no fine-tuned {base} teacher for task {task_name!r} in {teacher_cache_root()}; "
            f"run `kdgrid teacher finetune {task_name} --base {base}` first"
        )
    return record.path
