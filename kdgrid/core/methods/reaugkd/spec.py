"""ReAugKD's spec (Zhang et al., ACL 2023), without torch: its trial options (names, checks, declarations
registered here), the rules a trial using them must follow (`reaugkd_problems`), and its registration. ``kdgrid
plan`` checks them; what a job does for it: `kdgrid.core.methods.reaugkd.pipeline`.

- ``reaugkd_head``: the teacher's sentence vector goes through a frozen, SupCon-trained linear head into the
  student's width (`kdgrid.core.methods.reaugkd.projection_head`); the sentence knowledge (``reaug_relation``) then
  compares the student's own [CLS] vector with it, without a student projection. The trained student is saved
  (`kdgrid.core.methods.reaugkd.pipeline`) so that evaluation-only trials can reuse it.
- ``reaugkd_head_tau``, ``reaugkd_head_epochs``, ``reaugkd_head_lr``, ``reaugkd_head_batch_size``: how the head is
  trained (the paper's A.2: 0.07, 3 epochs, 2e-5, 512).
- ``retrieval_k``, ``retrieval_beta``, ``retrieval_tau``, ``retrieval_index``: evaluation with retrieval: the k
  nearest teacher embeddings of the knowledge base, their soft labels weighted by ``softmax(sim / tau)`` over the
  k, mixed as ``beta * student + (1 - beta) * retrieved`` (the paper's convention: beta weighs the student).
- ``reaugkd_evaluate``: an evaluation-only trial: nothing trains; the student trained by the same settings (the
  trial without its evaluation options, `EVALUATION_OPTIONS`) is evaluated with this trial's retrieval settings,
  so a k x beta sweep reuses one trained student.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kdgrid.core.knowledge import KNOWLEDGE, get_knowledge
from kdgrid.core.method_registry import MethodSpec, TrialFacts, register_method
from kdgrid.core.options import register_option
from kdgrid.errors import ConfigError
from kdgrid.number_range import POSITIVE, NumberRange
from kdgrid.trial import Trial

REAUGKD_HEAD = "reaugkd_head"
HEAD_TAU = "reaugkd_head_tau"
HEAD_EPOCHS = "reaugkd_head_epochs"
HEAD_LR = "reaugkd_head_lr"
HEAD_BATCH_SIZE = "reaugkd_head_batch_size"
RETRIEVAL_K = "retrieval_k"
RETRIEVAL_BETA = "retrieval_beta"
RETRIEVAL_TAU = "retrieval_tau"
RETRIEVAL_INDEX = "retrieval_index"
EVALUATE = "reaugkd_evaluate"
REAUG_RELATION = "reaug_relation"  # the knowledge that reads the head's output (`kdgrid.core.losses.sentence`)

HEAD_OPTIONS: tuple[str, ...] = (HEAD_TAU, HEAD_EPOCHS, HEAD_LR, HEAD_BATCH_SIZE)
RETRIEVAL_OPTIONS: tuple[str, ...] = (RETRIEVAL_K, RETRIEVAL_BETA, RETRIEVAL_TAU, RETRIEVAL_INDEX)
# The options that change only how a trained student is evaluated, never its weights: a trial without them
# names the trained student (`student_key`).
EVALUATION_OPTIONS: tuple[str, ...] = (*RETRIEVAL_OPTIONS, EVALUATE)
INDEX_KINDS: tuple[str, ...] = ("hnsw", "exact")

DEFAULT_BETA = 0.5
DEFAULT_TAU = 0.07  # the paper's temperature (its eq. 1-2 and SupCon's)
# The head's training, the paper's A.2: 3 epochs, AdamW at 2e-5, batches of 512.
DEFAULT_HEAD_EPOCHS = 3
DEFAULT_HEAD_LR = 2e-5
DEFAULT_HEAD_BATCH_SIZE = 512


def _beta_problem(value: Any) -> str | None:
    return NumberRange(low=0, high=1).problem(
        RETRIEVAL_BETA,
        value,
        "the student's weight in the retrieval mix: 1 = the student alone, 0 = the retrieved soft labels alone",
    )


def _positive_problem(name: str, meaning: str) -> Any:
    return POSITIVE.checker(name, meaning)


def _index_problem(value: Any) -> str | None:
    if value in INDEX_KINDS:
        return None
    return f"option {RETRIEVAL_INDEX}={value!r} is invalid; allowed: {', '.join(INDEX_KINDS)}"


def _declare(name: str, kind: str, default: Any, meaning: str, **rule: Any) -> dict[str, Any]:
    return {"name": name, "kind": kind, "default": default, "meaning": meaning, **rule}


# What this spec registers (`register_option`'s keyword arguments), one entry per option.
OPTION_DECLARATIONS: tuple[dict[str, Any], ...] = (
    _declare(
        REAUGKD_HEAD,
        "bool",
        False,
        "ReAugKD: the teacher's sentence vector through a SupCon-trained head into the student's width; the "
        "student is saved for retrieval (docs/reaugkd.md)",
    ),
    _declare(
        HEAD_TAU,
        "number",
        DEFAULT_TAU,
        "ReAugKD head: the supervised contrastive loss's temperature",
        check=_positive_problem(HEAD_TAU, "the supervised contrastive loss's temperature"),
    ),
    _declare(
        HEAD_EPOCHS,
        "int",
        DEFAULT_HEAD_EPOCHS,
        "ReAugKD head: training epochs over the train split",
        minimum=1,
    ),
    _declare(
        HEAD_LR,
        "number",
        DEFAULT_HEAD_LR,
        "ReAugKD head: AdamW learning rate",
        check=_positive_problem(HEAD_LR, "the head's AdamW learning rate"),
    ),
    _declare(
        HEAD_BATCH_SIZE,
        "int",
        DEFAULT_HEAD_BATCH_SIZE,
        "ReAugKD head: examples per supervised contrastive batch",
        minimum=2,
    ),
    _declare(
        RETRIEVAL_K,
        "int",
        None,
        "ReAugKD: evaluate with retrieval of this many nearest neighbours",
        minimum=1,
    ),
    _declare(
        RETRIEVAL_BETA,
        "number",
        DEFAULT_BETA,
        "ReAugKD: the student's weight in the retrieval mix, in [0, 1]",
        check=_beta_problem,
    ),
    _declare(
        RETRIEVAL_TAU,
        "number",
        DEFAULT_TAU,
        "ReAugKD: the temperature of the neighbours' similarity weights",
        check=_positive_problem(RETRIEVAL_TAU, "the temperature of the neighbours' similarity weights"),
    ),
    _declare(
        RETRIEVAL_INDEX,
        "text",
        "hnsw",
        "ReAugKD: the search that finds the neighbours: hnsw (approximate, faiss) or exact",
        check=_index_problem,
    ),
    _declare(
        EVALUATE,
        "bool",
        False,
        "ReAugKD: evaluation only: evaluate the student trained by the same settings (without the retrieval "
        "options) with this trial's retrieval settings; nothing trains",
    ),
)


def uses_head(trial: Trial) -> bool:
    """Whether the trial trains (or evaluates) a student against the SupCon-trained teacher head."""
    return bool(trial.option(REAUGKD_HEAD, False))


def retrieval_k(trial: Trial) -> int | None:
    """The trial's k, or None when it is not evaluated with retrieval."""
    value = trial.option(RETRIEVAL_K)
    return None if value is None else int(value)


