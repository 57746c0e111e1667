"""LAD as a learnable layer-matching strategy, registered without torch (the gate: `kdgrid.core.methods.lad.gate`).

Lin, Chen & Kao, "LAD: Layer-Wise Adaptive Distillation for BERT Model Compression", Sensors 23(3), 2023. The
target of student layer i is ``sum_t softmax(g_i)_t f_t``: a gate of learned logits ``g_i`` per student layer over
every teacher layer's feature ``f_t`` (t = 1..L_T); docs/learned_methods.md gives the formula and conventions. One
term per student layer, named by its nominal teacher layer (`kdgrid.core.matching.nominal_pairs`).
"""

from __future__ import annotations

import importlib
from typing import Any

from kdgrid.core.matching import nominal_pairs, register_strategy
from kdgrid.core.method_registry import MethodSpec, register_method

LAD = "LAD"
DESCRIPTION = "LAD: a learned gate per student layer weights every teacher layer (Lin et al., 2023)"


def build_gate(context: Any) -> Any:
    """LAD's module for a `kdgrid.core.matching.MappingContext` (torch, imported on first use)."""
    return importlib.import_module("kdgrid.core.methods.lad.gate").LadGate(context)


def gate_parameters(context: Any) -> int:
    """LAD's gate: one logit per (student layer, teacher layer)."""
    return int(context.student_layers * context.teacher_layers)


register_strategy(
    LAD,
    distinct_teacher_layers=False,
    description=DESCRIPTION,
    mapping=build_gate,
    mapping_parameters=gate_parameters,
)(nominal_pairs)

register_method(
    MethodSpec(
        name="lad",
        title="LAD: each student layer learns from a learned gate over every teacher layer (strategy: LAD)",
        paper="Lin, Chen & Kao, LAD: Layer-Wise Adaptive Distillation for BERT Model Compression, Sensors 2023",
    )
)
