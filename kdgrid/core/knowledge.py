"""The knowledge registry: every knowledge type's name, written names and metadata, without torch.

A knowledge type is a loss between student and teacher features (the paper's ten of Appendix A.2, the soft and
hard labels of eq. 9, and a few from related work). Each is declared once, by the `register` decorator beside its
function: the built-in ones in the modules of `kdgrid.core.losses` (one module per family), a user's in a plugin
(`kdgrid.plugins`, docs/extending.md).

This module imports no torch, so the grid, the store, the analysis and ``kdgrid plan`` read names, aliases and
metadata without it: the built-in declarations are read from the source of `kdgrid.core.losses` (each
``@register(...)`` decorator's literal arguments, by `ast`) when this module is imported, and a loss module is
imported only when its function is needed (`KnowledgeSpec.fn`: to compute the loss, or to read its keyword
variants). When that module is imported its decorators run and bind each function to its declaration; a
declaration that differs from what the source said is an error, so the two readings cannot drift.

Whether a knowledge is one of the paper's and how the paper writes it are facts of the paper, read from
`kdgrid.paper` (`PAPER_KNOWLEDGE`, `PAPER_KNOWLEDGE_LABELS`), not declared here.

The paper's written names ("attention mse", "vr", ...) and each declaration's aliases are accepted through
`canonical_knowledge` / `paper_name`.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kdgrid.errors import ConfigError
from kdgrid.paper import PAPER_KNOWLEDGE, PAPER_KNOWLEDGE_LABELS
from kdgrid.suggest import did_you_mean

FEATURES: frozenset[str] = frozenset(
    {"scores", "hidden", "query", "key", "value", "logits", "sentence", "embeddings"}
)
Category = Literal["response", "feature", "relation"]
# How `kdgrid.core.losses.compute_knowledge` calls a function:
#   "pair"     fn(student, teacher, mask, **options)
#   "relation" fn(student, teacher, mask, heads_s, heads_t, relation_heads, **options)
#   "soft"     fn(student_logits, teacher_logits, temperature, **options)
#   "hard"     fn(student_logits, labels, **options)
#   "batch"    fn(student_sentence, teacher_sentence, **options)   (also accepts an unused mask third)
CallStyle = Literal["pair", "relation", "soft", "hard", "batch"]
# Which layers a knowledge is applied on: the strategy's pairs, the embeddings (0, 0), or none (logits and
# sentence vectors, taken once per example).
Placement = Literal["pairs", "embeddings", "output"]
# The package whose modules declare the built-in knowledge types (read without importing it).
LOSSES_PACKAGE = "kdgrid.core.losses"
_LOSSES_DIR = Path(__file__).with_name("losses")


class ShapeError(ConfigError):
    """Student and teacher tensors (or the mask) do not fit together; the message gives the shapes."""


@dataclass(frozen=True)
class KnowledgeSpec:
    """What a knowledge type is and what it needs.

    Attributes:
        name: the registry name (the paper's table name for the ten paper types, e.g. ``attention_mse_sum``).
        function: where the loss function lives, ``module:name`` (`fn` imports it on first use).
        needs: the features it reads, drawn from `FEATURES`.
        needs_projection: whether the student must first be projected to the teacher's width.
        category: ``response`` | ``feature`` | ``relation`` (the paper's taxonomy).
        region: where it acts: ``attention`` | ``hidden`` | ``qkv`` (the paper's three double-match regions),
            or ``logits`` | ``embeddings`` | ``sentence`` for the others.
        call_style: how `compute_knowledge` passes arguments (see the module comment).
        placement: ``pairs`` (each of the strategy's layer pairs), ``embeddings`` (layer 0 of both) or
            ``output`` (once per batch, no layer).
        source: where the formula comes from.
        aliases: further written names accepted for it.
        teacher_at_student_width: whether the teacher's feature reaches the function already at the student's
            width, brought there by the method that declares the knowledge (its
            `kdgrid.core.step_hooks.StepHooks.teacher_features`: Flex-KD keeps d_S of the teacher's dimensions);
            such a knowledge needs no projection and compares equal widths.
    """

    name: str
    function: str
    needs: frozenset[str]
    needs_projection: bool
    category: Category
    region: str
    call_style: CallStyle
    placement: Placement
    source: str
    aliases: tuple[str, ...] = ()
    teacher_at_student_width: bool = False

    @property
    def in_paper(self) -> bool:
        """One of the paper's ten intermediate knowledge types (`kdgrid.paper.PAPER_KNOWLEDGE`)."""
        return self.name in PAPER_KNOWLEDGE

    @property
    def paper_label(self) -> str:
        """The name as the paper's prose writes it (``attention mse``); the registry name with spaces for a
        knowledge the paper does not have."""
        return PAPER_KNOWLEDGE_LABELS.get(self.name, self.name.replace("_", " "))

    @property
    def fn(self) -> Callable[..., Any]:
        """The loss function (its module imported on first use: torch)."""
        if self.name not in _FUNCTIONS:
            module, _, _ = self.function.partition(":")
            importlib.import_module(module)  # its decorators bind the function
            if self.name not in _FUNCTIONS:
                raise ConfigError(
                    f"knowledge {self.name!r}: importing {module} registered no function for it "
                    f"(declared as {self.function})"
                )
        return _FUNCTIONS[self.name]

    def options(self) -> dict[str, Any]:
        """The keyword-only variants of `fn` with their defaults (e.g. ``{"scale": "sum"}`` for pkd)."""
        return {
            p.name: p.default
            for p in inspect.signature(self.fn).parameters.values()
            if p.kind is inspect.Parameter.KEYWORD_ONLY
        }


KNOWLEDGE: dict[str, KnowledgeSpec] = {}
_ALIASES: dict[str, str] = {}
_FUNCTIONS: dict[str, Callable[..., Any]] = {}


def _spec(
    name: str,
    function: str,
    *,
    needs: Sequence[str],
    needs_projection: bool,
    category: Category,
    region: str,
    call_style: CallStyle,
    placement: Placement = "pairs",
    source: str,
    aliases: Sequence[str] = (),
    teacher_at_student_width: bool = False,
) -> KnowledgeSpec:
    unknown = sorted(set(needs) - FEATURES)
    if unknown:
        raise ValueError(
            f"knowledge {name!r} needs unknown feature(s) {unknown}; allowed: {sorted(FEATURES)}"
        )
    return KnowledgeSpec(
        name=name,
        function=function,
        needs=frozenset(needs),
        needs_projection=needs_projection,
        category=category,
        region=region,
        call_style=call_style,
        placement=placement,
        source=source,
        aliases=tuple(aliases),
        teacher_at_student_width=teacher_at_student_width,
    )


def _add(spec: KnowledgeSpec) -> None:
    KNOWLEDGE[spec.name] = spec
    for alias in (spec.name, spec.paper_label, *spec.aliases):
        _ALIASES[_alias_key(alias)] = spec.name


def register(
    name: str,
    *,
    needs: Sequence[str],
    needs_projection: bool,
    category: Category,
    region: str,
    call_style: CallStyle,
    placement: Placement = "pairs",
    source: str,
    aliases: Sequence[str] = (),
    teacher_at_student_width: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated loss under ``name`` in `KNOWLEDGE`.

    The keywords are the `KnowledgeSpec` fields: ``needs`` (features, from `FEATURES`),
    ``needs_projection``, ``category``, ``region``, ``call_style``, ``placement`` (default ``pairs``),
    ``source`` (the paper: authors, venue, year), ``aliases`` (further written names) and
    ``teacher_at_student_width`` (default False: the teacher's feature arrives at its own width). In the modules of
    `kdgrid.core.losses` they must be literals: the registry reads them from the source without importing torch.

    Raises:
        ValueError: a name registered twice, an unknown feature, or a built-in declaration whose module, once
            imported, declares something else than its source said.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        spec = _spec(
            name,
            f"{fn.__module__}:{fn.__qualname__}",
            needs=needs,
            needs_projection=needs_projection,
            category=category,
            region=region,
            call_style=call_style,
            placement=placement,
            source=source,
            aliases=aliases,
            teacher_at_student_width=teacher_at_student_width,
        )
        known = KNOWLEDGE.get(name)
        if known is not None and (known != spec or name in _FUNCTIONS):
            raise ValueError(
                f"knowledge {name!r} is registered twice"
                + ("" if name in _FUNCTIONS else f" (declared as {known}, now as {spec})")
            )
        _add(spec)
        _FUNCTIONS[name] = fn
        return fn

    return decorate


def _alias_key(name: str) -> str:
    # "Attention MSE", "attention_mse", "attention-mse" all read the same.
    return re.sub(r"[\s_\-]+", " ", name.strip().lower())


def _declarations(path: Path, module: str) -> list[KnowledgeSpec]:
    """The ``@register(...)`` declarations of one loss module, read from its source (no import)."""
    specs: list[KnowledgeSpec] = []
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            if not (
                isinstance(decorator, ast.Call)
                and isinstance(decorator.func, ast.Name)
                and decorator.func.id == "register"
            ):
                continue
            try:
                (name,) = (ast.literal_eval(arg) for arg in decorator.args)
                metadata = {kw.arg: ast.literal_eval(kw.value) for kw in decorator.keywords if kw.arg}
            except ValueError as error:
                raise ValueError(
                    f"{path}:{decorator.lineno}: a built-in knowledge's @register arguments must be literals "
                    f"(the registry reads them without importing torch): {error}"
                ) from None
            specs.append(_spec(name, f"{module}:{node.name}", **metadata))
    return specs


def declare_module(path: Path, module: str) -> list[KnowledgeSpec]:
    """Declare the knowledge functions of the loss module ``module`` (its source at ``path``) from their
    ``@register(...)`` decorators' literal arguments, without importing it (the functions bind when it is first
    imported, as the built-in losses do). For a method's own loss module: its torch-free spec calls this, so the
    registry knows the knowledge before torch is loaded. Declaring the same module again is harmless.

    Raises:
        ValueError: a name another module registered, or a decorator whose arguments are not literals.
    """
    declared = []
    for spec in _declarations(path, module):
        known = KNOWLEDGE.get(spec.name)
        if known is not None and known.function != spec.function:
            raise ValueError(f"knowledge {spec.name!r} is registered twice")
        if known is None:
            _add(spec)
        declared.append(KNOWLEDGE[spec.name])
    return declared


def _declare_built_ins() -> None:
    for path in sorted(_LOSSES_DIR.glob("*.py")):
        if path.name.startswith("_"):
            continue
        for spec in _declarations(path, f"{LOSSES_PACKAGE}.{path.stem}"):
            if spec.name in KNOWLEDGE:
                raise ValueError(f"knowledge {spec.name!r} is registered twice")
            _add(spec)


_declare_built_ins()


def known_specs(names: Iterable[str]) -> list[KnowledgeSpec]:
    """The registry's specs of ``names`` (any accepted spellings), leaving out a name it does not know (refused,
    with the valid names, by the knowledge check itself)."""
    specs = []
    for name in names:
        try:
            specs.append(KNOWLEDGE[canonical_knowledge(name)])
        except ConfigError:
            continue
    return specs


def canonical_knowledge(name: str) -> str:
    """The registry name for a registry name, the paper's written name or an alias (case, spaces, ``_`` and
    ``-`` ignored): ``"Attention MSE"`` -> ``attention_mse_sum``, ``"vr"`` -> ``value_relation``.

    Raises ConfigError listing the valid names.
    """
    if not isinstance(name, str) or _alias_key(name) not in _ALIASES:
        raise ConfigError(
            f"unknown knowledge {name!r}; valid names: {', '.join(KNOWLEDGE)} "
            f"(the paper's written names such as 'attention mse' or 'vr' are accepted too)"
            f"{did_you_mean(str(name), KNOWLEDGE)}"
        )
    return _ALIASES[_alias_key(name)]


# The three regions of the double-match study, in the order the paper's pair names put them.
DOUBLE_MATCH_REGIONS: tuple[str, ...] = ("attention", "hidden", "qkv")


def canonical_pair(first: str, second: str) -> tuple[str, str]:
    """Two knowledge names (any alias) in the paper's order: by region (attention, hidden, qkv), then name."""
    a, b = canonical_knowledge(first), canonical_knowledge(second)
    if a == b:
        raise ConfigError(f"a double match needs two different knowledge types, got {a!r} twice")
    order = {region: i for i, region in enumerate(DOUBLE_MATCH_REGIONS)}
    key_a = (order.get(KNOWLEDGE[a].region, len(order)), a)
    key_b = (order.get(KNOWLEDGE[b].region, len(order)), b)
    return (a, b) if key_a <= key_b else (b, a)


def paper_name(name: str) -> str:
    """Map a name as the paper (or its OCR'd tables) writes it to the registry name.

    ``paper_name("attention mse") == "attention_mse_sum"``, ``paper_name("query relation") ==
    "query_relation"``, ``paper_name("vr") == "value_relation"``. A combined cell such as
    ``"attention ce, vr"`` is not one name: split it first (or use `canonical_pair`). The written form of a
    registry name is ``KNOWLEDGE[name].paper_label``.
    """
    return canonical_knowledge(name)


def get_knowledge(name: str) -> KnowledgeSpec:
    """The spec of a knowledge type by any accepted name; ConfigError listing the valid names otherwise."""
    return KNOWLEDGE[canonical_knowledge(name)]


def term_name(name: str, layer_pair: tuple[int, int] | None) -> str:
    """The name of one loss term: ``hidden_mse@2-12`` for a layer pair, the knowledge name alone otherwise.

    Used as the key of a term in result rows and of its projection in a checkpoint.
    """
    return name if layer_pair is None else f"{name}@{layer_pair[0]}-{layer_pair[1]}"


# The soft and hard labels (eq. 9): the objective's own soft and hard terms, weighted by soft_weight and alpha,
# cover them, so written as knowledge they add no knowledge term.
RESPONSE_KNOWLEDGE: tuple[str, ...] = ("soft_label", "hard_label")
# The features of the attention blocks: the embedding layer (0) has none, so no such term is placed on it.
ATTENTION_FEATURES: frozenset[str] = frozenset({"scores", "query", "key", "value"})


def is_response(name: str) -> bool:
    """Whether ``name`` (any accepted name) is the soft or hard label, which adds no knowledge term; False for an
    unknown name (its own check refuses it)."""
    try:
        return canonical_knowledge(name) in RESPONSE_KNOWLEDGE
    except ConfigError:
        return False


def distilled_knowledge(names: Sequence[str]) -> list[str]:
    """The names of ``names`` that add knowledge terms: all but the soft and hard labels (`RESPONSE_KNOWLEDGE`),
    as written."""
    return [name for name in names if not is_response(name)]


def term_pairs(name: str, strategy_pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int] | None]:
    """The layer pairs one knowledge is applied on, given the matching strategy's pairs.

    ``pairs`` placement: the strategy's pairs; ``embeddings``: ``[(0, 0)]``; ``output``: ``[None]`` (one term).
    """
    placement = get_knowledge(name).placement
    if placement == "pairs":
        return list(strategy_pairs)
    if placement == "embeddings":
        return [(0, 0)]
    return [None]


def placed_terms(
    names: Sequence[str], strategy_pairs: Sequence[tuple[int, int]]
) -> list[tuple[str, tuple[int, int] | None]]:
    """The (knowledge, layer pair) of every knowledge term of a trial with knowledge ``names`` (any accepted
    names) on the matching strategy's pairs, as the objective builds them: the soft and hard labels add none
    (`RESPONSE_KNOWLEDGE`), each other knowledge is placed by `term_pairs`, and an attention knowledge
    (`ATTENTION_FEATURES`) has no term on a pair that touches the embedding layer 0. Pair None: a term without
    layers (sentence vectors, logits).

    Raises ConfigError for an unknown name.
    """
    placed: list[tuple[str, tuple[int, int] | None]] = []
    for name in distilled_knowledge(names):
        spec = get_knowledge(name)
        attention = bool(spec.needs & ATTENTION_FEATURES)
        placed += [
            (spec.name, pair)
            for pair in term_pairs(spec.name, strategy_pairs)
            if pair is None or not (attention and 0 in pair)
        ]
    return placed


def is_projected(name: str, student_width: int, teacher_width: int) -> bool:
    """Whether a knowledge's terms go through a projection: it compares the two sides in the teacher's width
    (``needs_projection``) and the widths differ."""
    return bool(get_knowledge(name).needs_projection) and student_width != teacher_width


def projected_term_count(
    names: Sequence[str], strategy_pairs: Sequence[tuple[int, int]], student_width: int, teacher_width: int
) -> int:
    """How many knowledge terms of a trial (`placed_terms`) go through a projection (`is_projected`): what the
    methods' ``terms`` rules read, counted as the objective builds the terms.

    Raises ConfigError for an unknown name."""
    return sum(is_projected(name, student_width, teacher_width) for name, _ in placed_terms(names, strategy_pairs))
