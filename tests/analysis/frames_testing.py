"""A small store of one sweep for the tidy frames' and the explore pages' tests: knowledge x strategy over three
seeds (hand-chosen accuracies, a two-epoch curve each) and one failed trial."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tests.analysis.tables_testing import result, write

SWEEP = "my_grid"
# (knowledge, strategy) -> the three seeds' best-epoch accuracies
VALUES = {
    (("hidden_mse",), "Last-1"): (0.70, 0.72, 0.71),
    (("hidden_mse",), "LAD"): (0.75, 0.78, 0.76),
    (("hidden_mse", "cos"), "Last-1"): (0.69, 0.70, 0.74),
    (("hidden_mse", "cos"), "LAD"): (0.71, 0.70, 0.72),
}


def curve(score: float) -> list[dict]:
    return [
        {"epoch": 1, "scores": {"validation": {"accuracy": score - 0.1}}, "loss_terms": {"soft": 0.9}},
        {"epoch": 2, "scores": {"validation": {"accuracy": score}}, "loss_terms": {"soft": 0.5}},
    ]


def make_store(root: Path) -> Path:
    store = root / "results"
    made = []
    for (knowledge, strategy), values in VALUES.items():
        for seed, value in enumerate(values):
            made.append(dataclasses.replace(
                result(value, task="sst2", knowledge=knowledge, strategy=strategy, seed=seed,
                       options=(("soft_t2", True),)),
                curve=curve(value),
            ))  # fmt: skip
    made.append(result(0.0, task="sst2", knowledge=("gram",), strategy="LAD", status="failed"))
    write(store, "main", *made, sweep=SWEEP)
    return store
