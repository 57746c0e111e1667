"""LAD as a learnable layer-matching strategy, registered without torch (its modules: the gate blocks,
`kdgrid.core.methods.lad.gates`, and kdgrid's earlier softmax gate, `kdgrid.core.methods.lad.gate`).

Lin, Chen & Kao, "LAD: Layer-Wise Adaptive Distillation for BERT Model Compression", Sensors 23(3), 2023. The
option ``lad_form`` chooses the aggregation: ``gates`` (the default, the paper's and the authors' code's,
IKMLab/LAD): the teacher's hidden states aggregated by a chain of highway gate blocks; or ``softmax`` (kdgrid's
earlier form): the target of student layer i is ``sum_t softmax(g_i)_t f_t``, a gate of learned logits ``g_i`` per
student layer over every teacher layer's feature. docs/learned_methods.md gives the formulas and conventions. One
term per student layer, named by its nominal teacher layer (`kdgrid.core.matching.nominal_pairs`).
"""

from __future__ import annotations

import importlib
from typing import Any

from kdgrid.core.knowledge import known_specs
from kdgrid.core.matching import nominal_pairs, register_strategy, strategy_name
from kdgrid.core.method_registry import MethodSpec, Preset, TrialFacts, register_method
from kdgrid.core.options import register_option
from kdgrid.core.step_hooks import StepHooks
from kdgrid.suggest import choice_problem

LAD = "LAD"
DESCRIPTION = "LAD: a learned gate per student layer weights every teacher layer (Lin et al., 2023)"
# LAD's option: its aggregation. "gates" (the default, the paper's chain of highway gate blocks over the teacher's
# hidden states) or "softmax" (kdgrid's earlier form, one softmax gate over every teacher layer per student layer,
# any feature).
LAD_FORM = "lad_form"
LAD_FORMS = ("gates", "softmax")
DEFAULT_LAD_FORM = "gates"


def lad_form(options: Any) -> str:
    """The trial's LAD form (``gates`` unless ``lad_form`` says ``softmax``)."""
    return str(options.get(LAD_FORM, DEFAULT_LAD_FORM))


def build_gate(context: Any) -> Any:
    """LAD's module for a `kdgrid.core.matching.MappingContext` (torch, imported on first use): the gate blocks,
    or kdgrid's softmax gate."""
    if lad_form(context.options) == "softmax":
        return importlib.import_module("kdgrid.core.methods.lad.gate").LadGate(context)
    return importlib.import_module("kdgrid.core.methods.lad.gates").LadGateBlocks(context)


def gate_parameters(context: Any) -> int:
    """LAD's gate blocks: per teacher layer after the first a ``[d_T, d_T]`` map with its bias and a LayerNorm
    affine ``[max_length, d_T]`` twice; the softmax form: one logit per (student layer, teacher layer)."""
    if lad_form(context.options) == "softmax":
        return int(context.student_layers * context.teacher_layers)
    width = context.teacher_width
    return int((context.teacher_layers - 1) * (width * width + width + 2 * context.max_length * width))


def lad_form_problem(value: object) -> str | None:
    """Why ``value`` is not a LAD form (None when it is); names the allowed ones."""
    return choice_problem(LAD_FORM, value, LAD_FORMS)


def form_rule(facts: TrialFacts) -> list[str]:
    """``lad_form`` belongs to strategy LAD; under ``gates`` (the default) the gate blocks aggregate hidden states,
    so knowledge on pairs that reads another feature is refused, naming the way out."""
    trial = facts.trial
    options = dict(trial.options)
    if strategy_name(trial.strategy) != LAD:
        return [f"option {LAD_FORM!r} is {LAD}'s; the trial's strategy is {trial.strategy!r}"] if LAD_FORM in options else []
    if lad_form(options) != "gates":
        return []
    return [
        f"strategy {LAD}'s gate blocks ({LAD_FORM}: gates, the paper's) aggregate the teacher's hidden states; "
        f"knowledge {spec.name!r} reads {', '.join(sorted(spec.needs))}: use hidden-state knowledge, or "
        f"{LAD_FORM}: softmax"
        for spec in known_specs(trial.knowledge)
        if spec.placement == "pairs" and set(spec.needs) != {"hidden"}
    ]


class LadHooks(StepHooks):
    """Which of LAD's forms the row measured."""

    def __init__(self, trial: Any) -> None:
        self.form = lad_form(dict(trial.options))

    def formulation(self, objective: Any) -> dict[str, str]:
        return {LAD_FORM: self.form}


def step_hooks(trial: Any) -> LadHooks:
    """The hooks of a trial with strategy LAD."""
    return LadHooks(trial)


register_strategy(
    LAD,
    distinct_teacher_layers=False,
    description=DESCRIPTION,
    mapping=build_gate,
    mapping_parameters=gate_parameters,
)(nominal_pairs)

register_option(
    LAD_FORM,
    "text",
    DEFAULT_LAD_FORM,
    "strategy LAD: gates (the paper's chain of highway gate blocks over the teacher's hidden states) or softmax "
    "(kdgrid's earlier form: one softmax gate over every teacher layer per student layer, any feature)",
    check=lad_form_problem,
)

register_method(
    MethodSpec(
        name="lad",
        title="LAD: each student layer learns from the teacher's layers aggregated by gate blocks (strategy: LAD; "
        "lad_form softmax: kdgrid's softmax gate)",
        paper="Lin, Chen & Kao, LAD: Layer-Wise Adaptive Distillation for BERT Model Compression, Sensors 2023",
        options=(LAD_FORM,),
        rules=(("options", form_rule),),
        uses=lambda trial: bool(trial.knowledge) and strategy_name(trial.strategy) == LAD,
        hooks="kdgrid.core.methods.lad.spec:step_hooks",
        presets=(
            Preset(
                "paper",
                options=(("learned_lr_scale", 0.05),),
                adapted="the gate blocks learn at 1/20 of the student's learning rate (learned_lr_scale 0.05), the "
                "top of the authors' 1/20 to 1/100 (their own AdamW for the gates); their weight decay 0.01 and "
                "mu are not options: the study's are kept",
            ),
        ),
    )
)
