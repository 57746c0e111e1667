"""lad, lad_fast and alp_kd (sweeps/methods.yaml): kdgrid's learned mappings against LAD's gate blocks and
ALP-KD's [CLS] attention."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kdgrid.core.matching import layer_pairs
from kdgrid.core.model.capture import Features
from kdgrid.core.model.shapes import StudentShape
from kdgrid.core.training.objective import Objective, knowledge_terms
from kdgrid.trial import Trial
from tests.method_references._numpy import draw, softmax
from tests.method_references.layer_mappings import HighwayChain, alp_attention, alp_loss, lad_losses

STUDENT = StudentShape(2, 8, 2, 16)
TEACHER = StudentShape(4, 8, 2, 16)
HIDDEN_S = [draw((3, 5, 8), s) for s in range(3)]
HIDDEN_T = [draw((3, 5, 8), 10 + s, 0.5) for s in range(5)]


def features(hidden: list[np.ndarray]) -> Features:
    batch, length = hidden[0].shape[:2]
    return Features(
        logits=torch.zeros(batch, 2),
        mask=torch.ones(batch, length, dtype=torch.long),
        heads=2,
        hidden=[torch.tensor(h, dtype=torch.float32) for h in hidden],
    )


def mapped_values(strategy: str, **options: object) -> tuple[Objective, dict[str, torch.Tensor]]:
    """The sweep's cell (hidden states, the learnable strategy; equal widths, so no projection) on one batch."""
    trial = Trial(task="synthetic-single-binary", teacher="t", student=STUDENT.name, knowledge=("hidden_mse",),
                  strategy=strategy, beta=1.0, options=options)  # fmt: skip
    terms = knowledge_terms(trial, layer_pairs(strategy, 2, 4), STUDENT, TEACHER)
    objective = Objective(trial, terms, STUDENT, TEACHER, regression=False)
    return objective, objective.knowledge_values(features(HIDDEN_S), features(HIDDEN_T))


def torch_layers(hidden: list[np.ndarray]) -> list[torch.Tensor]:
    return [torch.tensor(h, dtype=torch.float32) for h in hidden[1:]]


def test_the_highway_chain_passes_its_first_layer_and_normalises_the_rest() -> None:
    chain = HighwayChain(4, 5, 8, seed=0)
    aggregated = chain(torch_layers(HIDDEN_T))
    torch.testing.assert_close(aggregated[0], torch_layers(HIDDEN_T)[0])
    for a in aggregated[1:]:  # LayerNorm over [L, d] per example, at its initial affine (1, 0)
        assert torch.allclose(a.mean(dim=(1, 2)), torch.zeros(3), atol=1e-5)


def test_lad_form_softmax_is_kdgrids_earlier_softmax_gate_over_every_teacher_layer() -> None:
    objective, values = mapped_values("LAD", lad_form="softmax")
    gate = np.array([[0.3, -1.0, 2.0, 0.1], [0.0, 1.0, -0.5, 0.4]])
    with torch.no_grad():
        objective.mapping.gate.copy_(torch.tensor(gate))
    values = objective.knowledge_values(features(HIDDEN_S), features(HIDDEN_T))
    for (student_layer, nominal), weights in zip(layer_pairs("LAD", 2, 4), softmax(gate), strict=True):
        target = sum(weights[t - 1] * HIDDEN_T[t] for t in range(1, 5))
        expected = float(((HIDDEN_S[student_layer] - target) ** 2).mean())
        assert values[f"hidden_mse@{student_layer}-{nominal}"].item() == pytest.approx(expected, rel=1e-5)


def test_lad_targets_the_gate_blocks_aggregate() -> None:
    objective, _ = mapped_values("LAD")
    assert objective.formulation() == {"lad_form": "gates"}
    chain = HighwayChain(4, 5, 8, seed=0)
    with torch.no_grad():  # the same parameters in both: kdgrid's block t - 1 is the chain's layer t
        for t, gate in enumerate(objective.mapping.gates, start=1):
            chain.weights[t].copy_(gate.weight)
            chain.biases[t].copy_(gate.bias)
            chain.scales[t].copy_(objective.mapping.norm_weight[t - 1, :5] + 0.1 * t)  # not the initial affine
            chain.shifts[t].copy_(objective.mapping.norm_bias[t - 1, :5] - 0.2 * t)
            objective.mapping.norm_weight[t - 1] += 0.1 * t
            objective.mapping.norm_bias[t - 1] -= 0.2 * t
    values = objective.knowledge_values(features(HIDDEN_S), features(HIDDEN_T))
    expected = lad_losses(torch_layers(HIDDEN_S), torch_layers(HIDDEN_T), chain)
    for (student_layer, nominal), loss in zip(layer_pairs("LAD", 2, 4), expected, strict=True):
        assert values[f"hidden_mse@{student_layer}-{nominal}"].item() == pytest.approx(loss.item(), rel=1e-5)
    assert objective.mapping.summary()["targets"] == [2, 4]  # k i, k = L_T / L_S = 2


def test_alp_kds_attention_is_the_papers_cls_attention() -> None:
    objective, _ = mapped_values("ALP-KD")
    for student_layer in (1, 2):
        student = torch.tensor(HIDDEN_S[student_layer], dtype=torch.float32)
        ours = objective.mapping.attention(student, torch_layers(HIDDEN_T))
        theirs = alp_attention(student[:, 0], [h[:, 0] for h in torch_layers(HIDDEN_T)])
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


def test_alp_kd_tokens_all_is_kdgrids_earlier_attended_sum_over_every_token() -> None:
    objective, values = mapped_values("ALP-KD", alp_kd_tokens="all")
    assert objective.formulation() == {"alp_kd_tokens": "all"}
    for student_layer, nominal in layer_pairs("ALP-KD", 2, 4):
        student = torch.tensor(HIDDEN_S[student_layer], dtype=torch.float32)
        weights = alp_attention(student[:, 0], [h[:, 0] for h in torch_layers(HIDDEN_T)])
        target = torch.einsum("bt,btld->bld", weights, torch.stack(torch_layers(HIDDEN_T), dim=1))
        expected = ((student - target) ** 2).mean().item()
        assert values[f"hidden_mse@{student_layer}-{nominal}"].item() == pytest.approx(expected, rel=1e-5)


def test_alp_kds_loss_compares_the_cls_vectors() -> None:
    _, values = mapped_values("ALP-KD")
    for student_layer, nominal in layer_pairs("ALP-KD", 2, 4):
        student = torch.tensor(HIDDEN_S[student_layer], dtype=torch.float32)
        expected = alp_loss(student[:, 0], [h[:, 0] for h in torch_layers(HIDDEN_T)]).item()
        assert values[f"hidden_mse@{student_layer}-{nominal}"].item() == pytest.approx(expected, rel=1e-5)
