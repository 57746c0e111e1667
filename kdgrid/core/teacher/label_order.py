"""Teacher label alignment: which of the task's labels each teacher output means, and re-ordering its logits.

A classifier checkpoint's output k means whatever label its trainer called k, which need not be the task's label
k: BERT-base MNLI checkpoints of 2019-2020 were trained with the legacy ``run_glue`` processor order
(contradiction, entailment, neutral) while the `datasets` GLUE labels are (entailment, neutral, contradiction).
Soft labels taken from such a teacher unaligned teach every student the wrong classes, and nothing fails.

The order is resolved once per job (`resolve_label_order`), first rule that applies wins:

1. ``declared``: the trial option ``teacher_label_order`` (`kdgrid.core.teacher.options`);
2. ``id2label``: the checkpoint's ``config.id2label`` when its names mean something. Matching rule: a name is
   lower-cased, spaces and hyphens become underscores, and a few spellings are folded (`NAME_ALIASES`: ``pos``
   -> ``positive``, ``non_entailment`` -> ``not_entailment``, ...); every output must then name a distinct label
   of the task. Generic names (``LABEL_0``, ``0``) mean nothing. Meaningful names that do not all match the
   task's (another task's checkpoint, other words) are recorded, not trusted, and the next rules apply;
3. ``known``: `KNOWN_LABEL_ORDERS`, the class orders of the paper's teachers whose configs carry generic names,
   each with its source;
4. ``identity``: output k is label k. The teacher gate (`kdgrid.core.teacher.gate`) checks every order at job
   start, so a wrong identity guess is refused with the declaration that fixes it.

Orders are tuples ``order`` with ``order[k]`` = the task's label id of teacher output k. `LabelOrder.align`
re-orders logits ``[..., C]`` so that column j is label j.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kdgrid.core.teacher.options import TEACHER_LABEL_ORDER
from kdgrid.errors import ConfigError

if TYPE_CHECKING:  # torch is only needed by `LabelOrder.align`, which receives tensors
    import torch

# The label names of the `datasets` GLUE configs (``nyu-mll/glue``, ``features["label"].names``), in label-id
# order; STS-B is a regression and has none.
GLUE_LABEL_NAMES: dict[str, tuple[str, ...]] = {
    "cola": ("unacceptable", "acceptable"),
    "sst2": ("negative", "positive"),
    "mrpc": ("not_equivalent", "equivalent"),
    "qqp": ("not_duplicate", "duplicate"),
    "mnli": ("entailment", "neutral", "contradiction"),
    "qnli": ("entailment", "not_entailment"),
    "rte": ("entailment", "not_entailment"),
}
# The generated pair-3class tasks use MNLI's names and order (`kdgrid.core.data.synthetic`).
SYNTHETIC_LABEL_NAMES: dict[str, tuple[str, ...]] = {"3class-pair": GLUE_LABEL_NAMES["mnli"]}

# Spellings folded onto the GLUE names before matching (after lower-casing, '-' and ' ' -> '_').
NAME_ALIASES: dict[str, str] = {
    "pos": "positive",
    "neg": "negative",
    "entail": "entailment",
    "entailed": "entailment",
    "contradict": "contradiction",
    "non_entailment": "not_entailment",
    "not_entail": "not_entailment",
    "paraphrase": "equivalent",
    "not_paraphrase": "not_equivalent",
    "grammatical": "acceptable",
    "ungrammatical": "unacceptable",
}
GENERIC_NAME = re.compile(r"^(label_?)?\d+$")

_MNLI_LEGACY = ("contradiction", "entailment", "neutral")
_TORCHDISTILL_TASKS = ("cola", "sst2", "mrpc", "qqp", "mnli", "qnli", "rte")

# Class orders of teachers whose configs name their classes LABEL_k, as task label names per output.
# Binary GLUE tasks: the legacy `run_glue` processors of transformers (`data/processors/glue.py`: CoLA, SST-2,
# MRPC and QQP label "0", "1"; QNLI and RTE "entailment", "not_entailment") and the `datasets` GLUE configs give
# the same order, so a checkpoint trained with either has the dataset's order. Only MNLI differs.
KNOWN_LABEL_ORDERS: dict[str, tuple[str, ...]] = {
    # TextAttack's BERT-base GLUE models: binary tasks, the order both pipelines share (above).
    "textattack/bert-base-uncased-CoLA": GLUE_LABEL_NAMES["cola"],
    "textattack/bert-base-uncased-SST-2": GLUE_LABEL_NAMES["sst2"],
    "textattack/bert-base-uncased-MRPC": GLUE_LABEL_NAMES["mrpc"],
    "textattack/bert-base-uncased-QQP": GLUE_LABEL_NAMES["qqp"],
    "textattack/bert-base-uncased-QNLI": GLUE_LABEL_NAMES["qnli"],
    "textattack/bert-base-uncased-RTE": GLUE_LABEL_NAMES["rte"],
    # Not a paper teacher, but the documented case: QData/TextAttack issue 684 ("Wrong label mapping for released
    # model textattack/bert-base-uncased-MNLI": model 0 -> contradiction, 1 -> entailment, 2 -> neutral, which
    # restores its reported 84% accuracy), the legacy processor order.
    "textattack/bert-base-uncased-MNLI": _MNLI_LEGACY,
    # yoshitomo-matsubara's BERT-large GLUE models, MNLI included: the `datasets` order. Their model cards say they
    # were fine-tuned with torchdistill (its GLUE notebook, configs/sample/glue/<task>/ce/bert_large_uncased.yaml),
    # whose Hugging Face example loads `load_dataset("glue", task)` and trains on its integer labels as they are
    # (examples/hf_transformers/custom/dataset.py, `load_raw_glue_datasets_and_misc` / `preprocess_glue_datasets`:
    # labels are remapped only when the model's config already names its labels, and bert-large-uncased's do not).
    **{f"yoshitomo-matsubara/bert-large-uncased-{task}": GLUE_LABEL_NAMES[task] for task in _TORCHDISTILL_TASKS},
    # ishan/bert-base-uncased-mnli (the paper's MNLI BERT-base teacher) is deliberately absent: public code using
    # it maps its classes in different ways and its order cannot be confirmed offline; the gate decides, and its
    # refusal message prints the declaration to add.
}

# Each rule's name (`LabelOrder.basis`) and how a message says it.
BASIS_WORDS: dict[str, str] = {
    "declared": f"as declared by {TEACHER_LABEL_ORDER}",
    "id2label": "from its config's label names",
    "known": "from kdgrid's table of known teacher orders",
    "identity": "output k as label k: no declaration, no meaningful label names, no known order",
}


def normalize_label_name(name: str) -> str:
    """``"Not Entailment"`` -> ``"not_entailment"``; aliases folded (`NAME_ALIASES`)."""
    key = re.sub(r"[\s\-]+", "_", str(name).strip().lower())
    return NAME_ALIASES.get(key, key)


def task_label_names(task: Any) -> tuple[str, ...] | None:
    """The task's label names in label-id order, or None when it has none (regression, unnamed classes).

    GLUE tasks: `GLUE_LABEL_NAMES`; generated tasks: `SYNTHETIC_LABEL_NAMES`; local tasks: their ``labels``
    (label values in class-id order) unless those are plain numbers.
    """
    if task.is_regression:
        return None
    if task.source == "glue":
        return GLUE_LABEL_NAMES.get(task.param("config", task.name))
    if task.source == "synthetic":
        return SYNTHETIC_LABEL_NAMES.get(f"{task.param('kind')}-{task.param('shape')}")
    labels = task.param("labels")
    if labels and not all(GENERIC_NAME.match(str(v).strip().lower()) for v in labels):
        return tuple(normalize_label_name(str(v)) for v in labels)
    return None


@dataclass(frozen=True)
class LabelOrder:
    """Which task label each teacher output means.

    Attributes:
        order: ``order[k]`` is the task's label id of teacher output k (a permutation of ``range(C)``).
        basis: which rule gave it (a key of `BASIS_WORDS`).
        label_names: the task's label names in id order, or None (then labels are written as ids).
        teacher_names: the checkpoint's ``id2label`` names, for the record.
    """

    order: tuple[int, ...]
    basis: str
    label_names: tuple[str, ...] | None = None
    teacher_names: tuple[str, ...] | None = None

    @property
    def is_identity(self) -> bool:
        return self.order == tuple(range(len(self.order)))

    @property
    def columns(self) -> tuple[int, ...]:
        """``columns[j]`` = the teacher output that means label j (the inverse permutation)."""
        inverse = [0] * len(self.order)
        for output, label in enumerate(self.order):
            inverse[label] = output
        return tuple(inverse)

    def labels_of(self, order: Sequence[int] | None = None) -> list[str | int]:
        """An order (default: this one) written as the declaration writes it: label names, or ids."""
        chosen = self.order if order is None else tuple(order)
        return [self.label_names[i] if self.label_names else i for i in chosen]

    def declaration(self, order: Sequence[int] | None = None) -> str:
        """The sweep-file text that declares an order (default: this one)."""
        entries = ", ".join(str(v) for v in self.labels_of(order))
        return f"options: {{{TEACHER_LABEL_ORDER}: [{entries}]}}"

    def align(self, logits: torch.Tensor) -> torch.Tensor:
        """Teacher logits ``[..., C]`` re-ordered so that column j is the task's label j (unchanged if identity)."""
        if self.is_identity:
            return logits
        import torch  # only reached with a tensor in hand: torch is loaded already

        return logits.index_select(-1, torch.tensor(self.columns, device=logits.device))

    def record(self) -> dict[str, Any]:
        """What a row records of the alignment."""
        return {
            "order": self.labels_of(),
            "basis": self.basis,
            "teacher_names": list(self.teacher_names) if self.teacher_names else None,
        }


