"""The row says which formulation of each paper method it measured (``extra.formulation``), since an option left
at its default is not written into the trial and its id cannot say."""

from __future__ import annotations

import pytest

from kdgrid.core.matching import layer_pairs
from kdgrid.core.model.shapes import StudentShape
from kdgrid.core.training.objective import Objective, knowledge_terms
from kdgrid.trial import Trial

SHAPE = StudentShape(2, 8, 2, 16)


def formulation(**fields: object) -> dict[str, str]:
    trial = Trial(task="synthetic-single-binary", teacher="t", student=SHAPE.name, **fields)  # type: ignore[arg-type]
    pairs = layer_pairs(trial.strategy, 2, 2) if trial.strategy else []
    objective = Objective(trial, knowledge_terms(trial, pairs, SHAPE, SHAPE), SHAPE, SHAPE, regression=False)
    parts = objective.learned_parts()
    assert parts.get("formulation", {}) == objective.formulation()  # what the row's extra gets
    return objective.formulation()


@pytest.mark.parametrize(
    ("fields", "recorded"),
    [
        ({"knowledge": ()}, {}),
        ({"knowledge": (), "options": {"dual_head": True}}, {"dual_head_loss": "binary_kl_norm"}),
        ({"knowledge": (), "options": {"dual_head": True, "dual_head_loss": "softmax"}}, {"dual_head_loss": "softmax"}),
        ({"knowledge": (), "options": {"example_weight": "adakd"}}, {"example_weight": "adakd (trade-off)"}),
        ({"knowledge": (), "options": {"example_weight": "adakd_batchnorm"}}, {}),
        ({"knowledge": (), "temperature": 2.0, "options": {"temperature_learner": "ctkd"}}, {"ctkd_form": "paper"}),
        ({"knowledge": ("hidden_mse",), "strategy": "LAD"}, {"lad_form": "gates"}),
        ({"knowledge": ("hidden_mse",), "strategy": "ALP-KD"}, {"alp_kd_tokens": "cls"}),
        ({"knowledge": ("hidden_mse",), "strategy": "Last", "options": {"optimizer": "dot"}}, {"dot_form": "paper"}),
        ({"knowledge": ("hidden_mse",), "strategy": "Last", "options": {"optimizer": "dot_adam"}},
         {"optimizer": "dot_adam (kdgrid's Adam form of DOT, not the paper's)"}),
        ({"knowledge": ("hidden_mse",), "strategy": "Dilatation", "options": {"layer_curriculum": [0.2, 0.4]}},
         {"layer_curriculum_last": "classifier", "layer_curriculum_optimizer": "fresh"}),
    ],
)
def test_each_paper_methods_formulation_is_recorded(fields: dict, recorded: dict) -> None:
    assert formulation(**fields) == recorded
