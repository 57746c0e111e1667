"""The diagnosis rules on curves built here: each failure mode flagged with its evidence, healthy runs not.

The stall fixture reproduces a LAD / value_relation run on the polarity task as its rows recorded it: soft and
hard losses at ln 2 through both epochs, alignment terms tiny from the start, the gate's rows near uniform
(0.177 ... 0.154 against 1/6 = 0.167)."""

from __future__ import annotations

import math
import random
from typing import Any

from kdgrid.core.training.step_curves import new_record, rounded
from kdgrid.diagnosis import FLAGS, diagnose, flag_names, record_from_epochs

LN2 = math.log(2)
LAD_GATE = [
    [0.177, 0.172, 0.168, 0.165, 0.164, 0.154],
    [0.175, 0.170, 0.167, 0.166, 0.163, 0.159],
]


def record(series: dict[str, list[float]], *, weights: dict[str, float] | None = None, **extra: Any) -> dict:
    """A step-curve record of the given unweighted term series (a point every 2 steps)."""
    n = len(next(iter(series.values())))
    weights = weights or {}
    out = new_record(2, 2 * n, extra.pop("num_labels", 2))
    out["steps"] = [2 * (i + 1) for i in range(n)]
    out["terms"] = {name: [rounded(v) for v in values] for name, values in series.items()}
    out["weighted"] = {
        name: [rounded(weights.get(name, 1.0) * v) for v in values] for name, values in series.items()
    }
    out["total"] = [sum(out["weighted"][name][i] for name in series) for i in range(n)]
    out["lr"] = [1e-3] * n
    out["grad_norm"] = [1.0] * n
    out["cosine"] = extra.pop("cosine", [None] * n)
    out.update(extra)
    return out