def _declared_order(
    declared: Sequence[str | int], names: tuple[str, ...] | None, num_labels: int
) -> list[int]:
    where = f"option {TEACHER_LABEL_ORDER}={list(declared)!r}"
    if len(declared) != num_labels:
        raise ConfigError(f"{where} has {len(declared)} entries; the task has {num_labels} labels")
    order: list[int] = []
    for entry in declared:
        if isinstance(entry, int) and not isinstance(entry, bool):
            if not 0 <= entry < num_labels:
                raise ConfigError(f"{where}: label id {entry} is outside 0..{num_labels - 1}")
            order.append(entry)
            continue
        key = normalize_label_name(str(entry))
        if names is None or key not in names:
            allowed = ", ".join(names) if names else f"label ids 0..{num_labels - 1}"
            raise ConfigError(f"{where}: {entry!r} is not a label of the task; allowed: {allowed}")
        order.append(names.index(key))
    if sorted(order) != list(range(num_labels)):
        raise ConfigError(f"{where} does not name every label of the task exactly once")
    return order


def _names_order(teacher_names: tuple[str, ...], names: tuple[str, ...] | None) -> list[int] | None:
    """The order the checkpoint's names give, or None when they are generic or do not all match the task's."""
    if names is None or all(GENERIC_NAME.match(n.strip().lower()) for n in teacher_names):
        return None
    keys = [normalize_label_name(n) for n in teacher_names]
    if len(set(keys)) != len(keys) or not all(k in names for k in keys):
        return None
    return [names.index(k) for k in keys]


