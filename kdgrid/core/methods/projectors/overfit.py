"""Projector overfitting: the projected alignment loss falls near zero while the task metric stalls.

An expressive projector (``mlp``, ``ensemble``) can absorb the mimicry itself: the projection learns to map
whatever the student computes onto the teacher's features, the alignment loss falls, and the student gains
nothing on its task (Chen et al., "Improved Feature Distillation via Projector Ensemble", NeurIPS 2022, discuss
the projector's role in what the student learns). A done trial is flagged when, over its curve (one entry per
epoch, `kdgrid.result.TrialResult.curve`), both hold:

- **the alignment loss fell near zero**: ``A_last <= ALIGNMENT_FRACTION * A_1``, where ``A_e`` is the sum over
  the trial's projected loss terms of their unweighted mean over epoch e (the curve's ``loss_terms``);
- **the task metric stalled**: ``max_{e >= 2} score_e - score_1 < STALL_GAIN``, the task's primary metric on its
  first dev set (``accuracy``, ``matthews_corrcoef``, ``pearson``: each a number on its own 0-1 scale, or -1..1).

A trial with fewer than `MIN_EPOCHS` epochs, no projected term, or a first-epoch alignment loss that is not
positive is never flagged. The thresholds live here and nowhere else. The verdict is stored in the row
(``extra["projector_overfit"]``, a sentence, absent when not flagged); `kdgrid status` counts and names the
flagged trials and the report's trial page shows it. Torch-free.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

ALIGNMENT_FRACTION = 0.05  # the alignment loss ends at or below 5% of its first epoch's mean
STALL_GAIN = 0.01  # the primary metric gains less than 0.01 over its first epoch's value
MIN_EPOCHS = 2
EXTRA_KEY = "projector_overfit"  # where a row keeps the verdict (its extra_json)


def projector_overfit(
    curve: Sequence[Mapping[str, Any]], projected_terms: Sequence[str], dev_set: str, metric: str
) -> str | None:
    """Why the curve shows projector overfitting (one sentence), or None when it does not (see the module).

    Args:
        curve: per epoch, ``{"epoch": e, "scores": {dev_set: {metric: value}}, "loss_terms": {term: value}}``.
        projected_terms: the names of the trial's projected loss terms.
        dev_set, metric: the task's first dev set and its primary metric.
    """
    if len(curve) < MIN_EPOCHS or not projected_terms:
        return None

    def alignment(entry: Mapping[str, Any]) -> float:
        terms = entry.get("loss_terms", {})
        return float(sum(terms.get(name, math.nan) for name in projected_terms))

    def score(entry: Mapping[str, Any]) -> float:
        return float(entry.get("scores", {}).get(dev_set, {}).get(metric, math.nan))

    first, last = alignment(curve[0]), alignment(curve[-1])
    if not (math.isfinite(first) and math.isfinite(last)) or first <= 0:
        return None
    start = score(curve[0])
    later = [score(entry) for entry in curve[1:]]
    if not math.isfinite(start) or not all(math.isfinite(value) for value in later):
        return None
    gain = max(later) - start
    if last <= ALIGNMENT_FRACTION * first and gain < STALL_GAIN:
        return (
            f"the projected alignment loss fell to {last / first:.1%} of its first "
            f"epoch's ({first:.4g} -> {last:.4g}) while {metric} on {dev_set} gained {gain:+.4f} "
            f"(flagged at <= {ALIGNMENT_FRACTION:.0%} and < {STALL_GAIN:g})"
        )
    return None
