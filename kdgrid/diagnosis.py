"""The failure modes of a distillation run, read off its curves: each a rule with the evidence that fired it.

`diagnose` judges one row from its step-level curves (`kdgrid.core.training.step_curves`; a row of schema version 2 or
older from its per-epoch curve, `record_from_epochs`), its weights, its status and what its learned parts ended
with. Each flag is ``{"flag": name, "evidence": sentence}``; the rules, in `FLAGS`' order:

- ``divergence``: the trial failed on a non-finite loss (``extra.diverged_at_step``), or the weighted total's
  mean over the last quarter of the points is above `DIVERGENCE_RISE` times its mean over the first tenth.
- ``stalled_student`` (classification): over the last half of the points the hard loss's mean, and the soft
  loss's where it has weight, are within `CHANCE_TOLERANCE` (relative) of chance, ln C for C classes (what a
  student predicting uniform probabilities scores; the soft loss is a cross-entropy against the teacher's
  probabilities, so also ln C at uniform), and the hard loss moved less than that from its first tenth: the
  student learns nothing from either side, whatever its alignment terms do.
- ``projector_overfitting``: the alignment (the sum of the unweighted knowledge terms: every term but ``soft``,
  ``hard`` and a projector penalty) ends at or below `ALIGNMENT_FRACTION` of its start while the hard loss ends
  at or above `TASK_STALL_FRACTION` of its start: mimicry absorbed by the projector (or a target that is trivial
  to match) while the task is not learned. Also raised when the per-epoch rule of
  `kdgrid.core.methods.projectors.overfit` stored its verdict in the row.
- ``gradient_conflict``: the task/distillation gradient cosine (logged with option ``grad_cosine_batches``)
  averages below `COSINE_CONFLICT` over at least `MIN_COSINES` samples; or, over the last half of the points
  (at least `MIN_OSCILLATION_POINTS`), both the weighted task loss and the weighted distillation loss oscillate:
  at least `OSCILLATION_SIGN_CHANGES` of their successive changes flip sign, with a mean change of at least
  `OSCILLATION_AMPLITUDE` of the series' mean level (independent noise flips about 2/3 of the time).
- ``collapsed_mapping``: a learned gate over the teacher's layers (LAD: one weight vector per student layer,
  the same for every example) ended with every row within `UNIFORM_TOLERANCE` (relative) of uniform 1/L_T: the
  student learns from the plain mean of the teacher's layers, not a chosen mapping. Per-example attention
  averaged over the data (ALP-KD) is not judged: a uniform average says nothing about any one example.

A flag is a pointer for a reader, not a verdict on a method: docs/diagnosis.md says what each one means, what it
does not, and the false alarms measured. The thresholds live here and nowhere else. Torch-free and pure.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

DIVERGENCE_RISE = 1.5
CHANCE_TOLERANCE = 0.03
ALIGNMENT_FRACTION = 0.1
TASK_STALL_FRACTION = 0.9
COSINE_CONFLICT = 0.0
MIN_COSINES = 3
MIN_OSCILLATION_POINTS = 8
OSCILLATION_SIGN_CHANGES = 0.8
OSCILLATION_AMPLITUDE = 0.5
UNIFORM_TOLERANCE = 0.1
GATE_METHODS = frozenset({"LAD"})
TASK_TERMS = frozenset({"soft", "hard"})
PENALTY_TERMS = frozenset({"projector_spectral"})

FLAGS: dict[str, str] = {
    "divergence": "the loss went non-finite or rose over training",
    "stalled_student": "soft and hard losses stayed at chance (ln C): the student learned nothing",
    "projector_overfitting": "the alignment loss fell near zero while the task loss stalled",
    "gradient_conflict": "the task and distillation gradients pointed apart, or both losses oscillated",
    "collapsed_mapping": "a learned gate stayed at uniform: the plain mean of the teacher's layers",
}

Flag = dict[str, str]


def _finite(values: Sequence[Any]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def _head(values: Sequence[float]) -> float:
    """Mean of the first tenth of ``values`` (at least one)."""
    n = max(1, len(values) // 10)
    return sum(values[:n]) / n


def _tail(values: Sequence[float], fraction: float = 0.25) -> float:
    """Mean of the last ``fraction`` of ``values`` (at least one)."""
    n = max(1, int(len(values) * fraction))
    return sum(values[-n:]) / n


def _sum_series(series: Mapping[str, Sequence[Any]], names: Sequence[str], length: int) -> list[float]:
    """Point-wise sum of the named series (a point where none has a value is left out)."""
    out = []
    for i in range(length):
        parts = [series[name][i] for name in names if i < len(series[name]) and series[name][i] is not None]
        if parts:
            out.append(float(sum(parts)))
    return out


def record_from_epochs(
    curve: Sequence[Mapping[str, Any]], weights: Mapping[str, float], extra: Mapping[str, Any]
) -> dict[str, Any]:
    """A step-curve record (`kdgrid.core.training.step_curves`' format) made of a per-epoch curve: one point per epoch at
    its last step (``extra.steps_per_epoch`` when known, else the epoch number), each term's epoch mean, the
    weighted means, the epoch's mean cosine. What older rows (schema version <= 2) offer the diagnosis."""
    per_epoch = int(extra.get("steps_per_epoch") or 1)
    steps = [int(entry.get("epoch", i + 1)) * per_epoch for i, entry in enumerate(curve)]
    names: list[str] = []
    for entry in curve:
        names += [name for name in entry.get("loss_terms", {}) if name not in names]
    terms = {name: [entry.get("loss_terms", {}).get(name) for entry in curve] for name in names}
    weighted = {
        name: [None if v is None else weights.get(name, 1.0) * v for v in values] for name, values in terms.items()
    }
    cosines = list(extra.get("grad_cosine") or [])
    return {
        "format": 0,
        "every": per_epoch,
        "steps": steps,
        "terms": terms,
        "weighted": weighted,
        "total": _sum_series(weighted, names, len(steps)) if names else [],
        "cosine": cosines if len(cosines) == len(steps) else [],
        "grad_norm": [],
        "lr": [],
        "mapping": {"steps": [], "values": []},
        "from_epochs": True,
    }


def diagnose(
    record: Mapping[str, Any] | None,
    *,
    status: str = "done",
    weights: Mapping[str, float] | None = None,
    extra: Mapping[str, Any] | None = None,
    num_labels: int | None = None,
) -> list[Flag]:
    """Every flag the rules raise for one row (see the module), in `FLAGS`' order; [] for a healthy row.

    Args:
        record: the row's step curves (or `record_from_epochs`' record); None or empty: only the rules that need
            no curve (a recorded divergence, a gate, a stored projector verdict) are applied.
        status: the row's status.
        weights: each term's weight (the row's ``weights_json``).
        extra: the row's ``extra_json``.
        num_labels: the task's classes (1 for regression); else ``record["num_labels"]``; unknown: no chance rule.
    """
    record = record or {}
    weights = weights or {}
    extra = extra or {}
    flags: list[Flag] = []
    terms: Mapping[str, Sequence[Any]] = record.get("terms") or {}
    steps: Sequence[int] = record.get("steps") or []
    where = "epoch means" if record.get("from_epochs") else f"{len(steps)} points, every {record.get('every')} steps"

    # divergence
    if extra.get("diverged_at_step") is not None:
        pair = extra.get("diverged_pair")
        at = f" (pair {pair[0]}-{pair[1]})" if pair else ""
        flags.append({
            "flag": "divergence",
            "evidence": f"{extra.get('diverged_term')}{at} turned non-finite at step {extra['diverged_at_step']}",
        })  # fmt: skip
    else:
        total = _finite(record.get("total") or [])
        if len(total) >= 4 and _head(total) > 0 and _tail(total) > DIVERGENCE_RISE * _head(total):
            flags.append({
                "flag": "divergence",
                "evidence": f"the weighted total rose from {_head(total):.4g} (first tenth) to {_tail(total):.4g} "
                f"(last quarter), above x{DIVERGENCE_RISE:g} ({where})",
            })  # fmt: skip

    knowledge = [name for name in terms if name not in TASK_TERMS and name not in PENALTY_TERMS]
    alignment = _sum_series(terms, knowledge, len(steps)) if knowledge else []
    hard = _finite(terms.get("hard") or [])
    soft = _finite(terms.get("soft") or [])
    classes = num_labels if num_labels is not None else record.get("num_labels")

    # stalled student
    if classes is not None and int(classes) >= 2 and len(hard) >= 2:
        chance = math.log(int(classes))
        hard_end = _tail(hard, 0.5)
        soft_counts = bool(soft) and weights.get("soft", 1.0) != 0
        soft_end = _tail(soft, 0.5) if soft_counts else None

        def at_chance(value: float) -> bool:
            return abs(value - chance) <= CHANCE_TOLERANCE * chance

        still = abs(hard_end - _head(hard)) <= CHANCE_TOLERANCE * chance
        if at_chance(hard_end) and still and (soft_end is None or at_chance(soft_end)):
            soft_text = f", soft {soft_end:.4f}" if soft_end is not None else ""
            align_text = (
                f"; alignment {_head(alignment):.3g} -> {_tail(alignment, 0.5):.3g}" if len(alignment) >= 2 else ""
            )
            flags.append({
                "flag": "stalled_student",
                "evidence": f"over the last half, hard {hard_end:.4f}{soft_text} at chance ln {classes} = "
                f"{chance:.4f} (within {CHANCE_TOLERANCE:.0%}){align_text} ({where})",
            })  # fmt: skip

    # projector overfitting
    overfit = extra.get("projector_overfit")
    if len(alignment) >= 2 and len(hard) >= 2 and _head(alignment) > 0 and _head(hard) > 0:
        a0, a1, h0, h1 = _head(alignment), _tail(alignment), _head(hard), _tail(hard)
        if a1 <= ALIGNMENT_FRACTION * a0 and h1 >= TASK_STALL_FRACTION * h0:
            flags.append({
                "flag": "projector_overfitting",
                "evidence": f"alignment fell to {a1 / a0:.1%} of its start ({a0:.3g} -> {a1:.3g}) while the hard "
                f"loss kept {h1 / h0:.0%} of its ({h0:.4f} -> {h1:.4f}) ({where})",
            })  # fmt: skip
            overfit = None
    if overfit:
        flags.append({"flag": "projector_overfitting", "evidence": str(overfit)})

    # gradient conflict
    cosines = _finite(record.get("cosine") or [])
    if not cosines:
        cosines = _finite(extra.get("grad_cosine") or [])
    conflict = None
    if len(cosines) >= MIN_COSINES and sum(cosines) / len(cosines) < COSINE_CONFLICT:
        negative = sum(c < 0 for c in cosines)
        conflict = (
            f"mean task/distillation gradient cosine {sum(cosines) / len(cosines):+.3f} over {len(cosines)} "
            f"samples ({negative} negative)"
        )
    weighted: Mapping[str, Sequence[Any]] = record.get("weighted") or {}
    if conflict is None and "hard" in weighted and not record.get("from_epochs"):
        task = _finite(weighted["hard"])
        distill = _sum_series(weighted, [n for n in weighted if n != "hard"], len(steps))
        half_t, half_d = task[len(task) // 2 :], distill[len(distill) // 2 :]
        if min(len(half_t), len(half_d)) >= MIN_OSCILLATION_POINTS:
            t_flip, t_amp = _oscillation(half_t)
            d_flip, d_amp = _oscillation(half_d)
            if min(t_flip, d_flip) >= OSCILLATION_SIGN_CHANGES and min(t_amp, d_amp) >= OSCILLATION_AMPLITUDE:
                conflict = (
                    f"over the last half both oscillate: task {t_flip:.0%} sign flips, mean change {t_amp:.0%} "
                    f"of its level; distillation {d_flip:.0%}, {d_amp:.0%} ({where})"
                )
    if conflict is not None:
        flags.append({"flag": "gradient_conflict", "evidence": conflict})

    # collapsed mapping
    mapping = extra.get("mapping")
    if isinstance(mapping, Mapping) and mapping.get("method") in GATE_METHODS:
        collapsed = _collapsed_rows(mapping.get("weights") or [])
        if collapsed is not None:
            flags.append({"flag": "collapsed_mapping", "evidence": f"{mapping.get('method')} gate: {collapsed}"})
    return flags


def _oscillation(values: Sequence[float]) -> tuple[float, float]:
    """(the fraction of successive changes that flip sign, the mean |change| over the mean |level|)."""
    changes = [b - a for a, b in itertools.pairwise(values)]
    flips = sum(1 for a, b in itertools.pairwise(changes) if a * b < 0)
    level = sum(abs(v) for v in values) / len(values)
    if len(changes) < 2 or level == 0:
        return 0.0, 0.0
    return flips / (len(changes) - 1), sum(abs(c) for c in changes) / len(changes) / level


def _collapsed_rows(rows: Sequence[Sequence[float]]) -> str | None:
    """Why every row of a gate is within `UNIFORM_TOLERANCE` of uniform (a sentence), or None."""
    rows = [list(map(float, row)) for row in rows if len(row) >= 2]
    if not rows:
        return None
    width = len(rows[0])
    deviation = max(abs(w * len(row) - 1) for row in rows for w in row)
    if deviation > UNIFORM_TOLERANCE:
        return None
    low = min(min(row) for row in rows)
    high = max(max(row) for row in rows)
    return (
        f"every one of {len(rows)} rows within {deviation:.1%} of uniform 1/{width} = {1 / width:.3f} "
        f"(weights {low:.3f} .. {high:.3f}; flagged within {UNIFORM_TOLERANCE:.0%})"
    )


def flag_names(flags: Sequence[Mapping[str, str]]) -> list[str]:
    """The flags' names, in order, each once."""
    names: list[str] = []
    for flag in flags:
        if flag["flag"] not in names:
            names.append(flag["flag"])
    return names
