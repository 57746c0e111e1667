"""`PretrainRecipe`: everything that decides a pre-trained or general-distilled student's weights, its canonical
JSON, and its content key (the name of its artifact, `kdgrid.core.pretrained.artifacts`).

Two objectives (the paper's section 3.1): ``pretrain`` (no teacher: the masked-LM loss alone) and
``general_distillation`` (the masked-LM loss plus the teacher's knowledge, through the same knowledge functions,
matching strategies and projections as task distillation). The defaults and their sources are in
docs/pretrain.md: BERT's pre-training recipe (steps, batch, block length, learning rate) and MiniLMv2's knowledge
(query, key and value self-relations on the last layer), which needs no projection and works for any depth, so
every student shape of Tables 1 and 2 can be general-distilled.

The key is the first 16 hex digits of the SHA-256 of the canonical JSON plus what the names stand for: the
teacher's weight bytes (a local teacher; a Hub teacher by its name, `kdgrid.core.model.teacher_cache.base_digest`) and
the corpus's identity (`kdgrid.core.pretrained.corpus_spec`). How a run is executed (processes, micro-batch, checkpoint
interval) is not part of it: those do not change the result beyond float rounding.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import shlex
from dataclasses import dataclass, field
from typing import Any

from kdgrid.core.choices import PROJECTIONS, unknown_choice
from kdgrid.core.knowledge import get_knowledge
from kdgrid.core.matching import canonical_strategy
from kdgrid.core.model.shapes import is_ssm_name, student_shape
from kdgrid.core.model.teacher_cache import MINILM_ALIAS, base_digest
from kdgrid.core.pretrained.corpus_spec import CORPUS_FORMAT_VERSION, parse_corpus
from kdgrid.errors import ConfigError
from kdgrid.trial import Distillation, canonical_options, json_fields, versioned_json

# Bump only when the meaning of an existing field changes: every key changes with it.
RECIPE_VERSION = 1

OBJECTIVES = ("pretrain", "general_distillation")
# MiniLMv2's knowledge (self-relations of queries, keys and values) on the last layer (MiniLM's strategy).
DEFAULT_KNOWLEDGE: tuple[str, ...] = ("key_relation", "query_relation", "value_relation")
DEFAULT_STRATEGY = "MiniLM"
DEFAULT_CORPUS = "wikibooks"
# The fields `kdgrid pretrain` has an option of their own for; the others are given as --set FIELD=VALUE.
COMMAND_OPTIONS = (
    "student",
    "teacher",
    "corpus",
    "steps",
    "global_batch",
    "block_length",
    "lr",
    "strategy",
    "relation_heads",
    "max_documents",
    "seed",
)
# Knowledge that reads the task head's logits has nothing to read in pre-training.
NO_TASK_HEAD = frozenset({"logits"})


@dataclass(frozen=True)
class PretrainRecipe:
    """One pre-training or general-distillation run.

    Attributes:
        student: the student shape (``bert-tiny`` ... or ``w{width}-l{layers}[-h][-f]``); kept in its full
            canonical form (``w128-l2-h2-f512``): the shape, not its nickname, decides the weights.
        teacher: ``None`` for plain pre-training; else a Hub name, a local ``save_pretrained`` directory or
            ``minilm-l6`` (the offline MiniLM's base weights, not a task-fine-tuned copy).
        objective: ``pretrain`` | ``general_distillation``; follows from ``teacher`` when left ``None``.
        corpus: a corpus spelling (`kdgrid.core.pretrained.corpus_spec.parse_corpus`).
        max_documents: read at most this many documents of the corpus (``None``: all).
        tokenizer: where the WordPiece tokenizer comes from; ``None``: the teacher's, or without a teacher the
            offline MiniLM's (bert-base-uncased's vocabulary, which every teacher and student here shares).
        knowledge, strategy, beta, projection, relation_heads, options: the distillation terms, the spec a trial
            has too (`kdgrid.trial.Distillation`, `distillation`), kept flat so the key is unchanged; ignored
            (and emptied) for plain pre-training. ``beta`` is a number.
            ``relation_heads`` ``None``: the student's heads where they divide the teacher's width, else the
            largest count below them that divides both widths (`kdgrid.pretrain.loss.relation_heads`).
        mlm_weight: the weight of the masked-LM loss against the knowledge terms (0: none, as in TinyBERT's
            general distillation); plain pre-training has no other term, so there it is always 1 whatever a
            recipe file says (one file serves both objectives: the bundled ``offline`` recipe has 0).
        mlm_probability: the share of tokens masked (BERT's 15%, of which 80% become [MASK], 10% a random
            token, 10% stay).
        steps: optimizer steps; global_batch: sequences per optimizer step (over all processes);
            block_length: tokens per sequence (packed, [CLS] ... [SEP]).
        lr, warmup_ratio, weight_decay: AdamW with linear warm-up then linear decay (`kdgrid.core.optim`).
        dropout: BERT's hidden and attention dropout of the student.
        seed: the student's initialisation, the data order and the masking.
    """

    student: str
    teacher: str | None = None
    objective: str | None = None
    corpus: str = DEFAULT_CORPUS
    max_documents: int | None = None
    tokenizer: str | None = None
    knowledge: tuple[str, ...] = DEFAULT_KNOWLEDGE
    strategy: str | None = DEFAULT_STRATEGY
    beta: float = 1.0
    projection: str = "linear"
    relation_heads: int | None = None
    options: tuple[tuple[str, Any], ...] = field(default=())
    mlm_weight: float = 1.0
    mlm_probability: float = 0.15
    steps: int = 1_000_000
    global_batch: int = 256
    block_length: int = 128
    lr: float = 1e-4
    warmup_ratio: float = 0.01
    weight_decay: float = 0.01
    dropout: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        set_ = functools.partial(object.__setattr__, self)
        set_("student", student_shape(self.student).name)
        if is_ssm_name(self.student):  # pre-training builds BERTs (masked-LM heads): an SSM would be one silently
            raise ConfigError(f"pre-training takes BERT students, not the SSM student {self.student!r}")
        derived = "pretrain" if self.teacher is None else "general_distillation"
        if self.objective is None:
            set_("objective", derived)
        if self.objective not in OBJECTIVES:
            raise ConfigError(unknown_choice("objective", str(self.objective), OBJECTIVES))
        if self.objective != derived:
            raise ConfigError(
                "objective 'general_distillation' needs a teacher"
                if self.teacher is None
                else f"objective 'pretrain' has no teacher, but teacher {self.teacher!r} is set; "
                "leave the teacher out or use objective 'general_distillation'"
            )
        if self.tokenizer is None:
            set_("tokenizer", self.teacher or MINILM_ALIAS)
        set_("options", canonical_options(self.options))
        if self.objective == "pretrain":
            set_("mlm_weight", 1.0)
            set_("knowledge", ())
            set_("strategy", None)
            set_("relation_heads", None)
            set_("options", ())
        else:
            set_("knowledge", _canonical_knowledge(self.knowledge))
            if self.knowledge and not self.strategy:
                raise ConfigError(f"knowledge {list(self.knowledge)} needs a matching strategy")
            set_("strategy", canonical_strategy(self.strategy) if self.knowledge and self.strategy else None)
            if self.projection not in PROJECTIONS:
                raise ConfigError(unknown_choice("projection", self.projection, PROJECTIONS))
        for name in (
            "beta",
            "mlm_weight",
            "mlm_probability",
            "lr",
            "warmup_ratio",
            "weight_decay",
            "dropout",
        ):
            set_(name, float(getattr(self, name)))
        parse_corpus(self.corpus)  # refuses an empty or missing corpus now, not after the teacher has loaded
        for problem in self.problems():
            raise ConfigError(problem)

    def problems(self) -> list[str]:
        """The numbers out of range, each as one sentence (empty when the recipe is valid)."""
        checks = [
            (self.steps >= 1, "steps must be at least 1"),
            (self.global_batch >= 1, "global_batch must be at least 1"),
            (8 <= self.block_length <= 512, "block_length must be in 8..512 (BERT's positions)"),
            (0.0 < self.mlm_probability < 1.0, "mlm_probability must be in (0, 1)"),
            (self.lr > 0 and math.isfinite(self.lr), "lr must be a positive number"),
            (0.0 <= self.warmup_ratio <= 1.0, "warmup_ratio must be in [0, 1]"),
            (self.weight_decay >= 0, "weight_decay must be >= 0"),
            (0.0 <= self.dropout < 1.0, "dropout must be in [0, 1)"),
            (self.mlm_weight >= 0 and math.isfinite(self.mlm_weight), "mlm_weight must be >= 0"),
            (math.isfinite(self.beta) and self.beta >= 0, "beta must be a number >= 0"),
            (self.max_documents is None or self.max_documents >= 1, "max_documents must be at least 1"),
            (self.relation_heads is None or self.relation_heads >= 1, "relation_heads must be at least 1"),
            (self.mlm_weight > 0 or bool(self.knowledge), "mlm_weight is 0 and there is no knowledge"),
        ]
        return [f"pretrain recipe: {message}" for ok, message in checks if not ok]

    @property
    def distillation(self) -> Distillation:
        """The recipe's distillation terms as the spec a trial has (`kdgrid.trial.Distillation`)."""
        return Distillation.of(self)

    def to_dict(self) -> dict[str, Any]:
        """Every field, defaults filled in, as JSON-ready values."""
        return json_fields(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PretrainRecipe:
        """A recipe from a mapping (a manifest, a YAML file); unknown keys refused, naming the allowed ones."""
        allowed = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(allowed))
        if unknown:
            raise ConfigError(f"unknown pretrain recipe key(s) {unknown}; allowed: {', '.join(allowed)}")
        values = dict(data)
        if "knowledge" in values:
            values["knowledge"] = tuple(values["knowledge"])
        return cls(**values)

    def canonical_json(self) -> str:
        """Sorted keys, no whitespace, defaults filled in (the human-readable half of the key)."""
        return versioned_json(RECIPE_VERSION, self.to_dict())

    def command(self) -> str:
        """The `kdgrid pretrain` command that makes this recipe's checkpoint (fields at their default left out;
        the derived ``objective`` and ``tokenizer`` too, where they follow from the teacher)."""
        defaults = PretrainRecipe(student=self.student, teacher=self.teacher, corpus=self.corpus)
        words = ["kdgrid", "pretrain"]
        for name, value in self.to_dict().items():
            if value == defaults.to_dict()[name] and name not in ("student", "teacher", "corpus"):
                continue
            if value is None or name == "objective":
                continue
            option = name.replace("_", "-")
            if name == "knowledge":
                words += [part for item in value for part in ("--knowledge", item)]
            elif name in COMMAND_OPTIONS:
                words += [f"--{option}", str(value)]
            else:
                words += ["--set", f"{name}={json.dumps(value, separators=(',', ':'))}"]
        return shlex.join(words)

    @functools.cached_property
    def key(self) -> str:
        """16 hex digits naming this recipe's artifact: the canonical JSON plus the teacher's weights and the
        corpus's content (a local teacher or corpus is read once per process to hash it)."""
        payload = {
            "recipe": json.loads(self.canonical_json()),
            "teacher": base_digest(self.teacher) if self.teacher is not None else None,
            "corpus": parse_corpus(self.corpus).identity(),
            "corpus_format": CORPUS_FORMAT_VERSION,
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


@functools.cache
def _knowledge_spec(name: str) -> tuple[str, frozenset[str]]:
    spec = get_knowledge(name)
    return spec.name, frozenset(spec.needs)


def _canonical_knowledge(names: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    canonical = []
    for name in names:
        registry_name, needs = _knowledge_spec(name)
        if needs & NO_TASK_HEAD:
            raise ConfigError(
                f"knowledge {registry_name!r} reads a task head's logits, which pre-training has not got; "
                "use feature or relation knowledge"
            )
        canonical.append(registry_name)
    return tuple(sorted(set(canonical)))
