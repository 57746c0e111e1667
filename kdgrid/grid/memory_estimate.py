"""How much memory a job needs at its peak: what the planner (`kdgrid.grid.plan.plan_jobs`) packs against a budget.

A job (`kdgrid.core.training.train.run_job`) holds at once:

- for EVERY student: fp32 weights, gradients and AdamW's two moments (16 bytes per parameter, its projections'
  too): `estimate_trial_memory_gb`, the part that adds up over the students of a job;
- the activations of ONE student: students step one after another, and a step's graph is freed before the next
  student's, so only the largest student's forward activations and loss intermediates count
  (`student_activation_bytes`);
- the teacher: its fp32 weights (no gradients, no optimizer) and, for one batch, the features the job's students
  are matched to plus the teacher-side loss targets computed from them once per batch (`teacher_bytes`).

Everything is in bytes of fp32 (an upper bound under autocast) and reported in GiB. The estimate reads only
the trials: the student's shape, batch size, maximum length, knowledge, strategy and projection, and the
teacher's shape for the task, resolved without loading anything (`teacher_shape`). It is used to split groups,
never to refuse a job; `benchmarks/memory_estimate.py` compares it with the measured peak.

No torch here: ``kdgrid plan`` stays fast.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from kdgrid.core.knowledge import KNOWLEDGE, KnowledgeSpec, canonical_knowledge, projected_term_count
from kdgrid.core.matching import get_strategy, layer_pairs, mapping_context
from kdgrid.core.method_registry import TrialFacts, evaluates_only, method_memory
from kdgrid.core.model.shapes import TEACHERS, StudentShape, student_shape
from kdgrid.errors import ConfigError
from kdgrid.trial import Trial

BYTES_PER_PARAMETER = 16  # fp32 weights, gradients and AdamW's two moments
BYTES_PER_VALUE = 4  # fp32 activations and features
GIB = 2**30
# Activations a BERT layer keeps for its backward pass, per token and unit of width (Q, K, V, attention output,
# two LayerNorms, the FFN's 4x-wide input and GELU output, dropout masks), and per attention score (scores,
# probabilities, dropout mask).
VALUES_PER_TOKEN_WIDTH = 20
VALUES_PER_SCORE = 3
LAYERED_FEATURES = frozenset({"scores", "hidden", "query", "key", "value"})
# The teacher the planner assumes when it cannot read one's shape without loading it (a Hub model outside the
# paper's table, not cached): BERT-base, the paper's usual teacher.
FALLBACK_TEACHER = TEACHERS["bert-base"]["mrpc"].shape
MINILM = StudentShape(layers=6, width=384, heads=12, ffn=1536)  # the offline teacher (kdgrid.assets)


def _shape_of_config_file(path: Path) -> StudentShape | None:
    try:
        config = json.loads((path / "config.json").read_text())
        return StudentShape(
            layers=int(config["num_hidden_layers"]),
            width=int(config["hidden_size"]),
            heads=int(config["num_attention_heads"]),
            ffn=int(config["intermediate_size"]),
        )
    except (OSError, ValueError, KeyError, TypeError, ConfigError):
        return None


@lru_cache(maxsize=256)
def teacher_shape(teacher: str, task: str) -> StudentShape:
    """A trial's teacher shape, read without loading weights or importing torch: the paper's table for its
    aliases and Hub names, ``config.json`` of a local directory, the offline MiniLM's for ``minilm-l6``;
    `FALLBACK_TEACHER` for anything else (a Hub model kdgrid does not list)."""
    if teacher in TEACHERS:
        spec = TEACHERS[teacher].get(task)
        return spec.shape if spec is not None else FALLBACK_TEACHER
    for table in TEACHERS.values():
        for spec in table.values():
            if spec.hub_name == teacher:
                return spec.shape
    if teacher == "minilm-l6":
        return MINILM
    local = _shape_of_config_file(Path(teacher).expanduser())
    return local if local is not None else FALLBACK_TEACHER


def _spec(name: str) -> KnowledgeSpec | None:
    """A knowledge's registry entry (the authority on what it reads); None for a name the registry does not
    know (the trial fails at validation anyway)."""
    spec = KNOWLEDGE.get(name)  # a trial's names are canonical: the alias rule is for other spellings only
    if spec is not None:
        return spec
    try:
        return KNOWLEDGE[canonical_knowledge(name)]
    except ConfigError:
        return None


def knowledge_feature(name: str) -> str | None:
    """The feature a knowledge reads on both sides (its first, where it reads several); None when unknown."""
    spec = _spec(name)
    return None if spec is None else sorted(spec.needs)[0]


def projected_knowledge(name: str) -> bool:
    """Whether the knowledge's student feature is projected to the teacher's width first."""
    spec = _spec(name)
    return spec is not None and spec.needs_projection


def _pairs(trial: Trial, student: StudentShape, teacher: StudentShape) -> list[tuple[int, int]]:
    """The strategy's layer pairs; every student layer to the teacher's last ones where the strategy cannot
    tell (an unknown name or depths it refuses: the trial fails at validation anyway)."""
    return list(_pairs_of(trial.strategy, student.layers, teacher.layers, trial.seed))


@lru_cache(maxsize=4096)
def _pairs_of(
    strategy: str | None, student_layers: int, teacher_layers: int, seed: int
) -> tuple[tuple[int, int], ...]:
    # memoised: planning asks three times per trial, and a strategy's pairs depend on these four values only
    try:
        return tuple(layer_pairs(strategy or "", student_layers, teacher_layers, seed=seed))
    except ConfigError:
        return tuple((i, teacher_layers - student_layers + i) for i in range(1, student_layers + 1))


def _per_layer_values(feature: str, batch: int, length: int, shape: StudentShape) -> int:
    """fp32 values of one layer's ``feature`` for one batch: [B, L, d] for hidden states and Q/K/V; for the
    attention scores [B, H, L, L] and the Q and K they are recomputed from."""
    tokens = batch * length
    if feature == "scores":
        return batch * shape.heads * length**2 + 2 * tokens * shape.width
    return tokens * shape.width


def _target_values(feature: str, knowledge: str, batch: int, length: int, heads: int, width: int) -> int:
    """fp32 values of what one loss term derives from one layer's feature on one side: distributions over
    [B, H, L, L] for attention and relations, the Gram products [B, d, d], the token-pair products [B, L, L]
    of ``mmd``, a copy of the feature otherwise."""
    if feature in ("scores", "query", "key", "value"):
        return batch * heads * length**2
    if knowledge == "gram":
        return batch * width**2
    if knowledge == "mmd":
        return batch * length**2
    return batch * length * width


def projection_params(trial: Trial) -> int:
    """Parameters of a trial's projections: one ``Linear(d_S, d_T)`` per projected term (an ``mlp`` or ``ensemble``
    projection has a hidden layer of the teacher's width too). One projector per term: a method that keeps several
    (an ensemble's members) counts the others itself (`kdgrid.core.method_registry.MethodSpec.memory`)."""
    student = student_shape(trial.student)
    teacher = teacher_shape(trial.teacher, trial.task)
    if student.width == teacher.width or trial.projection == "none":
        return 0
    linear = student.width * teacher.width + teacher.width
    mlp_extra = teacher.width * teacher.width + teacher.width if trial.projection in ("mlp", "ensemble") else 0
    return projected_terms(trial) * (linear + mlp_extra)


def projected_terms(trial: Trial) -> int:
    """The loss terms of a trial that go through a projection (0 when none can: same widths, projection none)."""
    student = student_shape(trial.student)
    teacher = teacher_shape(trial.teacher, trial.task)
    if student.width == teacher.width or trial.projection == "none":
        return 0
    pairs = _pairs(trial, student, teacher)
    known = [name for name in trial.knowledge if _spec(name) is not None]
    unknown = len(trial.knowledge) - len(known)  # refused at validation; counted as projected on every pair
    return projected_term_count(known, pairs, student.width, teacher.width) + unknown * len(pairs)


def _learnable(trial: Trial) -> bool:
    """Whether the trial's strategy is a learnable one (an unknown name is not: validation refuses it)."""
    return bool(trial.knowledge) and trial.strategy is not None and _learnable_strategy(trial.strategy)


@lru_cache(maxsize=256)
def _learnable_strategy(name: str) -> bool:
    # memoised: a name's strategy never changes once registered (a second registration is refused)
    try:
        return get_strategy(name).learnable
    except ConfigError:
        return False


def mapping_params(trial: Trial) -> int:
    """Parameters of a learnable strategy's mapping, as the strategy counts them without torch
    (`kdgrid.core.matching.MatchingStrategy.mapping_parameters`); 0 for fixed pairs or depths it refuses."""
    if not _learnable(trial):
        return 0
    student = student_shape(trial.student)
    teacher = teacher_shape(trial.teacher, trial.task)
    count = get_strategy(str(trial.strategy)).mapping_parameters
    try:
        context = mapping_context(trial, student, teacher)
    except ConfigError:
        return 0
    return int(count(context)) if count is not None else 0


def method_facts(trial: Trial) -> TrialFacts:
    """What a method's memory count reads (`kdgrid.core.method_registry.TrialFacts`): the two shapes, the layer
    pairs and the projections' parameters."""
    student = student_shape(trial.student)
    teacher = teacher_shape(trial.teacher, trial.task)
    pairs = _pairs(trial, student, teacher) if trial.strategy else []
    return TrialFacts(
        trial,
        student,
        teacher,
        pairs,
        projected_terms=projected_terms(trial),
        projection_parameters=projection_params(trial),
    )


def estimate_trial_memory_gb(trial: Trial) -> float:
    """What one student adds to its job for the job's whole life, in GiB: fp32 weights, gradients and AdamW's
    two moments of the student, its projections, a learnable strategy's mapping and what its methods add (a
    learned temperature, a dual head's second classifier, LKD's weights and copies, a split gradient: each
    method's `kdgrid.core.method_registry.MethodMemory`), 16 bytes per parameter.
    The job's other parts (one student's activations, the teacher) are counted once per job
    (`estimate_job_memory_gb`)."""
    shape = student_shape(trial.student)
    methods = method_memory(method_facts(trial))
    per_parameter = BYTES_PER_PARAMETER + methods.bytes_per_parameter
    parameters = shape.param_count() + projection_params(trial) + mapping_params(trial) + methods.parameters
    return parameters * per_parameter / GIB


def student_activation_bytes(trial: Trial) -> int:
    """The peak of one student's step in bytes: the activations its layers keep for the backward pass
    (`VALUES_PER_TOKEN_WIDTH`, `VALUES_PER_SCORE`), and each loss term's intermediates on the student side
    (its projected feature and the distributions or products the loss builds, each with its gradient)."""
    student = student_shape(trial.student)
    teacher = teacher_shape(trial.teacher, trial.task)
    batch, length = trial.batch_size, trial.max_length
    tokens = batch * length
    layers = student.layers * (
        VALUES_PER_TOKEN_WIDTH * tokens * student.width + VALUES_PER_SCORE * batch * student.heads * length**2
    )
    pairs = len(_pairs(trial, student, teacher))
    losses = 0
    for name in trial.knowledge:
        feature = knowledge_feature(name) or "hidden"
        if feature not in LAYERED_FEATURES:
            continue
        width = teacher.width if projected_knowledge(name) else student.width
        projected = tokens * teacher.width if projected_knowledge(name) else 0
        per_term = projected + _target_values(feature, name, batch, length, max(student.heads, 1), width)
        losses += 2 * pairs * per_term  # the value and its gradient
    return (layers + losses) * BYTES_PER_VALUE


def _teacher_reads(trial: Trial) -> tuple[frozenset[tuple[str, int]], frozenset[tuple[str, int]]]:
    """What the teacher keeps for one trial per batch: (feature, teacher layer) pairs, and (knowledge, teacher
    layer) pairs of the teacher-side targets."""
    student = student_shape(trial.student)
    teacher = teacher_shape(trial.teacher, trial.task)
    teacher_layers = {t for _, t in _pairs(trial, student, teacher)}
    if _learnable(trial):  # its mapping reads the matched features of every teacher layer
        teacher_layers = set(range(1, teacher.layers + 1))
    features: set[tuple[str, int]] = set()
    targets: set[tuple[str, int]] = set()
    for name in trial.knowledge:
        feature = knowledge_feature(name) or "hidden"
        if feature in LAYERED_FEATURES:
            features |= {(feature, layer) for layer in teacher_layers}
            targets |= {(name, layer) for layer in teacher_layers}
        elif feature == "embeddings":
            features.add(("hidden", 0))
    return frozenset(features), frozenset(targets)


def _feature_bytes(trial: Trial, feature: str) -> int:
    """Bytes of one kept teacher (feature, layer) for one batch of ``trial``'s group."""
    teacher = teacher_shape(trial.teacher, trial.task)
    return _per_layer_values(feature, trial.batch_size, trial.max_length, teacher) * BYTES_PER_VALUE


def _target_bytes(trial: Trial, name: str) -> int:
    """Bytes of one teacher-side target (knowledge ``name`` at one layer) for one batch of ``trial``'s group."""
    teacher = teacher_shape(trial.teacher, trial.task)
    feature = knowledge_feature(name) or "hidden"
    values = _target_values(feature, name, trial.batch_size, trial.max_length, teacher.heads, teacher.width)
    return values * BYTES_PER_VALUE


def teacher_bytes(trials: Sequence[Trial]) -> int:
    """The teacher's share of a job in bytes: its fp32 weights, and for one batch the features its students are
    matched to (each (feature, layer) once, whatever number of students read it) and the teacher-side targets
    derived from them. The trials share a group (task, teacher, batch size, length)."""
    memory = JobMemory()
    for trial in trials:
        memory = memory.plus(trial)
    return memory.teacher_bytes


class JobMemory:
    """The estimate of a job built one trial at a time (`plus`), in O(1) per trial beyond the teacher's
    (feature, layer) sets: what `plan_jobs` packs with. The teacher's per-batch bytes are kept as a running sum
    over the (feature, layer) and (knowledge, layer) pairs a trial adds (each pair counted once), so asking a
    grown job for its `gb` never sums the whole set again (a planning of a thousand trials asked it thousands
    of times)."""

    def __init__(self) -> None:
        self.first: Trial | None = None
        self.students_gb = 0.0
        self.activation_bytes = 0
        self.features: frozenset[tuple[str, int]] = frozenset()
        self.targets: frozenset[tuple[str, int]] = frozenset()
        self.batch_bytes = 0  # the teacher's kept features and targets of one batch, in bytes
        self.trials = 0

    def plus(self, trial: Trial) -> JobMemory:
        """A new estimate: this job with ``trial`` added (this one is left as it was)."""
        static, activations, features, targets = _trial_facts(trial)
        if evaluates_only(trial):  # e.g. ReAugKD's evaluation: its student is loaded after the job's are freed
            static, features, targets = 0.0, frozenset(), frozenset()
        out = JobMemory()
        out.first = first = self.first or trial  # the group's batch shape: every trial of a job shares it
        out.students_gb = self.students_gb + static
        out.activation_bytes = max(self.activation_bytes, activations)
        new_features, new_targets = features - self.features, targets - self.targets
        out.features = self.features | new_features if new_features else self.features
        out.targets = self.targets | new_targets if new_targets else self.targets
        out.batch_bytes = (
            self.batch_bytes
            + sum(_feature_bytes(first, feature) for feature, _ in new_features)
            + sum(_target_bytes(first, name) for name, _ in new_targets)
        )
        out.trials = self.trials + 1
        return out

    @property
    def teacher_bytes(self) -> int:
        if self.first is None:
            return 0
        teacher = teacher_shape(self.first.teacher, self.first.task)
        return teacher.param_count() * BYTES_PER_VALUE + self.batch_bytes

    @property
    def gb(self) -> float:
        """The job's estimated peak in GiB (0 for an empty job)."""
        if self.first is None:
            return 0.0
        return self.students_gb + (self.activation_bytes + self.teacher_bytes) / GIB


def memory_key(trial: Trial) -> tuple[object, ...]:
    """Every field a trial's memory estimate depends on (two trials with equal keys have equal estimates): its
    shapes and lengths, knowledge, projection, options (projector members, LKD, DOT's split gradients, a
    learned temperature, a dual head, ...) and its layer pairs (a `Random` strategy's depend on the seed)."""
    pairs = _pairs(trial, student_shape(trial.student), teacher_shape(trial.teacher, trial.task))
    return (
        trial.student,
        trial.teacher,
        trial.task,
        trial.batch_size,
        trial.max_length,
        trial.knowledge,
        trial.strategy,
        trial.projection,
        trial.options,
        tuple(pairs) if trial.strategy else (),
    )


_FACTS: dict[
    tuple[object, ...], tuple[float, int, frozenset[tuple[str, int]], frozenset[tuple[str, int]]]
] = {}


def _trial_facts(
    trial: Trial,
) -> tuple[float, int, frozenset[tuple[str, int]], frozenset[tuple[str, int]]]:
    """(`estimate_trial_memory_gb`, `student_activation_bytes`, the teacher's reads), cached by `memory_key`."""
    key = memory_key(trial)
    if key not in _FACTS:
        _FACTS[key] = (
            estimate_trial_memory_gb(trial),
            student_activation_bytes(trial),
            *_teacher_reads(trial),
        )
    return _FACTS[key]


def estimate_job_memory_gb(trials: Sequence[Trial]) -> float:
    """The peak memory of a job in GiB: every student's `estimate_trial_memory_gb`, the largest
    `student_activation_bytes`, and `teacher_bytes`. The trials must share a group."""
    memory = JobMemory()
    for trial in trials:
        memory = memory.plus(trial)
    return memory.gb
