"""Generated GLUE-shaped tasks: deterministic, tiny, and learnable, for fast exact tests of every task shape.

Sentences are strings of real words from the MiniLM teacher's WordPiece vocabulary (``teacher_dir()/vocab.txt``,
whole lowercase words only: no ``[..]`` specials, no ``##`` pieces), so every word is one token. A seed fixes a
lexicon (1,000 filler words, 4 marker words per class, 4 negation words) and each split's examples. Labels are
simple functions of the text that a small model can learn:

================  ======================================  ================================================
task              columns                                 label
================  ======================================  ================================================
single-binary     sentence                                the class whose marker word the sentence holds
single-3class     sentence                                the same with three classes
single-regression sentence                                5 x (positive markers / 4 marker slots), in [0, 5]
pair-binary       sentence1, sentence2                    1 iff at least half of sentence2's words occur in
                                                          sentence1 (paraphrase-like; built far from the edge)
pair-3class       sentence1 (premise), sentence2          0 entailment: sentence2 is a subsequence of
                  (hypothesis)                            sentence1; 2 contradiction: the same plus a negation
                                                          word; 1 neutral: no word shared (MNLI's label order)
pair-regression   sentence1, sentence2                    5 x (fraction of sentence2's words found in
                                                          sentence1), in [0, 5] like STS-B
================  ======================================  ================================================

Classification labels are exactly balanced (class counts differ by at most one). Names:
``synthetic-{single|pair}-{binary|3class|regression}[-n{train size}][-d{dev size}][-s{seed}]``; the defaults
are 256 training and 64 dev examples, seed 0 (e.g. ``synthetic-pair-3class-n2000-d500``).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from kdgrid.assets import teacher_dir
from kdgrid.core.data.spec import TRAIN_SPLIT, TaskSpec
from kdgrid.errors import ConfigError
from kdgrid.trial import SEED_LIMIT

GENERATOR_VERSION = 1  # bump when the generated data changes: it is part of the tokenization cache key
SHAPES: tuple[str, ...] = ("single", "pair")
KINDS: tuple[str, ...] = ("binary", "3class", "regression")
DEFAULT_TRAIN_SIZE = 256
DEFAULT_DEV_SIZE = 64
DEFAULT_SEED = 0
MIN_WORDS, MAX_WORDS = 6, 14  # words per generated sentence (inclusive)
FILLER_SIZE = 1000
MARKERS_PER_CLASS = 4
REGRESSION_MARKER_SLOTS = 4
MAX_SCORE = 5.0  # regression labels lie in [0, MAX_SCORE], as STS-B's
DEV_SPLIT = "validation"
MAX_SYNTHETIC_EXAMPLES = 1_000_000  # per split: about 100 MB of generated text; a typo of 10^11 is refused

NAME_PATTERN = re.compile(
    r"^synthetic-(?P<shape>single|pair)-(?P<kind>binary|3class|regression)"
    r"(?:-n(?P<train>\d+))?(?:-d(?P<dev>\d+))?(?:-s(?P<seed>\d+))?$"
)

Example = dict[str, Any]


def synthetic_name(shape: str, kind: str, train_size: int, dev_size: int, seed: int) -> str:
    """The canonical name: size and seed suffixes appear only where they differ from the defaults."""
    name = f"synthetic-{shape}-{kind}"
    if train_size != DEFAULT_TRAIN_SIZE:
        name += f"-n{train_size}"
    if dev_size != DEFAULT_DEV_SIZE:
        name += f"-d{dev_size}"
    if seed != DEFAULT_SEED:
        name += f"-s{seed}"
    return name


def synthetic_task(
    shape: str,
    kind: str,
    *,
    train_size: int = DEFAULT_TRAIN_SIZE,
    dev_size: int = DEFAULT_DEV_SIZE,
    seed: int = DEFAULT_SEED,
) -> TaskSpec:
    """The `TaskSpec` of one generated task (``source="synthetic"``); nothing is generated yet."""
    if shape not in SHAPES:
        raise ConfigError(f"synthetic task shape {shape!r} is not one of {', '.join(SHAPES)}")
    if kind not in KINDS:
        raise ConfigError(f"synthetic task kind {kind!r} is not one of {', '.join(KINDS)}")
    for label, value in (("train_size", train_size), ("dev_size", dev_size)):
        if not isinstance(value, int) or value < 1:
            raise ConfigError(f"synthetic task {label} must be a positive integer, got {value!r}")
        if value > MAX_SYNTHETIC_EXAMPLES:
            raise ConfigError(
                f"synthetic task {label} {value:,} is above the limit of {MAX_SYNTHETIC_EXAMPLES:,} examples "
                "(a generated task is held in memory whole)"
            )
    if not 0 <= seed < SEED_LIMIT:
        raise ConfigError(f"synthetic task seed {seed} is invalid; allowed: an integer in [0, 2^32)")
    num_labels = {"binary": 2, "3class": 3, "regression": 1}[kind]
    metrics = {"binary": ("accuracy", "f1"), "3class": ("accuracy",), "regression": ("pearson", "spearman")}[
        kind
    ]
    return TaskSpec(
        name=synthetic_name(shape, kind, train_size, dev_size, seed),
        text_keys=("sentence",) if shape == "single" else ("sentence1", "sentence2"),
        label_key="label",
        num_labels=num_labels,
        metrics=metrics,
        primary_metric=metrics[0],
        dev_sets=(DEV_SPLIT,),
        source="synthetic",
        params={
            "shape": shape,
            "kind": kind,
            "train_size": train_size,
            "dev_size": dev_size,
            "seed": seed,
            "version": GENERATOR_VERSION,
        },
        description=f"generated {shape}-sentence {kind} task ({train_size} train / {dev_size} dev, seed {seed})",
    )


def parse_synthetic_name(name: str) -> TaskSpec | None:
    """The spec a ``synthetic-...`` name denotes, or None if the name is not of that form."""
    match = NAME_PATTERN.match(name)
    if match is None:
        return None
    return synthetic_task(
        match["shape"],
        match["kind"],
        train_size=int(match["train"] or DEFAULT_TRAIN_SIZE),
        dev_size=int(match["dev"] or DEFAULT_DEV_SIZE),
        seed=int(match["seed"] or DEFAULT_SEED),
    )


@lru_cache(maxsize=4)
def vocabulary_words(vocab_file: str | None = None) -> tuple[str, ...]:
    """Whole words of a WordPiece vocabulary (default: the MiniLM teacher's), in file order.

    Kept: ASCII, alphabetic, lowercase, at least 3 letters; dropped: ``[..]`` specials and ``##`` pieces.
    """
    if vocab_file is None:
        vocab_file = str(teacher_dir() / "vocab.txt")
    words = []
    for line in Path(vocab_file).read_text(encoding="utf-8").splitlines():
        token = line.strip()
        if token.startswith(("[", "##")):
            continue
        if token.isascii() and token.isalpha() and token.islower() and len(token) >= 3:
            words.append(token)
    return tuple(words)


@dataclass(frozen=True)
class Lexicon:
    """The words one seed's tasks are made of (pairwise disjoint groups)."""

    filler: tuple[str, ...]
    markers: tuple[tuple[str, ...], ...]  # one group per class (3 groups)
    negations: tuple[str, ...]


def make_lexicon(seed: int, words: tuple[str, ...]) -> Lexicon:
    needed = 3 * MARKERS_PER_CLASS + MARKERS_PER_CLASS + FILLER_SIZE
    if len(words) < needed:
        raise ConfigError(f"the vocabulary has {len(words)} whole words; the generator needs {needed}")
    chosen = random.Random(f"kdgrid-synthetic-lexicon/{seed}").sample(words, needed)
    m = MARKERS_PER_CLASS
    return Lexicon(
        filler=tuple(chosen[4 * m :]),
        markers=tuple(tuple(chosen[i * m : (i + 1) * m]) for i in range(3)),
        negations=tuple(chosen[3 * m : 4 * m]),
    )


def _balanced_labels(rng: random.Random, n: int, classes: int) -> list[int]:
    labels = [i % classes for i in range(n)]
    rng.shuffle(labels)
    return labels


def _fresh_words(rng: random.Random, lexicon: Lexicon, count: int, avoid: set[str]) -> list[str]:
    """``count`` distinct filler words, none of them in ``avoid``."""
    chosen: list[str] = []
    taken = set(avoid)
    while len(chosen) < count:
        word = rng.choice(lexicon.filler)
        if word not in taken:
            taken.add(word)
            chosen.append(word)
    return chosen


def _length(rng: random.Random) -> int:
    return rng.randint(MIN_WORDS, MAX_WORDS)


def _single_class(rng: random.Random, lexicon: Lexicon, n: int, classes: int) -> list[Example]:
    examples = []
    for label in _balanced_labels(rng, n, classes):
        words = [rng.choice(lexicon.filler) for _ in range(_length(rng) - 1)]
        words.insert(rng.randint(0, len(words)), rng.choice(lexicon.markers[label]))
        examples.append({"sentence": " ".join(words), "label": label})
    return examples


def _single_regression(rng: random.Random, lexicon: Lexicon, n: int) -> list[Example]:
    examples = []
    slots = REGRESSION_MARKER_SLOTS
    for _ in range(n):
        positive = rng.randint(0, slots)
        words = [rng.choice(lexicon.filler) for _ in range(_length(rng) - slots)]
        words += [rng.choice(lexicon.markers[1]) for _ in range(positive)]
        words += [rng.choice(lexicon.markers[0]) for _ in range(slots - positive)]
        rng.shuffle(words)
        examples.append({"sentence": " ".join(words), "label": MAX_SCORE * positive / slots})
    return examples


def _pair_binary(rng: random.Random, lexicon: Lexicon, n: int) -> list[Example]:
    examples = []
    for label in _balanced_labels(rng, n, 2):
        first = _fresh_words(rng, lexicon, _length(rng), set())
        if label == 1:  # a paraphrase: most of sentence1's words, reordered, maybe one new word
            second = rng.sample(first, rng.randint((3 * len(first) + 4) // 5, len(first)))
            second += _fresh_words(rng, lexicon, rng.randint(0, 1), set(first))
        else:  # unrelated: new words, maybe one borrowed from sentence1
            second = _fresh_words(rng, lexicon, _length(rng) - 1, set(first))
            second += rng.sample(first, rng.randint(0, 1))
        rng.shuffle(second)
        examples.append({"sentence1": " ".join(first), "sentence2": " ".join(second), "label": label})
    return examples


def _pair_3class(rng: random.Random, lexicon: Lexicon, n: int) -> list[Example]:
    examples = []
    for label in _balanced_labels(rng, n, 3):
        premise = _fresh_words(rng, lexicon, _length(rng), set())
        size = rng.randint(3, len(premise) - 1)
        if label == 1:  # neutral: nothing in common
            hypothesis = _fresh_words(rng, lexicon, size, set(premise))
        else:  # entailment / contradiction: an ordered subsequence of the premise ...
            keep = sorted(rng.sample(range(len(premise)), size))
            hypothesis = [premise[i] for i in keep]
            if label == 2:  # ... negated
                hypothesis.insert(rng.randint(0, len(hypothesis)), rng.choice(lexicon.negations))
        examples.append({"sentence1": " ".join(premise), "sentence2": " ".join(hypothesis), "label": label})
    return examples


def _pair_regression(rng: random.Random, lexicon: Lexicon, n: int) -> list[Example]:
    examples = []
    for _ in range(n):
        first = _fresh_words(rng, lexicon, _length(rng), set())
        size = _length(rng)
        shared = rng.randint(0, min(size, len(first)))
        second = rng.sample(first, shared) + _fresh_words(rng, lexicon, size - shared, set(first))
        rng.shuffle(second)
        examples.append(
            {"sentence1": " ".join(first), "sentence2": " ".join(second), "label": MAX_SCORE * shared / size}
        )
    return examples


def generate_examples(
    shape: str,
    kind: str,
    size: int,
    *,
    seed: int = DEFAULT_SEED,
    split: str = TRAIN_SPLIT,
    words: tuple[str, ...] | None = None,
) -> list[Example]:
    """``size`` examples of one split as dicts (text columns + ``label``); a pure function of its arguments.

    ``words`` defaults to `vocabulary_words()` (the teacher's vocabulary).
    """
    lexicon = make_lexicon(seed, vocabulary_words() if words is None else words)
    rng = random.Random(f"kdgrid-synthetic/v{GENERATOR_VERSION}/{seed}/{shape}/{kind}/{split}")
    if shape == "single":
        if kind == "regression":
            return _single_regression(rng, lexicon, size)
        return _single_class(rng, lexicon, size, 2 if kind == "binary" else 3)
    if kind == "binary":
        return _pair_binary(rng, lexicon, size)
    if kind == "3class":
        return _pair_3class(rng, lexicon, size)
    return _pair_regression(rng, lexicon, size)


def load_synthetic_splits(task: TaskSpec) -> dict[str, Any]:
    """``{"train": Dataset, "validation": Dataset}`` of a generated task."""
    import datasets  # about 1 s: only when a split is loaded, not when a task is named or listed

    shape, kind, seed = task.param("shape"), task.param("kind"), task.param("seed")
    sizes = {TRAIN_SPLIT: task.param("train_size"), DEV_SPLIT: task.param("dev_size")}
    features = datasets.Features(
        {
            **{key: datasets.Value("string") for key in task.text_keys},
            "label": datasets.Value("float32" if task.is_regression else "int64"),
        }
    )
    splits = {}
    for split in task.split_names:
        examples = generate_examples(shape, kind, sizes[split], seed=seed, split=split)
        columns = {key: [e[key] for e in examples] for key in features}
        splits[split] = datasets.Dataset.from_dict(columns, features=features)
    return splits


def default_synthetic_tasks() -> dict[str, TaskSpec]:
    """Every shape x kind at the default sizes and seed, by name."""
    tasks = (synthetic_task(shape, kind) for shape in SHAPES for kind in KINDS)
    return {task.name: task for task in tasks}
