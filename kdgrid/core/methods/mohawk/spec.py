"""MOHAWK as a method, without torch: its option ``mohawk_stage`` (1, 2 or 3), the rules a stage's trial must
follow (``kdgrid plan`` checks them before anything runs) and its registration; its part in training is
`kdgrid.core.methods.mohawk.hooks`.

A MOHAWK stage is a trial of an SSM student (docs/ssm.md) with the option ``mohawk_stage``:

- **1, matrix orientation**: per layer l, teacher-forced (student layer l is fed the teacher's hidden state
  entering layer l), ``L1(l) = mean_{b,h} || M^S_{b,h} - A^T_{b,h} ||_F`` between the student's mixing matrix and
  the teacher's post-softmax attention, over real token pairs; the sum over layers (each weighted by ``beta``) is
  the loss. Only the mixers' C, B, decay and D shape M, so only they train.
- **2, hidden-state alignment**: per layer, teacher-forced, ``L2(l) = mean_{b,t} || y^S_{b,t} - y^T_{b,t} ||_2``
  between the student's mixer sub-layer output and the teacher's self-attention sub-layer output (the output
  projection's, before dropout, residual and LayerNorm), over real tokens: the whole mixer trains.
- **3, weight transfer and distillation**: the teacher's embeddings, feed-forwards, LayerNorms, pooler and
  classifier are copied into the student (its mixers are kept: fresh, or from the stage before), then the trial
  trains end to end with kdgrid's objective (its soft labels, hard labels and knowledge, as any trial).

Each stage's student starts from the stage before's through ``init_from: trial:<id>`` (a sweep writes
``init_from: study:<name>``; `kdgrid.grid.stages`). A stage's budget is its trial's ``epochs`` x
``max_train_samples`` examples (both trial fields; the paper splits its tokens 80M / 160M / 2.76B).

Stages 1 and 2 have their own loss: they refuse knowledge, soft and hard labels (``soft_weight: 0``, ``alpha:
0``, no ``knowledge``), ``beta: auto`` and the options that change an objective they do not use
(`TEACHER_FORCED_OPTIONS` are those they take), so that a row never claims a term or a method that did not train. Every stage
needs a teacher of the student's depth and head count (one mixing head per attention head, layer l to layer l);
stages 2 and 3 also its width, and stage 3 its feed-forward size (the copied weights must fit).
"""

from __future__ import annotations

from typing import Any

from kdgrid.core.method_registry import MethodSpec, TrialFacts, register_method
from kdgrid.core.model.shapes import StudentShape, is_ssm_name
from kdgrid.core.options import MAX_DEV_SAMPLES, register_option
from kdgrid.trial import DATA_SEED, TEACHER_GATE, TEACHER_LABEL_ORDER, Trial

MOHAWK_STAGE = "mohawk_stage"
STAGES = (1, 2, 3)

TEACHER_FORCED_STAGES = (1, 2)
TERM_NAMES = {1: "mohawk_matrix", 2: "mohawk_hidden"}
"""The loss terms of the teacher-forced stages, named ``{term}@{l}-{l}`` per layer in a row's loss terms."""
# The options a teacher-forced stage takes: its own, the data order, the teacher's, clipping and the dev sample.
# Every other option changes the objective it does not use (LKD, DOT, curricula, schedules, example weights, ...).
TEACHER_FORCED_OPTIONS = frozenset(
    {MOHAWK_STAGE, DATA_SEED, TEACHER_GATE, TEACHER_LABEL_ORDER, MAX_DEV_SAMPLES, "max_grad_norm"}
)


def stage_problem(value: Any) -> str | None:
    """Why ``mohawk_stage`` = ``value`` is not allowed (None when it is)."""
    if isinstance(value, int) and not isinstance(value, bool) and value in STAGES:
        return None
    return f"option {MOHAWK_STAGE}={value!r} is invalid; allowed: 1, 2, 3 (docs/ssm.md)"


def stage_of(trial: Trial) -> int | None:
    """The trial's MOHAWK stage, or None."""
    value = trial.option(MOHAWK_STAGE)
    return None if value is None else int(value)


