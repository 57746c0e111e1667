"""Inference with retrieval (Zhang et al., ACL 2023, sec. 3.3): the student's prediction mixed with the soft labels
of its k nearest teacher embeddings in the knowledge base, and the time it costs.

For a dev example with student [CLS] vector ``x`` (unit length), student probabilities ``p = softmax(z_S)`` and
neighbours ``n_1..n_k`` with cosine similarities ``s_j = x . z_{n_j}`` and soft labels ``ybar_{n_j}``::

    w_j   = exp(s_j / tau) / sum_{j'} exp(s_j' / tau)           (the paper's qbar over the k neighbours)
    avg   = sum_j w_j ybar_{n_j}
    mixed = beta * p + (1 - beta) * avg                           (beta = 1: the student alone)

and the prediction is ``argmax(mixed)``. Timing: the student's forward pass on a dev batch and the retrieval
(normalisation, search, mix) are timed apart on the same batches, on the same device, with the device
synchronised around each, so the overhead is measured side by side.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from kdgrid.core.data.batching import eval_batches
from kdgrid.core.methods.reaugkd.knowledge_base import KnowledgeBase, normalize_rows, recall_at_k
from kdgrid.errors import ConfigError
from kdgrid.metrics import compute_metrics


def retrieval_mix(
    student_probs: np.ndarray,
    similarities: np.ndarray,
    neighbour_soft_labels: np.ndarray,
    beta: float,
    tau: float,
) -> np.ndarray:
    """``beta * student_probs + (1 - beta) * sum_j softmax_j(similarities / tau) neighbour_soft_labels_j``.

    Args:
        student_probs: ``[B, C]``; similarities: ``[B, k]``; neighbour_soft_labels: ``[B, k, C]``.
        beta: the student's weight, in [0, 1]; tau: the similarity temperature, > 0.
    Returns:
        ``[B, C]`` mixed probabilities (rows sum to 1 when the inputs' rows do).
    """
    if not 0.0 <= beta <= 1.0:
        raise ConfigError(f"retrieval beta must be in [0, 1], got {beta}")
    if not tau > 0:
        raise ConfigError(f"retrieval tau must be > 0, got {tau}")
    logits = similarities.astype(np.float64) / tau
    logits -= logits.max(axis=1, keepdims=True)
    weights = np.exp(logits)
    weights /= weights.sum(axis=1, keepdims=True)
    retrieved = np.einsum("bk,bkc->bc", weights, neighbour_soft_labels.astype(np.float64))
    return beta * student_probs.astype(np.float64) + (1.0 - beta) * retrieved


@dataclass
class DevOutputs:
    """A student's outputs on one dev set, in the batches' order, and how long its forward passes took.

    Attributes:
        sentence: ``[N, d_S]`` unit-length [CLS] vectors; probs: ``[N, C]``; labels: ``[N]``.
        batches: the eval batches (to put outputs back in the dev set's order).
        forward_seconds: per batch, the student's forward pass (device synchronised).
        batch_sizes: examples per batch.
    """

    sentence: np.ndarray
    probs: np.ndarray
    labels: np.ndarray
    batches: Any
    forward_seconds: list[float] = field(default_factory=list)
    batch_sizes: list[int] = field(default_factory=list)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@torch.no_grad()
def student_dev_outputs(model: Any, split: Any, batch_size: int, device: torch.device) -> DevOutputs:
    """The student's [CLS] vectors and probabilities on a tokenized dev split, each batch's forward timed."""
    model.eval()
    batches = eval_batches(split, batch_size)
    sentence, probs, labels, seconds, sizes = [], [], [], [], []
    for batch in batches:
        inputs = {k: v.to(device) for k, v in batch.items() if k != "labels"}
        _sync(device)
        started = time.perf_counter()
        out = model(**inputs, output_hidden_states=True)
        _sync(device)
        seconds.append(time.perf_counter() - started)
        sizes.append(int(batch["labels"].shape[0]))
        sentence.append(out.hidden_states[-1][:, 0].float().cpu().numpy())
        probs.append(torch.softmax(out.logits.float(), dim=-1).cpu().numpy())
        labels.append(batch["labels"].numpy())
    return DevOutputs(
        normalize_rows(np.concatenate(sentence)),
        np.concatenate(probs),
        np.concatenate(labels),
        batches,
        seconds,
        sizes,
    )


@dataclass(frozen=True)
class RetrievalSettings:
    """k neighbours, the student's weight beta, the similarity temperature tau, the search (``hnsw``/``exact``)."""

    k: int
    beta: float
    tau: float
    index: str = "hnsw"


def retrieve_and_mix(
    kb: KnowledgeBase, outputs: DevOutputs, settings: RetrievalSettings
) -> tuple[np.ndarray, list[float], np.ndarray]:
    """Mixed probabilities ``[N, C]`` for a dev set's outputs, the seconds each batch's retrieval took (search
    and mix, batch by batch as the forward passes ran), and the neighbour ids ``[N, k]``."""
    mixed, seconds, ids_all = [], [], []
    start = 0
    for size in outputs.batch_sizes:
        queries = outputs.sentence[start : start + size]
        started = time.perf_counter()
        sims, ids = kb.search(queries, settings.k, exact=settings.index == "exact")
        mixed.append(
            retrieval_mix(
                outputs.probs[start : start + size], sims, kb.soft_labels[ids], settings.beta, settings.tau
            )
        )
        seconds.append(time.perf_counter() - started)
        ids_all.append(ids)
        start += size
    return np.concatenate(mixed), seconds, np.concatenate(ids_all)


def search_comparison(kb: KnowledgeBase, outputs: DevOutputs, k: int) -> dict[str, float]:
    """Exact against approximate search on the same queries (all of a dev set at once): seconds of each and the
    approximate search's recall of the exact neighbours."""
    started = time.perf_counter()
    _, approximate = kb.search(outputs.sentence, k)
    hnsw_seconds = time.perf_counter() - started
    started = time.perf_counter()
    _, exact = kb.search(outputs.sentence, k, exact=True)
    exact_seconds = time.perf_counter() - started
    return {
        "hnsw_search_s": round(hnsw_seconds, 6),
        "exact_search_s": round(exact_seconds, 6),
        "recall_at_k": recall_at_k(approximate, exact),
    }


def _scores(task: Any, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    return {k: float(v) for k, v in compute_metrics(task, predictions, labels).items()}


def evaluate_with_retrieval(
    model: Any,
    task: Any,
    dev_sets: Mapping[str, Any],
    kb: KnowledgeBase,
    settings: RetrievalSettings,
    batch_size: int,
    device: torch.device,
    on_predictions: Callable[[str, np.ndarray], None] | None = None,
) -> dict[str, Any]:
    """Score a student on each dev set with and without retrieval, from one forward pass, and time both.

    Returns ``{"scores": {dev_set: {metric: v}}`` (with retrieval), ``"scores_without"`` (the student alone),
    ``"latency"`` (per dev set: ms per batch and per example of the student alone and with retrieval, the
    overhead fraction), ``"search"`` (per dev set: `search_comparison`)}. ``on_predictions(dev_set, [N])``
    receives the predictions with retrieval in the dev set's order.
    """
    kb.check_k(settings.k)
    if task.is_regression:
        raise ConfigError(f"retrieval needs a classification task; {task.name!r} is a regression task")
    if kb.soft_labels.shape[1] != task.num_labels:
        raise ConfigError(
            f"the knowledge base holds {kb.soft_labels.shape[1]} classes, task {task.name!r} has {task.num_labels}"
        )
    report: dict[str, Any] = {"scores": {}, "scores_without": {}, "latency": {}, "search": {}}
    for name, split in dev_sets.items():
        outputs = student_dev_outputs(model, split, batch_size, device)
        mixed, retrieval_seconds, _ = retrieve_and_mix(kb, outputs, settings)
        with_retrieval = mixed.argmax(axis=1)
        report["scores"][name] = _scores(task, with_retrieval, outputs.labels)
        report["scores_without"][name] = _scores(task, outputs.probs.argmax(axis=1), outputs.labels)
        forward = float(np.sum(outputs.forward_seconds))
        retrieval = float(np.sum(retrieval_seconds))
        batches, examples = len(outputs.batch_sizes), int(np.sum(outputs.batch_sizes))
        report["latency"][name] = {
            "batches": batches,
            "examples": examples,
            "batch_size": batch_size,
            "student_ms_per_batch": round(1000 * forward / batches, 4),
            "with_retrieval_ms_per_batch": round(1000 * (forward + retrieval) / batches, 4),
            "student_ms_per_example": round(1000 * forward / examples, 5),
            "with_retrieval_ms_per_example": round(1000 * (forward + retrieval) / examples, 5),
            "overhead": round(retrieval / forward, 5) if forward > 0 else None,
        }
        report["search"][name] = search_comparison(kb, outputs, settings.k)
        if on_predictions is not None:
            in_order = np.empty_like(with_retrieval)
            in_order[outputs.batches.order] = with_retrieval  # the batches ran in length order
            on_predictions(name, in_order.astype(np.int64))
    return report
