"""Teacher fine-tuning (`kdgrid teacher finetune`): a task teacher made once, cached by content hash.

Offline there is no fine-tuned teacher (the MiniLM weights are a sentence-embedding model), so one is fine-tuned
on the task's train split, evaluated on its dev sets, and cached (`kdgrid.core.model.teacher_cache` says where and under
which key) with ``teacher.json`` (base, task, recipe, dev scores, majority-class baseline). It is written
to a temporary directory and renamed, so a reader never sees half a teacher and two concurrent fine-tunings
cannot corrupt the cache. A teacher that does not beat the majority class on the task's primary metric is an
error, never cached.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer

from kdgrid.core.data import get_task, load_splits
from kdgrid.core.data.batching import train_batches
from kdgrid.core.data.tokenization import tokenize_task
from kdgrid.core.model.evaluate import evaluate_dev_sets
from kdgrid.core.model.models import load_pretrained_bert
from kdgrid.core.model.teacher_cache import (
    TEACHER_INFO,
    TeacherRecipe,
    TeacherRecord,
    base_digest,
    base_source,
    teacher_cache_root,
    teacher_key,
)
from kdgrid.core.optim import build_optimizer
from kdgrid.errors import KdgridError
from kdgrid.metrics import majority_baseline


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
    recipe = recipe or TeacherRecipe()
    say = log or (lambda _message: None)
    task = get_task(task_name)
    key = teacher_key(base, task, recipe)
    final = teacher_cache_root() / key
    if (final / TEACHER_INFO).is_file() and not force:
        say(f"cached teacher {final}")
        return TeacherRecord(final, json.loads((final / TEACHER_INFO).read_text()))

    source = base_source(base)
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokenized = tokenize_task(task, tokenizer, recipe.max_length, max_train_samples=recipe.max_train_samples)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(recipe.seed)
        model = load_pretrained_bert(
            source, task.num_labels, what="teacher base", fresh_head=True, ignore_mismatched_sizes=True
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
    scores = evaluate_dev_sets(model, task, dev, recipe.batch_size).scores
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