def evaluation_only(trial: Trial) -> bool:
    """Whether the trial only evaluates a student trained by another trial (`student_key`)."""
    return bool(trial.option(EVALUATE, False))


def student_trial(trial: Trial) -> Trial:
    """The trial that trains the student ``trial`` uses: ``trial`` without its evaluation options
    (`EVALUATION_OPTIONS`), whose id is the student's key. Trials that differ only in those options train the
    very same student."""
    options = {name: value for name, value in trial.options if name not in EVALUATION_OPTIONS}
    return Trial(**{**trial.to_dict(), "knowledge": tuple(trial.knowledge), "options": options})


def head_knowledge_problems(knowledge: Sequence[str]) -> list[str]:
    """What ``reaugkd_head: true`` cannot go with, given the trial's ``knowledge`` (any accepted names; an unknown
    one is left to its own check): without ``reaug_relation`` nothing reads the head's output (the head and the
    knowledge base would be built for nothing), and the objective feeds the head's output, in place of the
    teacher's sentence vector, to every knowledge that reads the sentence vector, so another such knowledge
    (``contrastive``) would silently compare the student with the head's output."""
    names = []
    for name in knowledge:
        try:
            names.append(get_knowledge(name).name)
        except ConfigError:
            continue
    problems: list[str] = []
    if REAUG_RELATION not in names:
        problems.append(
            f"option {REAUGKD_HEAD} needs knowledge {REAUG_RELATION!r}, the only knowledge that reads the head's "
            f"output; here knowledge {list(knowledge)}"
        )
    others = sorted({n for n in names if n != REAUG_RELATION and "sentence" in KNOWLEDGE[n].needs})
    if others:
        problems.append(
            f"option {REAUGKD_HEAD} cannot go with knowledge {', '.join(others)}: the head's output replaces the "
            f"teacher's sentence vector for every knowledge that reads it, so they would compare the student "
            f"with the head's output; sentence knowledge allowed with the head: {REAUG_RELATION}"
        )
    return problems