def noisy(start: float, end: float, n: int, noise: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [(start + (end - start) * i / (n - 1)) * (1 + noise * rng.uniform(-1, 1)) for i in range(n)]


def healthy(n: int = 95, seed: int = 0) -> dict[str, list[float]]:
    return {
        "soft": noisy(0.69, 0.30, n, 0.1, seed),
        "hard": noisy(0.69, 0.33, n, 0.1, seed + 1),
        "hidden_mse@2-6": noisy(2.0, 0.8, n, 0.1, seed + 2),
    }


def test_the_lad_value_relation_stall_is_flagged_with_its_evidence() -> None:
    n = 95  # 189 steps, a point every 2
    curves = record({
        "soft": noisy(LN2, LN2, n, 0.01, 1),
        "hard": noisy(LN2, LN2, n, 0.01, 2),
        "value_relation@1-6": noisy(4e-3, 2e-3, n, 0.05, 3),
        "value_relation@2-6": noisy(3e-3, 1.5e-3, n, 0.05, 4),
    })  # fmt: skip
    flags = diagnose(curves, weights={"soft": 1.0, "hard": 0.1}, extra={"mapping": {"method": "LAD", "weights": LAD_GATE}})
    assert flag_names(flags) == ["stalled_student", "collapsed_mapping"]
    stalled, collapsed = flags
    assert "ln 2 = 0.6931" in stalled["evidence"] and "alignment" in stalled["evidence"]
    assert "1/6 = 0.167" in collapsed["evidence"] and "0.154 .. 0.177" in collapsed["evidence"]


def test_the_same_stall_is_flagged_from_an_older_rows_epoch_curve() -> None:
    curve = [
        {"epoch": e, "scores": {}, "loss_terms": {"soft": 0.6932, "hard": 0.6930, "value_relation@1-6": 0.003}}
        for e in (1, 2)
    ]
    old = record_from_epochs(curve, {"soft": 1.0, "hard": 0.1}, {"steps_per_epoch": 63})
    assert old["steps"] == [63, 126] and old["from_epochs"]
    flags = diagnose(old, num_labels=2, extra={"mapping": {"method": "LAD", "weights": LAD_GATE}})
    assert flag_names(flags) == ["stalled_student", "collapsed_mapping"]
    assert "epoch means" in flags[0]["evidence"]


def test_healthy_runs_raise_no_flag() -> None:
    for seed in range(20):
        assert diagnose(record(healthy(seed=seed)), weights={"hidden_mse@2-6": 0.05}) == [], seed
    learned_gate = [[0.05, 0.05, 0.1, 0.2, 0.3, 0.3], [0.4, 0.2, 0.1, 0.1, 0.1, 0.1]]
    assert diagnose(record(healthy()), extra={"mapping": {"method": "LAD", "weights": learned_gate}}) == []


def test_a_student_at_chance_that_is_still_learning_is_not_stalled() -> None:
    series = healthy()
    series["hard"] = noisy(LN2, 0.6, 95, 0.01, 5)  # leaves chance: 0.693 -> 0.6
    assert "stalled_student" not in flag_names(diagnose(record(series)))


def test_chance_is_ln_of_the_classes_and_regression_is_never_stalled() -> None:
    three = {"soft": [math.log(3)] * 10, "hard": [math.log(3)] * 10}
    assert flag_names(diagnose(record(three, num_labels=3))) == ["stalled_student"]
    assert diagnose(record(three, num_labels=2)) == []  # ln 3 is not chance for two classes
    assert diagnose(record({"soft": [0.5] * 10, "hard": [0.5] * 10}, num_labels=1)) == []


def test_projector_overfitting_alignment_to_zero_while_the_task_stalls() -> None:
    series = {"soft": noisy(0.6, 0.55, 60, 0.02, 1), "hard": noisy(0.6, 0.58, 60, 0.02, 2),
              "hidden_mse@4-12": [math.exp(-i / 5) for i in range(60)]}  # fmt: skip
    flags = diagnose(record(series))
    assert flag_names(flags) == ["projector_overfitting"]
    assert "alignment fell to" in flags[0]["evidence"]
    series["hard"] = noisy(0.6, 0.2, 60, 0.02, 2)  # the task is learned: alignment near 0 is then no failure
    assert diagnose(record(series)) == []
    # The per-epoch verdict a row stored is shown too.
    assert flag_names(diagnose(None, extra={"projector_overfit": "the projected alignment fell"})) == [
        "projector_overfitting"
    ]


def test_gradient_conflict_from_the_cosine_or_from_both_losses_oscillating() -> None:
    n = 40
    cosines = [-0.2, None, -0.1, 0.05, None] * 8
    flags = diagnose(record(healthy(n), cosine=cosines))
    assert flag_names(flags) == ["gradient_conflict"] and "24 samples (16 negative)" in flags[0]["evidence"]
    assert diagnose(record(healthy(n), cosine=[0.3, None] * 20)) == []
    assert diagnose(record(healthy(n), cosine=[-0.5, -0.5] + [None] * 38)) == []  # 2 samples: too few
    zigzag = [0.6 if i % 2 else 0.2 for i in range(n)]
    series = {"soft": zigzag, "hard": [1 - v for v in zigzag], "hidden_mse@1-1": zigzag}
    flags = diagnose(record(series, num_labels=5))
    assert flag_names(flags) == ["gradient_conflict"] and "both oscillate" in flags[0]["evidence"]


def test_divergence_recorded_or_a_rising_total() -> None:
    flags = diagnose({}, status="failed", extra={"diverged_at_step": 17, "diverged_term": "hidden_mse@1-3",
                                                  "diverged_pair": [1, 3]})  # fmt: skip
    assert flags == [{"flag": "divergence", "evidence": "hidden_mse@1-3 (pair 1-3) turned non-finite at step 17"}]
    rising = {"soft": noisy(0.5, 3.0, 40, 0.02, 1), "hard": noisy(0.5, 3.0, 40, 0.02, 2)}
    assert flag_names(diagnose(record(rising))) == ["divergence"]


def test_a_per_example_attention_average_near_uniform_is_not_a_collapsed_gate() -> None:
    uniform = [[1 / 6] * 6, [1 / 6] * 6]
    assert diagnose(None, extra={"mapping": {"method": "ALP-KD", "weights": uniform}}) == []
    assert flag_names(diagnose(None, extra={"mapping": {"method": "LAD", "weights": uniform}})) == [
        "collapsed_mapping"
    ]


def test_every_flag_is_documented() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "diagnosis.md").read_text()
    for name in FLAGS:
        assert f"`{name}`" in page, name