def is_teacher_forced(trial: Trial) -> bool:
    """Whether the trial trains by MOHAWK's teacher-forced stage 1 or 2 (its own objective)."""
    return stage_of(trial) in TEACHER_FORCED_STAGES


def mohawk_problems(trial: Trial, student: StudentShape | None, teacher: StudentShape | None) -> list[str]:
    """What keeps a trial from being the MOHAWK stage it names (empty when it can run, or it names none).
    ``student`` or ``teacher`` None (not known yet, or only the network could tell) skips the shape checks."""
    stage = stage_of(trial)
    if stage is None or stage_problem(stage) is not None:
        return []
    if not is_ssm_name(trial.student):
        return [f"option {MOHAWK_STAGE} distils into an SSM student (ssm-l..-h..-a..), not {trial.student!r}"]
    problems: list[str] = []
    if stage in TEACHER_FORCED_STAGES:
        if trial.knowledge or trial.soft_weight != 0 or trial.alpha != 0:
            problems.append(
                f"MOHAWK stage {stage} trains on its own loss ({TERM_NAMES[stage]}): set soft_weight: 0 and "
                f"alpha: 0 and no knowledge (here soft_weight {trial.soft_weight:g}, alpha {trial.alpha:g}, "
                f"knowledge {list(trial.knowledge)})"
            )
        if isinstance(trial.beta, str):
            problems.append(f"MOHAWK stage {stage} weighs its layers by a number beta, not {trial.beta!r}")
        others = sorted(name for name, _ in trial.options if name not in TEACHER_FORCED_OPTIONS)
        if others:
            problems.append(
                f"MOHAWK stage {stage} trains on its own loss: option(s) {', '.join(others)} do not apply to it "
                f"(it takes {', '.join(sorted(TEACHER_FORCED_OPTIONS))})"
            )
    if student is None or teacher is None:
        return problems
    needed = {"layers": (student.layers, teacher.layers), "heads": (student.heads, teacher.heads)}
    if stage >= 2:
        needed["width"] = (student.width, teacher.width)
    if stage == 3:
        needed["ffn"] = (student.ffn, teacher.ffn)
    wrong = {name: pair for name, pair in needed.items() if pair[0] != pair[1]}
    if wrong:
        listed = ", ".join(f"{name} {s} (teacher {t})" for name, (s, t) in wrong.items())
        problems.append(
            f"MOHAWK stage {stage} needs the student's {', '.join(needed)} equal to the teacher's: {listed}"
        )
    return problems


def combination_rule(facts: TrialFacts) -> list[str]:
    """`mohawk_problems` with the shapes the trial rules found, where known."""
    return mohawk_problems(facts.trial, facts.student, facts.teacher)


def uses_mohawk(trial: Trial) -> bool:
    """Whether the trial is a stage of MOHAWK (``mohawk_stage`` set)."""
    return trial.option(MOHAWK_STAGE) is not None


register_option(
    MOHAWK_STAGE,
    "int",
    None,
    "MOHAWK's stage of an SSM student: 1 matrix orientation, 2 hidden-state alignment, 3 weight transfer and "
    "end-to-end distillation (docs/ssm.md)",
    check=stage_problem,
)

register_method(
    MethodSpec(
        name="mohawk",
        title="MOHAWK: a Transformer distilled into an SSM student in three stages, each a trial the next starts "
        "from: matrix orientation, hidden-state alignment (both teacher-forced), weight transfer and end-to-end "
        "distillation (mohawk_stage)",
        paper="Bick, Li, Xing, Kolter & Gu, Transformers to SSMs: Distilling Quadratic Knowledge to Subquadratic "
        "Models, NeurIPS 2024 (arXiv 2408.10189)",
        options=(MOHAWK_STAGE,),
        rules=(("combination", combination_rule),),
        uses=uses_mohawk,
        own_loss=is_teacher_forced,
        hooks="kdgrid.core.methods.mohawk.hooks:step_hooks",
    )
)
