"""One uniform way to call any registered knowledge from feature dicts (`compute_knowledge`), so a training loop
needs no per-loss code."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from torch import Tensor

from kdgrid.core.knowledge import KnowledgeSpec, get_knowledge
from kdgrid.core.losses._common import zero_padding
from kdgrid.errors import ConfigError


def compute_knowledge(
    name: str,
    student: Mapping[str, Tensor],
    teacher: Mapping[str, Tensor],
    mask: Tensor | None = None,
    *,
    projection: Callable[[Tensor], Tensor] | None = None,
    heads_s: int | None = None,
    heads_t: int | None = None,
    relation_heads: int | None = None,
    temperature: float = 1.0,
    labels: Tensor | None = None,
    options: Mapping[str, Any] | None = None,
) -> Tensor:
    """Compute any registered knowledge from feature dicts, so a training loop needs no per-loss code.

    Args:
        name: a knowledge name (any alias).
        student, teacher: the features of one matched layer pair (or of the output), keyed by the names in
            ``spec.needs``: ``scores`` ``[B, H, L, L]``, ``hidden`` / ``embeddings`` / ``query`` / ``key`` /
            ``value`` ``[B, L, d]``, ``logits`` ``[B, C]``, ``sentence`` ``[B, d]``. Extra keys are ignored.
        mask: ``[B, L]``, 1 = real token (needed by every ``pair`` / ``relation`` knowledge).
        projection: applied to the student's feature first when ``spec.needs_projection`` (e.g. a
            `kdgrid.core.model.projection.Projection`); ``None`` means the widths already agree.
        heads_s, heads_t, relation_heads: head counts for the q/k/v relations (heads_s or relation_heads
            is required; see `query_relation`).
        temperature: the soft-label temperature T.
        labels: gold labels ``[B]`` for ``hard_label``.
        options: the knowledge's keyword variants (``{"scale": "mean"}`` for pkd); unknown keys raise.
    """
    spec = get_knowledge(name)
    opts = dict(options or {})
    allowed = spec.options()
    unknown = sorted(set(opts) - set(allowed))
    if unknown:
        raise ConfigError(
            f"knowledge {spec.name!r} has no option(s) {unknown}; allowed: {sorted(allowed) or 'none'}"
        )
    if spec.call_style == "hard":
        if labels is None:
            raise ConfigError("knowledge 'hard_label' needs the gold labels (labels=...)")
        return spec.fn(_feature(spec, student, "logits", "student"), labels, **opts)
    (need,) = spec.needs
    s = _feature(spec, student, need, "student")
    t = _feature(spec, teacher, need, "teacher")
    if spec.needs_projection and projection is not None:
        if mask is not None and s.dim() == 3 and tuple(mask.shape) == tuple(s.shape[:2]):
            # Zero the padding before projecting: a non-finite padded vector would otherwise turn the
            # projection's weight gradient (a sum over all positions) into NaN.
            s = zero_padding(s, mask.bool())
        s = projection(s)
    if spec.call_style == "soft":
        return spec.fn(s, t, temperature, **opts)
    if spec.call_style == "batch":
        return spec.fn(s, t, **opts)
    if mask is None:
        raise ConfigError(f"knowledge {spec.name!r} needs the padding mask [B, L]")
    if spec.call_style == "relation":
        return spec.fn(s, t, mask, heads_s, heads_t, relation_heads, **opts)
    return spec.fn(s, t, mask, **opts)


def _feature(spec: KnowledgeSpec, features: Mapping[str, Tensor], need: str, side: str) -> Tensor:
    if need not in features:
        raise ConfigError(
            f"knowledge {spec.name!r} needs the {side} feature {need!r}; given: {sorted(features) or 'none'}"
        )
    return features[need]
