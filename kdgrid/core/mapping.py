"""The module a learnable layer-matching strategy trains: `LayerMapping`, and `build_mapping` for a trial.

A learnable strategy (`kdgrid.core.matching.register_strategy` with ``mapping=``) builds, per trial, a
`LayerMapping` from its `kdgrid.core.matching.MappingContext`. For each knowledge term on a student layer the
objective hands it that layer's student feature and the teacher's same feature on every transformer layer 1..L_T;
the mapping returns the target the knowledge compares the student with, in place of one teacher layer's feature.
Its parameters train with the student (one AdamW over the student, its projections and its mapping), and reach the
loss through the target: inside `kdgrid.core.teacher.targets.trainable_targets` the losses keep the target's graph
(a fixed teacher layer stays detached). The module is part of the trial's objective, so its state is in every
epoch checkpoint and restored on resume; `LayerMapping.begin_batch` marks each batch's first term;
`LayerMapping.summary` (e.g. the learned weights) goes to the row's
``extra`` as ``mapping`` when the trial finishes.

Methods built this way: LAD (Lin et al., 2023: a gate gives each student layer weights over all teacher layers),
ALP-KD (Passban et al., AAAI 2021: attention over teacher layers from the student's representation).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from kdgrid.core.matching import MappingContext, get_strategy


class LayerMapping(nn.Module):
    """The interface of a learnable strategy's module (subclass it; build the parameters in ``__init__``)."""

    def __init__(self, context: MappingContext) -> None:
        super().__init__()
        self.context = context

    def forward(self, feature: str, student_layer: int, student: Tensor, teacher: Sequence[Tensor]) -> Tensor:
        """The target for ``student_layer``'s ``feature``.

        Args:
            feature: what is matched: ``hidden`` ``[B, L, d]``, ``scores`` ``[B, H, L, L]``, ``query`` /
                ``key`` / ``value`` ``[B, L, d]``.
            student_layer: the student layer (1..L_S) of the term.
            student: the student's feature on that layer (float32, before any projection; it carries the
                student's gradient).
            teacher: the teacher's feature on layers 1..L_T (``teacher[t - 1]`` is layer t), float32, detached.

        Returns:
            A tensor of one teacher layer's shape.
        """
        raise NotImplementedError

    def begin_batch(self) -> None:
        """Called by the objective once per batch, before that batch's terms (which may call ``forward`` several
        times per student layer: one knowledge term each). A mapping that keeps statistics per training example
        (ALP-KD's mean attention) counts a batch once here; nothing by default."""

    def summary(self) -> dict[str, Any]:
        """What the row records of the learned mapping (JSON-able: numbers, lists); empty by default."""
        return {}


def build_mapping(strategy: str | None, context: MappingContext | None) -> LayerMapping | None:
    """The trial's mapping module (None for a fixed strategy, or no strategy).

    Raises:
        TypeError: the strategy's ``mapping`` built something other than a `LayerMapping`.
    """
    if strategy is None or context is None:
        return None
    spec = get_strategy(strategy)
    if spec.mapping is None:
        return None
    module = spec.mapping(context)
    if not isinstance(module, LayerMapping):
        raise TypeError(
            f"strategy {spec.name!r}: its mapping built a {type(module).__name__}, not a "
            "kdgrid.core.mapping.LayerMapping"
        )
    return module
