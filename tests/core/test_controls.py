"""The negative-control strategies: Reverse (Dilatation read backwards) and Random (an injective map drawn from
the trial's seed), and the pairs a trial's plan records for them."""

from __future__ import annotations

from collections import Counter

import pytest

from kdgrid.core.matching import STRATEGIES, layer_pairs
from kdgrid.core.teacher.options import NOT_MEANT_TO_BE_ACCURATE
from kdgrid.errors import ConfigError
from kdgrid.paper import PAPER_STRATEGIES
from kdgrid.trial import Trial
from tests.teachers import SMALL_TEACHER_SHAPE


@pytest.mark.parametrize(
    ("depths", "expected"),
    [
        ((4, 12), [(1, 12), (2, 9), (3, 6), (4, 3)]),
        ((2, 12), [(1, 12), (2, 6)]),
        ((6, 6), [(1, 6), (2, 5), (3, 4), (4, 3), (5, 2), (6, 1)]),
    ],
)
def test_reverse_reads_dilatations_teacher_layers_backwards(depths, expected):
    assert layer_pairs("Reverse", *depths) == expected
    dilatation = dict(layer_pairs("Dilatation", *depths))
    student_layers = depths[0]
    assert expected == [(i, dilatation[student_layers + 1 - i]) for i in range(1, student_layers + 1)]


def test_the_controls_are_not_paper_strategies():
    for name in ("Reverse", "Random"):
        assert not STRATEGIES[name].in_paper and STRATEGIES[name].control and name not in PAPER_STRATEGIES


# Drawn once and pinned: the draw is SHA-256 based, so a change here is a change of every Random trial's pairs.
PINNED = {
    (4, 12, 0): [(1, 7), (2, 6), (3, 10), (4, 2)],
    (4, 12, 1): [(1, 3), (2, 9), (3, 12), (4, 6)],
    (2, 12, 0): [(1, 7), (2, 6)],  # a shallower student takes a prefix of the same seed's order
    (6, 6, 0): [(1, 4), (2, 1), (3, 6), (4, 3), (5, 5), (6, 2)],
}


@pytest.mark.parametrize("key", sorted(PINNED))
def test_random_is_the_same_draw_on_every_machine(key):
    student, teacher, seed = key
    assert layer_pairs("Random", student, teacher, seed=seed) == PINNED[key]
    assert layer_pairs("random", student, teacher, seed=seed) == PINNED[key]  # deterministic, any spelling


def test_random_is_an_injective_map_into_the_teachers_layers():
    for seed in range(-3, 40):
        for teacher in (1, 2, 3, 6, 12, 24):
            for student in range(1, teacher + 1):
                pairs = layer_pairs("Random", student, teacher, seed=seed)
                assert [s for s, _ in pairs] == list(range(1, student + 1))
                teachers = [t for _, t in pairs]
                assert len(set(teachers)) == student and all(1 <= t <= teacher for t in teachers)
                if student == teacher:
                    assert sorted(teachers) == list(range(1, teacher + 1))  # a permutation


def test_another_seed_draws_another_map():
    # 11,880 injective maps of 4 layers into 12: fifty seeds collide rarely (about 0.1 pairs expected).
    draws = [tuple(layer_pairs("Random", 4, 12, seed=seed)) for seed in range(50)]
    assert PINNED[(4, 12, 0)] != PINNED[(4, 12, 1)]
    assert len(set(draws)) >= 48
    # Not sorted on purpose: about 1 draw in 24 happens to keep the teacher layers in order.
    increasing = sum(list(d) == sorted(d, key=lambda pair: pair[1]) for d in draws)
    assert 0 <= increasing < 10


def test_random_teacher_layers_are_uniform_over_seeds():
    counts = Counter(layer_pairs("Random", 1, 12, seed=seed)[0][1] for seed in range(2400))
    assert set(counts) == set(range(1, 13))
    assert all(140 <= n <= 260 for n in counts.values()), counts  # 200 expected, sd about 13.8


@pytest.mark.parametrize("seed", [None, True, 1.0, "0"])
def test_random_without_an_integer_seed_is_refused(seed):
    with pytest.raises(ConfigError, match="'Random' draws its pairs from the trial's seed"):
        layer_pairs("Random", 4, 12, seed=seed)


def _trial(teacher: str, strategy: str, seed: int) -> Trial:
    return Trial(
        task="synthetic-single-binary-n96-d32",
        teacher=teacher,
        student="w32-l2-h2-f64",
        init="random",
        knowledge=("hidden_mse",),
        strategy=strategy,
        seed=seed,
        options=dict(NOT_MEANT_TO_BE_ACCURATE),
    )


def test_a_trials_plan_records_the_controls_pairs(teacher: str) -> None:
    from kdgrid.core.training.trial_setup import set_up_trial

    student, teacher_layers = 2, SMALL_TEACHER_SHAPE.layers
    reverse = set_up_trial(_trial(teacher, "Reverse", 3))
    assert reverse.pairs == reverse.used_pairs == [(1, 3), (2, 1)]
    plans = {seed: set_up_trial(_trial(teacher, "Random", seed)) for seed in (0, 1, 2, 3)}
    for seed, plan in plans.items():
        drawn = layer_pairs("Random", student, teacher_layers, seed=seed)
        assert plan.pairs == plan.used_pairs == drawn  # used_pairs is what the row's layer_pairs records
        assert {term.pair for term in plan.terms} == set(drawn)
    assert len({tuple(plan.pairs) for plan in plans.values()}) > 1  # the seed, not the strategy, picks them
