"""The tiny trial the core's tests train: a 2-layer, 32-wide random student on 96 synthetic examples (6 batches
of 16 per epoch), fast enough to train in a test and small enough to compare bit for bit."""

from __future__ import annotations

from kdgrid.core.teacher.options import NOT_MEANT_TO_BE_ACCURATE
from kdgrid.trial import Trial

TINY_TASK = "synthetic-single-binary-n96-d32"


def tiny_trial(teacher: str, **overrides: object) -> Trial:
    """A `Trial` of the tiny student learning from ``teacher`` (a tiny random teacher's path): 2 epochs, lr 2e-3,
    seed 3, batch 16 x 24 tokens unless ``overrides`` say otherwise. ``options`` are merged over
    `NOT_MEANT_TO_BE_ACCURATE` (a random teacher is refused otherwise; these trials exercise the machinery)."""
    options = {**NOT_MEANT_TO_BE_ACCURATE, **dict(overrides.pop("options", {}))}  # type: ignore[call-overload]
    config: dict[str, object] = dict(
        task=TINY_TASK, teacher=teacher, student="w32-l2-h2-f64", init="random", batch_size=16, max_length=24,
        epochs=2, lr=2e-3, seed=3,
    )  # fmt: skip
    config.update(overrides)
    return Trial(**config, options=options)  # type: ignore[arg-type]
