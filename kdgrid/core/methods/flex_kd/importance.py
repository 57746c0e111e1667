"""Flex-KD's importance pass and selection (kdgrid's reading, `kdgrid.core.methods.flex_kd.spec`).

`importance_scores` runs the frozen teacher over training examples with gradients and returns, per teacher layer,
the mean absolute gradient of its task loss with respect to each hidden dimension over every real token.
`job_scores` does this once per content (`score_key`: the teacher's weights, the task, the training examples as
tokenized, the teacher's label order, the layer, the reading's version) and caches each layer's scores under
``$KDGRID_CACHE/flex_kd/<key>.json``, written atomically; a later job (or trial) with the same content reads them.
`select_dimensions` keeps the d_S highest.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from kdgrid.assets import cache_dir
from kdgrid.atomic_files import write_file_atomically
from kdgrid.core.data.batching import eval_batches
from kdgrid.core.data.holdout import subset
from kdgrid.core.job.loaded_job import LoadedJob
from kdgrid.core.model.evaluate import dev_fingerprint
from kdgrid.core.model.teacher_cache import base_digest
from kdgrid.errors import ConfigError

CACHE = "flex_kd"
# The reading of the score: a change to `importance_scores` that moves any number must change it (new cache keys).
SCORE_VERSION = 1
SCORE = "mean |d task loss / d h| over real tokens, teacher eval mode, float32"
# Examples per batch of the importance pass: its peak is the teacher's activations of one batch kept for backward.
PASS_BATCH_SIZE = 16

# Scores already read or computed in this process, by cache key: the trials of a job share one pass.
_MEMO: dict[str, np.ndarray] = {}
# The teacher's weight digest of the last job (hashing a large teacher's files takes seconds: once per job).
_DIGEST: dict[int, tuple[weakref.ref[Any], str]] = {}


def importance_scores(
    model: Any,
    split: Any,
    layers: Sequence[int],
    *,
    regression: bool,
    device: torch.device | str,
    align: Callable[[torch.Tensor], torch.Tensor] | None = None,
    batch_size: int = PASS_BATCH_SIZE,
) -> dict[int, np.ndarray]:
    """Per teacher layer l of ``layers`` (0 = the embeddings' output), ``[d_T]`` float64: ``s_j = sum_n sum_{t
    real} |dL_n / dh^l_{n,t,j}| / (number of real tokens)``, ``L_n`` the teacher's loss on example n of ``split``
    (cross-entropy of its logits, put in the task's label order by ``align``, against the gold label; squared error
    of its one output for regression). The model's parameters get no gradient (the gradient is taken with respect
    to its input embeddings and hidden states only); eval mode, no autocast, no random number drawn."""
    model.eval()
    embed = model.get_input_embeddings()
    wanted = sorted(set(layers))
    totals: dict[int, torch.Tensor] = {}
    tokens = 0
    for batch in eval_batches(split, batch_size):
        batch = {k: v.to(device) for k, v in batch.items()}
        mask = batch["attention_mask"]
        with torch.enable_grad():
            # The teacher is frozen (no parameter needs a gradient): its input embeddings do, so its hidden states
            # are in a graph the loss's gradient reaches.
            inputs = embed(batch["input_ids"]).detach().float().requires_grad_(True)
            out = model(
                inputs_embeds=inputs,
                attention_mask=mask,
                token_type_ids=batch.get("token_type_ids"),
                output_hidden_states=True,
            )
            logits = out.logits.float()
            logits = align(logits) if align is not None else logits
            labels = batch["labels"]
            if regression:
                loss = (logits[:, 0] - labels.float()).pow(2).sum()
            else:
                loss = F.cross_entropy(logits, labels.long(), reduction="sum")
            grads = torch.autograd.grad(loss, [out.hidden_states[layer] for layer in wanted])
        real = mask.bool()
        for layer, grad in zip(wanted, grads, strict=True):
            summed = grad.detach().abs()[real].double().sum(0)
            totals[layer] = summed if layer not in totals else totals[layer] + summed
        tokens += int(real.sum())
    if tokens == 0:
        raise ConfigError("Flex-KD's importance pass got no real token: the training split is empty")
    return {layer: (totals[layer] / tokens).cpu().numpy() for layer in wanted}


def select_dimensions(scores: np.ndarray, width: int) -> list[int]:
    """The ``width`` dimensions of highest score (ties to the lower index), in ascending order.

    Raises:
        ConfigError: ``width`` is not in 1..len(scores).
    """
    if not 1 <= width <= len(scores):
        raise ConfigError(
            f"Flex-KD keeps d_S of the teacher's {len(scores)} hidden dimensions: d_S={width} must be in "
            f"1..{len(scores)}"
        )
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    return sorted(int(j) for j in order[:width])


def pass_split(job: LoadedJob, examples: int | None) -> Any:
    """The training examples the pass scores: the job's training split, or its first ``examples``."""
    split = job.tokenized["train"]
    if examples is None or examples >= len(split):
        return split
    return subset(split, np.arange(examples))


