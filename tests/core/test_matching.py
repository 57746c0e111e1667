"""Layer matching: every strategy's pairs for the depths the grid uses, written out by hand, and the edges."""

from __future__ import annotations

import pytest

from kdgrid.core.matching import (
    MINILM_KNOWLEDGE,
    STRATEGIES,
    STRATEGY_ALIASES,
    canonical_strategy,
    get_strategy,
    layer_pairs,
)
from kdgrid.errors import ConfigError
from kdgrid.paper import PAPER_STRATEGIES

# (L_S, L_T) -> strategy -> expected pairs, by hand; Random's are drawn from a seed (tests/core/test_controls.py).
EXPECTED: dict[tuple[int, int], dict[str, list[tuple[int, int]]]] = {
    (2, 12): {
        "First": [(1, 1), (2, 2)],
        "Last": [(1, 11), (2, 12)],
        "Dilatation": [(1, 6), (2, 12)],
        "First-1": [(1, 1)],
        "Last-1": [(2, 12)],
        "PKD-skip": [(1, 6)],
        "PKD-last": [(1, 11)],
        "MiniLM": [(2, 12)],
        "Reverse": [(1, 12), (2, 6)],
        "All-to-one": [(1, 12), (2, 12)],
    },
    (4, 12): {
        "First": [(1, 1), (2, 2), (3, 3), (4, 4)],
        "Last": [(1, 9), (2, 10), (3, 11), (4, 12)],
        "Dilatation": [(1, 3), (2, 6), (3, 9), (4, 12)],
        "First-1": [(1, 1)],
        "Last-1": [(4, 12)],
        "PKD-skip": [(1, 3), (2, 6), (3, 9)],
        "PKD-last": [(1, 9), (2, 10), (3, 11)],
        "MiniLM": [(4, 12)],
        # Dilatation's teacher layers, read backwards.
        "Reverse": [(1, 12), (2, 9), (3, 6), (4, 3)],
        # Yu, Wen & Mou: every student layer to the last teacher layer.
        "All-to-one": [(1, 12), (2, 12), (3, 12), (4, 12)],
    },
    (4, 6): {
        "First": [(1, 1), (2, 2), (3, 3), (4, 4)],
        "Last": [(1, 3), (2, 4), (3, 5), (4, 6)],
        # 6/4 = 1.5 per student layer, floored: 1.5 -> 1, 3 -> 3, 4.5 -> 4, 6 -> 6.
        "Dilatation": [(1, 1), (2, 3), (3, 4), (4, 6)],
        "First-1": [(1, 1)],
        "Last-1": [(4, 6)],
        "PKD-skip": [(1, 1), (2, 3), (3, 4)],
        "PKD-last": [(1, 3), (2, 4), (3, 5)],
        "MiniLM": [(4, 6)],
        "Reverse": [(1, 6), (2, 4), (3, 3), (4, 1)],
        "All-to-one": [(1, 6), (2, 6), (3, 6), (4, 6)],
    },
    (6, 6): {
        "First": [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6)],
        "Last": [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6)],
        "Dilatation": [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6)],
        "First-1": [(1, 1)],
        "Last-1": [(6, 6)],
        "PKD-skip": [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)],
        "PKD-last": [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)],
        "MiniLM": [(6, 6)],
        "Reverse": [(1, 6), (2, 5), (3, 4), (4, 3), (5, 2), (6, 1)],
        "All-to-one": [(1, 6), (2, 6), (3, 6), (4, 6), (5, 6), (6, 6)],
    },
    (3, 12): {
        "First": [(1, 1), (2, 2), (3, 3)],
        "Last": [(1, 10), (2, 11), (3, 12)],
        "Dilatation": [(1, 4), (2, 8), (3, 12)],
        "First-1": [(1, 1)],
        "Last-1": [(3, 12)],
        "PKD-skip": [(1, 4), (2, 8)],
        "PKD-last": [(1, 10), (2, 11)],
        "MiniLM": [(3, 12)],
        "Reverse": [(1, 12), (2, 8), (3, 4)],
        "All-to-one": [(1, 12), (2, 12), (3, 12)],
    },
}

# The learnable strategies (LAD, ALP-KD) give one term per student layer, named by Dilatation's teacher layer (their
# targets come from every teacher layer: tests/core/test_learned_methods.py).
for _table in EXPECTED.values():
    _table["LAD"] = _table["ALP-KD"] = _table["Dilatation"]


UNSEEDED = sorted(name for name, spec in STRATEGIES.items() if not spec.seeded)


def test_every_strategy_is_covered_by_the_expected_table():
    assert set(STRATEGIES) - set(UNSEEDED) == {"Random"}
    for depths, table in EXPECTED.items():
        assert set(table) == set(UNSEEDED), depths


@pytest.mark.parametrize("depths", sorted(EXPECTED))
@pytest.mark.parametrize("strategy", UNSEEDED)
def test_pairs_match_the_hand_written_table(depths, strategy):
    assert layer_pairs(strategy, *depths) == EXPECTED[depths][strategy]
    assert layer_pairs(strategy, *depths, seed=5) == EXPECTED[depths][strategy]  # only Random reads the seed


