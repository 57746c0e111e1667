"""The generated tasks: deterministic, balanced, made of vocabulary words, labels a function of the text."""

from __future__ import annotations

from collections import Counter

import pytest

from kdgrid.core.data import generate_examples, get_task, load_splits
from kdgrid.core.data.synthetic import KINDS, SHAPES, make_lexicon, vocabulary_words

SHAPE_KINDS = [(shape, kind) for shape in SHAPES for kind in KINDS]


@pytest.mark.parametrize(("shape", "kind"), SHAPE_KINDS)
def test_same_seed_same_data_other_seed_or_split_other_data(shape: str, kind: str) -> None:
    first = generate_examples(shape, kind, 40, seed=3)
    assert first == generate_examples(shape, kind, 40, seed=3)
    assert first != generate_examples(shape, kind, 40, seed=4)
    assert first != generate_examples(shape, kind, 40, seed=3, split="validation")


@pytest.mark.parametrize(("shape", "kind"), [(s, k) for s, k in SHAPE_KINDS if k != "regression"])
def test_classes_are_exactly_balanced(shape: str, kind: str) -> None:
    classes = 2 if kind == "binary" else 3
    counts = Counter(e["label"] for e in generate_examples(shape, kind, 301))
    assert set(counts) == set(range(classes))
    assert max(counts.values()) - min(counts.values()) <= 1


def test_sentences_use_only_whole_vocabulary_words() -> None:
    words = vocabulary_words()
    assert len(words) > 10_000
    assert all(not w.startswith(("[", "##")) and w.isalpha() for w in words)
    vocabulary = set(words)
    for shape, kind in SHAPE_KINDS:
        for example in generate_examples(shape, kind, 20):
            for key in ("sentence", "sentence1", "sentence2"):
                if key in example:
                    assert set(example[key].split()) <= vocabulary


def test_single_sentence_labels_follow_the_marker_words() -> None:
    lexicon = make_lexicon(0, vocabulary_words())
    for kind in ("binary", "3class"):
        for example in generate_examples("single", kind, 60):
            found = [
                c
                for c, markers in enumerate(lexicon.markers)
                if set(example["sentence"].split()) & set(markers)
            ]
            assert found == [example["label"]]
    for example in generate_examples("single", "regression", 60):
        positive = sum(word in lexicon.markers[1] for word in example["sentence"].split())
        assert example["label"] == pytest.approx(5.0 * positive / 4)


def _overlap(example: dict) -> float:
    first, second = set(example["sentence1"].split()), example["sentence2"].split()
    return sum(word in first for word in second) / len(second)


def test_pair_labels_follow_word_overlap_and_negation() -> None:
    for example in generate_examples("pair", "binary", 80):
        assert (_overlap(example) >= 0.5) == (example["label"] == 1)
    negations = set(make_lexicon(0, vocabulary_words()).negations)
    for example in generate_examples("pair", "3class", 90):
        negated = bool(set(example["sentence2"].split()) & negations)
        expected = 1 if _overlap(example) == 0 else 2 if negated else 0
        assert example["label"] == expected
    scores = [e["label"] for e in generate_examples("pair", "regression", 80)]
    assert all(
        e["label"] == pytest.approx(5.0 * _overlap(e)) for e in generate_examples("pair", "regression", 80)
    )
    assert min(scores) < 1.0 and max(scores) > 4.0  # the whole 0-5 range is used


def test_named_sizes_reach_the_loaded_splits_and_every_word_is_one_token() -> None:
    splits = load_splits("synthetic-pair-3class-n50-d10-s2")
    assert {name: len(s) for name, s in splits.items()} == {"train": 50, "validation": 10}
    default = load_splits("synthetic-single-binary")
    assert {name: len(s) for name, s in default.items()} == {"train": 256, "validation": 64}
    assert get_task("synthetic-pair-regression").is_regression

    from transformers import AutoTokenizer

    from kdgrid.assets import teacher_dir

    tokenizer = AutoTokenizer.from_pretrained(teacher_dir())
    sentence = default["train"][0]["sentence"]
    assert len(tokenizer(sentence, add_special_tokens=False)["input_ids"]) == len(sentence.split())
