"""Teacher fine-tuning (`kdgrid teacher finetune`): a task teacher made once, cached by content hash.

Offline there is no fine-tuned teacher (the MiniLM weights are a sentence-embedding model), so one is fine-tuned
on the task's train split, evaluated on its dev sets, and cached under
``kdgrid.assets.cache_dir()/teachers/<hash>/`` where ``<hash>`` is the SHA-256 (16 hex digits) of the base
weights' bytes, the task spec and the recipe. The directory holds what ``save_pretrained`` writes for the model
and the tokenizer, plus ``teacher.json`` (base, task, recipe, dev scores, majority-class baseline). It is written
to a temporary directory and renamed, so a reader never sees half a teacher and two concurrent fine-tunings
cannot corrupt the cache. A teacher that does not beat the majority class on the task's primary metric is an
error, never cached.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from kdgrid.errors import ConfigError, KdgridError

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
    from kdgrid.assets import cache_dir

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
    from kdgrid.core.models import MINILM_ALIAS

    if base == MINILM_ALIAS:
        from kdgrid.assets import teacher_dir

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
    from kdgrid.core.data import get_task

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


def finetune_teacher(
    task_name: str,
    base: str = "minilm-l6",
    recipe: TeacherRecipe | None = None,
    *,
    force: bool = False,
    log: Callable[[str], None] | None = None,
) -> TeacherRecord:
    """Fine-tune ``base`` on a task (or return the cached teacher), evaluate it on every dev set, check it beats
    the majority class on the primary metric of the first dev set, and cache it atomically."""
    from kdgrid.core.data import get_task, load_splits, tokenize_task, train_batches
    from kdgrid.core.evaluate import evaluate
    from kdgrid.core.metrics import majority_baseline
    from kdgrid.core.models import load_pretrained_bert
    from kdgrid.core.optim import build_optimizer

    recipe = recipe or TeacherRecipe()
    say = log or (lambda _message: None)
    task = get_task(task_name)
    key = teacher_key(base, task, recipe)
    final = teacher_cache_root() / key
    if (final / TEACHER_INFO).is_file() and not force:
        say(f"cached teacher {final}")
        return TeacherRecord(final, json.loads((final / TEACHER_INFO).read_text()))

    source = base_source(base)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source)
    tokenized = tokenize_task(task, tokenizer, recipe.max_length, max_train_samples=recipe.max_train_samples)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(recipe.seed)
        model = load_pretrained_bert(
            source, task.num_labels, what="teacher base", ignore_mismatched_sizes=True
        )
        model.train()
        steps_per_epoch = len(train_batches(tokenized["train"], recipe.batch_size, recipe.seed, 0))
        optimizer, scheduler = build_optimizer(
            [model], recipe.lr, recipe.weight_decay, steps_per_epoch * recipe.epochs, recipe.warmup_ratio
        )
        started = time.time()
        for epoch in range(recipe.epochs):
            model.train()
            total = 0.0
            batches = train_batches(tokenized["train"], recipe.batch_size, recipe.seed, epoch)
            for batch in batches:
                out = model(**{k: v for k, v in batch.items() if k != "labels"})
                loss = _supervised_loss(out.logits, batch["labels"], task.is_regression)
                if not math.isfinite(loss.item()):
                    raise KdgridError(f"teacher fine-tuning on {task_name} diverged (loss {loss.item()})")
                loss.backward()
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                total += loss.item()
            say(f"epoch {epoch + 1}/{recipe.epochs}: train loss {total / max(1, len(batches)):.4f}")
    dev = {name: tokenized[name] for name in task.dev_sets}
    scores = evaluate(model, task, dev, recipe.batch_size)
    splits = load_splits(task)
    first_dev = task.dev_sets[0]
    majority = majority_baseline(task, splits["train"][task.label_key], splits[first_dev][task.label_key])
    primary, baseline = scores[first_dev][task.primary_metric], majority[task.primary_metric]
    baseline = 0.0 if math.isnan(baseline) else baseline
    say(f"dev {scores}; majority class {majority}")
    if not primary > baseline + recipe.min_margin:
        raise KdgridError(
            f"the {base} teacher fine-tuned on {task_name} scores {task.primary_metric}={primary:.4f} on "
            f"{first_dev}, not above the majority class ({baseline:.4f}) by more than {recipe.min_margin}; "
            "not cached: change the recipe (--epochs, --lr) and try again"
        )
    info = {
        "base": base,
        "base_source": source,
        "base_sha256": base_digest(base),
        "task": task.name,
        "recipe": dataclasses.asdict(recipe),
        "dev_scores": scores,
        "majority_baseline": majority,
        "primary_metric": task.primary_metric,
        "train_seconds": round(time.time() - started, 1),
        "key": key,
    }
    return _write_atomically(final, model, tokenizer, info)


def _supervised_loss(logits: torch.Tensor, labels: torch.Tensor, regression: bool) -> torch.Tensor:
    if regression:
        return torch.nn.functional.mse_loss(logits.squeeze(-1), labels.float())
    return torch.nn.functional.cross_entropy(logits, labels)


def _write_atomically(final: Path, model: Any, tokenizer: Any, info: dict[str, Any]) -> TeacherRecord:
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / TEACHER_INFO).write_text(json.dumps(info, indent=1, sort_keys=True))
        if final.exists():
            shutil.rmtree(final)  # only reached with force=True, or a directory left without teacher.json
        try:
            os.rename(tmp, final)
        except OSError:
            # Another process cached the same teacher first: theirs is as good as ours.
            if not (final / TEACHER_INFO).is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return TeacherRecord(final, json.loads((final / TEACHER_INFO).read_text()))