def teacher_digest(job: LoadedJob) -> str:
    """SHA-256 of the job's teacher weights (`kdgrid.core.model.teacher_cache.base_digest`), once per job."""
    known = _DIGEST.get(id(job))
    if known is not None and known[0]() is job:
        return known[1]
    digest = base_digest(job.teacher.source)
    _DIGEST.clear()
    _DIGEST[id(job)] = (weakref.ref(job), digest)
    return digest


def score_key(job: LoadedJob, split: Any, layer: int) -> dict[str, Any]:
    """What one layer's scores are computed from (the cache key's content)."""
    order = job.label_order
    return {
        "version": SCORE_VERSION,
        "score": SCORE,
        "teacher": teacher_digest(job),
        "task": job.task.name,
        "examples": dev_fingerprint(split),
        "label_order": "identity" if order is None or order.is_identity else [str(x) for x in order.labels_of()],
        "layer": layer,
    }


def cache_path(key: dict[str, Any]) -> Path:
    """``$KDGRID_CACHE/flex_kd/<24 hex digits of the key's SHA-256>.json``."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    return cache_dir() / CACHE / f"{digest}.json"


def _read(path: Path, key: dict[str, Any]) -> np.ndarray | None:
    if not path.is_file():
        return None
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # a damaged file is computed again and replaced
    if stored.get("key") != key:
        return None
    return np.asarray(stored["scores"], dtype=np.float64)


def job_scores(job: LoadedJob, layers: Sequence[int], examples: int | None) -> tuple[dict[int, np.ndarray], bool]:
    """Each of ``layers``' importance scores for the job's teacher and training data, and whether every one came
    from the cache (in this process or on disk). Missing layers are computed in one pass and each is written to
    its cache file whole (a temporary name renamed)."""
    split = pass_split(job, examples)
    keys = {layer: score_key(job, split, layer) for layer in sorted(set(layers))}
    found: dict[int, np.ndarray] = {}
    for layer, key in keys.items():
        memo_key = json.dumps(key, sort_keys=True)
        scores = _MEMO.get(memo_key)
        if scores is None:
            scores = _read(cache_path(key), key)
        if scores is not None:
            found[layer] = _MEMO.setdefault(memo_key, scores)
    missing = [layer for layer in keys if layer not in found]
    if missing:
        align = job.label_order.align if job.label_order is not None else None
        computed = importance_scores(
            job.teacher_model, split, missing, regression=job.task.is_regression, device=job.runtime.device,
            align=align,
        )  # fmt: skip
        for layer, scores in computed.items():
            key = keys[layer]
            payload = json.dumps({"key": key, "scores": scores.tolist()}, sort_keys=True).encode()
            write_file_atomically(cache_path(key), lambda handle, data=payload: handle.write(data))
            found[layer] = _MEMO.setdefault(json.dumps(key, sort_keys=True), scores)
    return found, not missing