def resolve_label_order(
    task: Any,
    teacher_source: str,
    id2label: Mapping[int, str] | None,
    declared: Sequence[str | int] | None = None,
) -> LabelOrder:
    """The job's `LabelOrder` (module docstring: rules in order). ``id2label`` is the loaded checkpoint's
    ``config.id2label``; ``teacher_source`` its Hub name or directory. A regression task has the one-output
    identity order.

    Raises:
        ConfigError: a declared order that is not a permutation of the task's labels.
    """
    num_labels = task.num_labels
    names = task_label_names(task)
    teacher_names = (
        tuple(str(id2label[k]) for k in sorted(id2label, key=int))
        if id2label and len(id2label) == num_labels
        else None
    )
    if declared is not None and not task.is_regression:
        order = _declared_order(declared, names, num_labels)
        return LabelOrder(tuple(order), "declared", names, teacher_names)
    if task.is_regression:
        return LabelOrder((0,), "identity", None, teacher_names)
    from_names = _names_order(teacher_names, names) if teacher_names else None
    if from_names is not None:
        return LabelOrder(tuple(from_names), "id2label", names, teacher_names)
    known = KNOWN_LABEL_ORDERS.get(teacher_source)
    if known is not None and names is not None and len(known) == num_labels and set(known) == set(names):
        return LabelOrder(tuple(names.index(k) for k in known), "known", names, teacher_names)
    return LabelOrder(tuple(range(num_labels)), "identity", names, teacher_names)