def reaugkd_problems(trial: Trial, regression: bool | None) -> list[str]:
    """What makes a trial's ReAugKD options impossible together (empty when they can run), the head's knowledge
    included (`head_knowledge_problems`); ``regression`` is
    whether the trial's task has one output (None: unknown, its checks are skipped). The values themselves are
    checked by their declarations; ``k`` against the knowledge base's size where ``max_train_samples`` tells it
    (else when the job has its train split, before anything trains)."""
    problems: list[str] = []
    set_names = {name for name, value in trial.options if value is not None}
    k = retrieval_k(trial)
    if k is None:
        stray = sorted(set_names & set((*RETRIEVAL_OPTIONS[1:], EVALUATE)))
        if stray:
            problems.append(f"option(s) {', '.join(stray)} need {RETRIEVAL_K} (retrieval is off without it)")
    elif not uses_head(trial):
        problems.append(
            f"option {RETRIEVAL_K} needs {REAUGKD_HEAD}: true (the knowledge base holds the teacher's embeddings "
            "through its SupCon-trained head, in the student's width)"
        )
    if uses_head(trial):
        problems += head_knowledge_problems(trial.knowledge)
    head_settings = sorted(set_names & set(HEAD_OPTIONS))
    if head_settings and not uses_head(trial):
        problems.append(f"option(s) {', '.join(head_settings)} need {REAUGKD_HEAD}: true")
    if regression and (uses_head(trial) or k is not None):
        problems.append(
            f"ReAugKD ({REAUGKD_HEAD}, {RETRIEVAL_K}) needs a classification task: the head is trained with a "
            f"supervised contrastive loss over classes and retrieval mixes class probabilities; {trial.task!r} "
            "is a regression task"
        )
    if k is not None and trial.max_train_samples is not None and k > trial.max_train_samples:
        problems.append(
            f"option {RETRIEVAL_K}={k} is invalid; allowed: at most the knowledge base's size, "
            f"{trial.max_train_samples} training examples (max_train_samples)"
        )
    return problems


def reaugkd_rule(facts: TrialFacts) -> list[str]:
    """`reaugkd_problems` of a trial, knowing its task's kind where known."""
    return reaugkd_problems(facts.trial, facts.regression)


for _declaration in OPTION_DECLARATIONS:
    register_option(**_declaration)

register_method(
    MethodSpec(
        name="reaugkd",
        title="ReAugKD: a SupCon-trained teacher head, a knowledge base of teacher embeddings and retrieval at "
        "inference (reaugkd_head, retrieval_k)",
        paper="Zhang, Shen, Tao, Wang, Niu & Li, ReAugKD: Retrieval-Augmented Knowledge Distillation For "
        "Pre-trained Language Models, ACL 2023",
        options=tuple(declaration["name"] for declaration in OPTION_DECLARATIONS),
        rules=(("values", reaugkd_rule),),
        evaluates_only=evaluation_only,
        uses=lambda trial: uses_head(trial) or evaluation_only(trial),
        hooks="kdgrid.core.methods.reaugkd.pipeline:step_hooks",
    )
)
