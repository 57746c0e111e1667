"""Layer-matching strategies: which student layer learns from which teacher layer.

Layers are numbered as ``output_hidden_states`` numbers them: 0 is the embedding output, 1..L the transformer
layers. Every strategy returns explicit ``(student layer, teacher layer)`` pairs over the transformer layers
(1..L_S, 1..L_T); TinyBERT's embedding loss is a knowledge type placed on (0, 0), not a strategy.

The paper's five (Section 4.4, in the order of `kdgrid.paper.PAPER_STRATEGIES`), for a student of L_S and a
teacher of L_T layers:

============  =================================================  ===================================
strategy      pairs                                              L_S = 4, L_T = 12
============  =================================================  ===================================
First         i -> i, i = 1..L_S                                 (1,1) (2,2) (3,3) (4,4)
Last          i -> L_T - L_S + i                                 (1,9) (2,10) (3,11) (4,12)
Dilatation    i -> floor(i * L_T / L_S)                          (1,3) (2,6) (3,9) (4,12)
First-1       1 -> 1                                             (1,1)
Last-1        L_S -> L_T                                         (4,12)
============  =================================================  ===================================

From related work: ``PKD-skip`` and ``PKD-last`` (PKD's patient schemes: Dilatation / Last without the
final student layer, whose output PKD distils through the logits instead), ``MiniLM`` (the last layer only, as
Last-1; MiniLM pairs it with attention and value-relation knowledge, see `MINILM_KNOWLEDGE`). ``Uniform``
(TinyBERT's name for it) is the same map as Dilatation and is an alias of it.

Negative controls (``control=True``; not the paper's, and no hypothesis about which layers correspond): they ask
whether a strategy does better than a map that should not help.

============  =================================================  ===================================
strategy      pairs                                              L_S = 4, L_T = 12
============  =================================================  ===================================
Reverse       i -> Dilatation's teacher layer of L_S + 1 - i     (1,12) (2,9) (3,6) (4,3)
Random        i -> the i-th teacher layer of a seeded shuffle    seed 0: (1,7) (2,6) (3,10) (4,2)
============  =================================================  ===================================

``All-to-one`` (Yu, Wen & Mou, "Revisiting Intermediate-Layer Matching in Knowledge Distillation: Layer-Selection
Strategy Doesn't Matter (Much)", Findings of IJCNLP-AACL 2025) matches every student layer to the last teacher
layer, ``i -> L_T`` ((1,12) (2,12) (3,12) (4,12)); it works for any depths. Their code takes the one teacher
layer as an argument; kdgrid fixes it to the last, the layer a single match (Last-1) uses.

``Random`` is a fixed injective map drawn from the trial's ``seed`` (`Trial.seed`; `layer_pairs` takes it as
``seed=``, every other strategy ignores it), recorded in the row's layer pairs as any strategy's. The draw: the
teacher layers 1..L_T ordered by the SHA-256 digest of ``f"{seed}:{L_T}:{t}"`` (a tie, practically impossible, by layer), and
student layer i takes the i-th. SHA-256 is a fixed standard, so the draw is the same on every machine and Python
version (the `random` module guarantees only ``random()`` across versions, not ``sample`` or ``shuffle``). The
teacher layers are deliberately *not* sorted: a uniformly random injection assumes neither which teacher layers
matter nor their order (a sorted draw would keep the order that First, Last and Dilatation share and control only
for the choice of layers; ``Reverse`` is the control for the order alone). For one seed and teacher depth, a
shallower student takes a prefix of a deeper one's teacher layers.

Defined behaviour at the edges:

* L_S == L_T: First, Last and Dilatation all give the identity i -> i.
* L_T not divisible by L_S: Dilatation takes the floor, ``i * L_T // L_S`` (integer arithmetic, so exact);
  the last student layer always meets the last teacher layer and no teacher layer is used twice.
* L_S > L_T: First, Last, Dilatation, PKD-skip, PKD-last, Reverse and Random need a distinct teacher layer for
  every student layer and raise `ConfigError` naming the strategy and both depths; First-1, Last-1 and MiniLM
  work for any depths.
* Depths below 1 raise `ConfigError`; PKD-skip / PKD-last need L_S >= 2 (they leave the last layer out).

Learnable strategies (``register_strategy(..., mapping=..., mapping_parameters=...)``): the pairs name the student
layers that learn (each pair's teacher layer is nominal: it names the term and is what the row records), and the
target of each is built by a mapping module with its own parameters from the teacher's features of *every*
transformer layer 1..L_T (e.g. weights over teacher layers per student layer). The module is built per trial from
a `MappingContext`, lives in the trial's objective, trains with the student under the same optimiser, is saved in
the trial's epoch checkpoints and restored on resume; ``mapping_parameters`` counts its parameters without torch
for the memory estimate. The interface the module implements is `kdgrid.core.mapping.LayerMapping`
(docs/extending.md has a worked example).

Strategy names are matched case-insensitively, ignoring spaces, ``-`` and ``_`` (``"first_1"``, ``"First1"``
as Table 8 writes it, ``"LAST-1"``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kdgrid.errors import ConfigError
from kdgrid.paper import PAPER_STRATEGIES
from kdgrid.suggest import did_you_mean
from kdgrid.trial import Trial

LayerPairs = list[tuple[int, int]]


@dataclass(frozen=True)
class MappingContext:
    """What a learnable strategy's mapping is built from (and what its parameter count may depend on).

    Attributes:
        student_layers, teacher_layers: the depths L_S and L_T (transformer layers, 1-based).
        student_width, teacher_width: the hidden widths d_S and d_T.
        pairs: the strategy's pairs (student layer, nominal teacher layer), in student-layer order.
        seed: the trial's seed (the mapping's parameters are drawn under it).
        options: the trial's options (a mapping may read its own registered options).
        max_length: the trial's ``max_length``, the most positions a batch has (0: unknown).
    """

    student_layers: int
    teacher_layers: int
    student_width: int
    teacher_width: int
    pairs: tuple[tuple[int, int], ...]
    seed: int
    options: Mapping[str, Any] = field(default_factory=dict)
    max_length: int = 0


@dataclass(frozen=True)
class MatchingStrategy:
    """A named layer map.

    Attributes:
        name: the canonical name (the paper's spelling for its five).
        pairs: ``(student_layers, teacher_layers) -> [(student layer, teacher layer), ...]`` for valid depths
            (a ``seeded`` strategy's takes the seed as a third argument).
        distinct_teacher_layers: every student layer takes its own teacher layer, so L_S <= L_T is required.
        min_student_layers: the smallest student depth the strategy is defined for.
        description: one line for listings.
        control: a negative control (Reverse, Random): its teacher layers need not increase with the student's.
        seeded: the pairs are drawn from the trial's seed.
        mapping: for a learnable strategy, ``MappingContext -> module`` (a `kdgrid.core.mapping.LayerMapping`);
            None for fixed pairs.
        mapping_parameters: for a learnable strategy, ``MappingContext -> int``: its module's parameter count,
            computed without torch (the memory estimate counts them with their gradients and AdamW's moments).
        mapping_features: for a learnable strategy, the features (`kdgrid.core.knowledge.FEATURES`) its module
            can build targets for; None: any. Validation refuses a knowledge on pairs that reads another.
    """

    name: str
    pairs: Callable[..., LayerPairs]
    distinct_teacher_layers: bool
    min_student_layers: int
    description: str
    control: bool = False
    seeded: bool = False
    mapping: Callable[[MappingContext], Any] | None = None
    mapping_parameters: Callable[[MappingContext], int] | None = None
    mapping_features: frozenset[str] | None = None

    @property
    def learnable(self) -> bool:
        """The targets come from a mapping with its own parameters, trained with the student."""
        return self.mapping is not None

    @property
    def in_paper(self) -> bool:
        """One of the paper's five strategies (`kdgrid.paper.PAPER_STRATEGIES`)."""
        return self.name in PAPER_STRATEGIES


STRATEGIES: dict[str, MatchingStrategy] = {}
STRATEGY_ALIASES: dict[str, str] = {}
_KEYS: dict[str, str] = {}


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.strip().lower())


def register_strategy(
    name: str,
    *,
    distinct_teacher_layers: bool,
    description: str,
    min_student_layers: int = 1,
    aliases: Sequence[str] = (),
    control: bool = False,
    seeded: bool = False,
    mapping: Callable[[MappingContext], Any] | None = None,
    mapping_parameters: Callable[[MappingContext], int] | None = None,
    mapping_features: Sequence[str] | None = None,
) -> Callable[[Callable[..., LayerPairs]], Callable[..., LayerPairs]]:
    """Register the decorated ``(student_layers, teacher_layers) -> pairs`` function as strategy ``name``
    (``(student_layers, teacher_layers, seed) -> pairs`` where ``seeded``); with ``mapping`` and
    ``mapping_parameters``, a learnable strategy (the module docstring)."""
    if (mapping is None) != (mapping_parameters is None):
        raise ValueError(f"strategy {name!r}: a learnable strategy gives both mapping and mapping_parameters")

    def decorate(fn: Callable[..., LayerPairs]) -> Callable[..., LayerPairs]:
        if _key(name) in _KEYS:
            raise ValueError(f"strategy {name!r} is registered twice")
        STRATEGIES[name] = MatchingStrategy(
            name=name,
            pairs=fn,
            distinct_teacher_layers=distinct_teacher_layers,
            min_student_layers=min_student_layers,
            description=description,
            control=control,
            seeded=seeded,
            mapping=mapping,
            mapping_parameters=mapping_parameters,
            mapping_features=None if mapping_features is None else frozenset(mapping_features),
        )
        _KEYS[_key(name)] = name
        for alias in aliases:
            STRATEGY_ALIASES[alias] = name
            _KEYS[_key(alias)] = name
        return fn

    return decorate


@register_strategy(
    "First",
    distinct_teacher_layers=True,
    description="student i <- teacher i (first L_S layers)",
)
def _first(student_layers: int, teacher_layers: int) -> LayerPairs:
    return [(i, i) for i in range(1, student_layers + 1)]


@register_strategy(
    "Last",
    distinct_teacher_layers=True,
    description="student i <- teacher L_T - L_S + i (last L_S layers)",
)
def _last(student_layers: int, teacher_layers: int) -> LayerPairs:
    offset = teacher_layers - student_layers
    return [(i, offset + i) for i in range(1, student_layers + 1)]


@register_strategy(
    "Dilatation",
    distinct_teacher_layers=True,
    description="student i <- teacher floor(i * L_T / L_S) (evenly spread)",
    aliases=("Uniform", "Dilation"),
)
def _dilatation(student_layers: int, teacher_layers: int) -> LayerPairs:
    return [(i, i * teacher_layers // student_layers) for i in range(1, student_layers + 1)]


@register_strategy(
    "First-1", distinct_teacher_layers=False, description="student 1 <- teacher 1"
)
def _first_one(student_layers: int, teacher_layers: int) -> LayerPairs:
    return [(1, 1)]


@register_strategy(
    "Last-1", distinct_teacher_layers=False, description="student L_S <- teacher L_T"
)
def _last_one(student_layers: int, teacher_layers: int) -> LayerPairs:
    return [(student_layers, teacher_layers)]


@register_strategy(
    "PKD-skip",
    distinct_teacher_layers=True,
    min_student_layers=2,
    description="PKD-Skip: Dilatation without the last student layer (i < L_S)",
)
def _pkd_skip(student_layers: int, teacher_layers: int) -> LayerPairs:
    return _dilatation(student_layers, teacher_layers)[:-1]


@register_strategy(
    "PKD-last",
    distinct_teacher_layers=True,
    min_student_layers=2,
    description="PKD-Last: Last without the last student layer (i < L_S)",
)
def _pkd_last(student_layers: int, teacher_layers: int) -> LayerPairs:
    return _last(student_layers, teacher_layers)[:-1]


@register_strategy(
    "MiniLM",
    distinct_teacher_layers=False,
    description="MiniLM: the last layer only (student L_S <- teacher L_T)",
)
def _minilm(student_layers: int, teacher_layers: int) -> LayerPairs:
    return [(student_layers, teacher_layers)]


@register_strategy(
    "Reverse",
    distinct_teacher_layers=True,
    control=True,
    description="control: student i <- Dilatation's teacher layer of student L_S + 1 - i (order reversed)",
)
def _reverse(student_layers: int, teacher_layers: int) -> LayerPairs:
    dilatation = _dilatation(student_layers, teacher_layers)
    return [(i, dilatation[student_layers - i][1]) for i in range(1, student_layers + 1)]


@register_strategy(
    "Random",
    distinct_teacher_layers=True,
    control=True,
    seeded=True,
    description="control: student i <- the i-th teacher layer of a shuffle drawn from the trial's seed",
)
def _random(student_layers: int, teacher_layers: int, seed: int) -> LayerPairs:
    def rank(layer: int) -> tuple[bytes, int]:
        return hashlib.sha256(f"{seed}:{teacher_layers}:{layer}".encode()).digest(), layer

    shuffled = sorted(range(1, teacher_layers + 1), key=rank)
    return [(i, shuffled[i - 1]) for i in range(1, student_layers + 1)]


@register_strategy(
    "All-to-one",
    distinct_teacher_layers=False,
    description="every student layer <- the last teacher layer (Yu, Wen & Mou, Findings of IJCNLP-AACL 2025)",
)
def _all_to_one(student_layers: int, teacher_layers: int) -> LayerPairs:
    return [(i, teacher_layers) for i in range(1, student_layers + 1)]


# The knowledge MiniLM distils on its single pair (self-attention distributions and value relation), in
# `kdgrid.core.knowledge` names; a sweep using the MiniLM strategy usually names these.
MINILM_KNOWLEDGE: tuple[str, ...] = ("attention_ce_mean", "value_relation")


def canonical_strategy(name: str) -> str:
    """The canonical name of a strategy (case, spaces, ``-`` and ``_`` ignored; ``Uniform`` -> ``Dilatation``).

    Raises ConfigError listing the valid names.
    """
    if not isinstance(name, str) or _key(name) not in _KEYS:
        aliases = ", ".join(f"{alias} (= {target})" for alias, target in STRATEGY_ALIASES.items())
        raise ConfigError(
            f"unknown matching strategy {name!r}; valid strategies: {', '.join(STRATEGIES)}; aliases: {aliases}"
            f"{did_you_mean(str(name), [*STRATEGIES, *STRATEGY_ALIASES])}"
        )
    return _KEYS[_key(name)]


def get_strategy(name: str) -> MatchingStrategy:
    """The `MatchingStrategy` of a name (any accepted spelling)."""
    return STRATEGIES[canonical_strategy(name)]


def mapping_context(trial: Trial, student: Any, teacher: Any) -> MappingContext:
    """The `MappingContext` of ``trial``'s strategy between a ``student`` and a ``teacher`` shape (anything with
    ``layers`` and ``width``, `kdgrid.core.model.shapes`): what the objective builds the mapping from and the memory
    estimate counts its parameters by."""
    strategy = str(trial.strategy)
    pairs = layer_pairs(strategy, student.layers, teacher.layers, seed=trial.seed)
    return MappingContext(
        student_layers=student.layers,
        teacher_layers=teacher.layers,
        student_width=student.width,
        teacher_width=teacher.width,
        pairs=tuple(pairs),
        seed=trial.seed,
        options=dict(trial.options),
        max_length=trial.max_length,
    )


def layer_pairs(
    strategy: str, student_layers: int, teacher_layers: int, *, seed: int | None = None
) -> list[tuple[int, int]]:
    """The (student layer, teacher layer) pairs of ``strategy`` for an L_S-layer student and L_T-layer teacher.

    Layer 0 is the embedding output and 1..L the transformer layers; the pairs use 1..L only, in increasing
    student layer. See the module docstring for the table of strategies and the edge cases (equal depths,
    L_T not divisible by L_S: floor; a student deeper than its teacher: ConfigError for strategies that need a
    distinct teacher layer per student layer). ``seed`` (the trial's) draws a ``seeded`` strategy's pairs
    (``Random``); the others ignore it.

    Raises:
        ConfigError: an unknown strategy (listing the valid ones), depths the strategy is not defined for
            (naming the strategy and both depths), or a seeded strategy without an integer seed.
    """
    spec = get_strategy(strategy)
    for what, depth in (("student", student_layers), ("teacher", teacher_layers)):
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ConfigError(
                f"strategy {spec.name!r}: {what} depth must be a positive integer, got {depth!r}"
            )
    if spec.distinct_teacher_layers and student_layers > teacher_layers:
        raise ConfigError(
            f"strategy {spec.name!r} gives every student layer its own teacher layer, so it needs a student no "
            f"deeper than its teacher; got student depth {student_layers}, teacher depth {teacher_layers} "
            "(First-1, Last-1 and MiniLM work for any depths)"
        )
    if student_layers < spec.min_student_layers:
        raise ConfigError(
            f"strategy {spec.name!r} leaves the last student layer out and needs a student of at least "
            f"{spec.min_student_layers} layers; got student depth {student_layers}, teacher depth {teacher_layers}"
        )
    if not spec.seeded:
        return spec.pairs(student_layers, teacher_layers)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(
            f"strategy {spec.name!r} draws its pairs from the trial's seed, an integer; got {seed!r}"
        )
    return spec.pairs(student_layers, teacher_layers, seed)


def nominal_pairs(student_layers: int, teacher_layers: int) -> LayerPairs:
    """``(i, max(1, floor(i L_T / L_S)))`` for every student layer i: the pairs of a learnable strategy that builds
    each student layer's target from every teacher layer (LAD, ALP-KD). One term each, named by Dilatation's
    nominal teacher layer (at least 1), which is what the row records."""
    return [(i, max(1, i * teacher_layers // student_layers)) for i in range(1, student_layers + 1)]


def strategy_name(strategy: str | None) -> str | None:
    """The canonical name of a trial's ``strategy``; None without one, or for a name the registry does not know
    (refused, with the allowed ones, by the strategy check itself)."""
    if strategy is None:
        return None
    try:
        return get_strategy(strategy).name
    except ConfigError:
        return None