def test_paper_strategies_in_table_column_order():
    assert PAPER_STRATEGIES == ("First", "Last", "Dilatation", "First-1", "Last-1")
    assert [name for name, spec in STRATEGIES.items() if spec.in_paper] == list(PAPER_STRATEGIES)


def test_figure_1_of_the_paper():
    # L_T = 4, L_S = 2, k = 2 (Figure 1): First-k, Last-k and Dilatation.
    assert layer_pairs("First", 2, 4) == [(1, 1), (2, 2)]
    assert layer_pairs("Last", 2, 4) == [(1, 3), (2, 4)]
    assert layer_pairs("Dilatation", 2, 4) == [(1, 2), (2, 4)]


@pytest.mark.parametrize(
    ("written", "canonical"),
    [
        ("first", "First"),
        ("LAST", "Last"),
        ("dilatation", "Dilatation"),
        ("first-1", "First-1"),
        ("First1", "First-1"),  # as Table 8 writes it
        ("last_1", "Last-1"),
        ("Last 1", "Last-1"),
        ("uniform", "Dilatation"),
        ("Uniform", "Dilatation"),
        ("pkd-skip", "PKD-skip"),
        ("PKD_Last", "PKD-last"),
        ("minilm", "MiniLM"),
        ("reverse", "Reverse"),
        ("RANDOM", "Random"),
    ],
)
def test_names_are_case_and_separator_insensitive(written, canonical):
    assert canonical_strategy(written) == canonical
    assert get_strategy(written).name == canonical


def test_uniform_is_an_alias_of_dilatation():
    assert STRATEGY_ALIASES["Uniform"] == "Dilatation"
    assert "Uniform" not in STRATEGIES
    for depths in EXPECTED:
        assert layer_pairs("Uniform", *depths) == layer_pairs("Dilatation", *depths)


def test_unknown_strategy_lists_the_valid_names():
    with pytest.raises(ConfigError) as err:
        layer_pairs("Middle", 4, 12)
    message = str(err.value)
    assert "'Middle'" in message
    for name in (*STRATEGIES, "Uniform"):
        assert name in message


@pytest.mark.parametrize(
    "strategy", ["First", "Last", "Dilatation", "PKD-skip", "PKD-last", "Reverse", "Random"]
)
def test_student_deeper_than_teacher_is_refused_naming_both_depths(strategy):
    with pytest.raises(ConfigError) as err:
        layer_pairs(strategy, 8, 6, seed=0)
    message = str(err.value)
    assert strategy in message and "student depth 8" in message and "teacher depth 6" in message


@pytest.mark.parametrize(
    ("strategy", "expected"), [("First-1", [(1, 1)]), ("Last-1", [(8, 6)]), ("MiniLM", [(8, 6)])]
)
def test_single_pair_strategies_work_for_a_deeper_student(strategy, expected):
    assert layer_pairs(strategy, 8, 6) == expected


def test_pkd_strategies_need_two_student_layers():
    with pytest.raises(ConfigError, match="at least 2 layers; got student depth 1"):
        layer_pairs("PKD-skip", 1, 12)
    assert layer_pairs("Dilatation", 1, 12) == [(1, 12)]
    assert layer_pairs("Last", 1, 12) == [(1, 12)]


@pytest.mark.parametrize("depths", [(0, 12), (4, 0), (-1, 6), (2.0, 12), (True, 12)])
def test_depths_must_be_positive_integers(depths):
    with pytest.raises(ConfigError, match="depth must be a positive integer"):
        layer_pairs("First", *depths)


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_invariants_over_many_depths(strategy):
    """Pairs stay in range, student layers increase, distinct-layer strategies never reuse a teacher layer, and
    their teacher layers increase too except in a negative control (Reverse, Random)."""
    spec = STRATEGIES[strategy]
    for teacher in range(1, 25):
        for student in range(spec.min_student_layers, teacher + 1):
            pairs = layer_pairs(strategy, student, teacher, seed=teacher * 100 + student)
            assert pairs, (strategy, student, teacher)
            assert all(1 <= s <= student and 1 <= t <= teacher for s, t in pairs)
            assert [s for s, _ in pairs] == sorted({s for s, _ in pairs})
            if spec.distinct_teacher_layers:
                teachers = [t for _, t in pairs]
                assert len(teachers) == len(set(teachers)), (strategy, student, teacher)
                if not spec.control:
                    assert teachers == sorted(set(teachers))


def test_only_reverse_and_random_are_controls_and_neither_is_the_papers():
    assert {name for name, spec in STRATEGIES.items() if spec.control} == {"Reverse", "Random"}
    assert not any(STRATEGIES[name].in_paper for name in ("Reverse", "Random"))
    assert [name for name, spec in STRATEGIES.items() if spec.seeded] == ["Random"]


def test_minilm_names_registered_knowledge():
    from kdgrid.core.knowledge import KNOWLEDGE

    assert set(MINILM_KNOWLEDGE) <= set(KNOWLEDGE)


def test_all_to_one_works_for_a_student_deeper_than_its_teacher():
    assert layer_pairs("all_to_one", 4, 2) == [(1, 2), (2, 2), (3, 2), (4, 2)]
