"""Student-to-teacher projections: shapes, kinds, one per term, checkpoint round trip, bad input."""

from __future__ import annotations

import io

import pytest
import torch

from kdgrid.core.losses import hidden_mse
from kdgrid.core.model.projection import PROJECTION_KINDS, Projection
from kdgrid.core.model.shapes import StudentShape
from kdgrid.core.training.objective import Objective, knowledge_terms
from kdgrid.errors import ConfigError
from kdgrid.trial import Trial

torch.set_num_threads(1)


@pytest.mark.parametrize("kind", PROJECTION_KINDS)
def test_projection_maps_student_width_to_teacher_width(kind):
    projection = Projection(128, 768, kind=kind)
    assert projection(torch.randn(2, 5, 128)).shape == (2, 5, 768)
    assert projection(torch.randn(3, 128)).shape == (3, 768)


def test_linear_projection_is_one_affine_map_initialised_like_bert():
    torch.manual_seed(0)
    projection = Projection(256, 768)
    linear = projection.net
    assert isinstance(linear, torch.nn.Linear)
    assert torch.all(linear.bias == 0)
    assert linear.weight.std().item() == pytest.approx(0.02, rel=0.05)
    x = torch.randn(4, 256)
    torch.testing.assert_close(projection(x), x @ linear.weight.T + linear.bias)


def test_mlp_projection_has_a_hidden_layer():
    projection = Projection(8, 12, kind="mlp", hidden_width=32)
    linears = [m for m in projection.modules() if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(8, 32), (32, 12)]
    assert "8 -> 12, kind=mlp" in repr(projection)


def test_bad_kind_and_bad_input_width_are_config_errors():
    with pytest.raises(ConfigError, match="unknown projection kind 'conv'; valid kinds: linear, mlp"):
        Projection(8, 12, kind="conv")
    with pytest.raises(ConfigError, match="teacher_width must be a positive integer"):
        Projection(8, 0)
    with pytest.raises(ConfigError, match=r"width 8 \(to 12\), got shape \[2, 5, 9\]"):
        Projection(8, 12)(torch.randn(2, 5, 9))


def objective_of(
    knowledge: tuple[str, ...], pairs: list[tuple[int, int]], width_s: int, width_t: int, kind: str = "linear"
) -> Objective:
    """The objective (owner of the projections) of a trial with ``knowledge`` on ``pairs``."""
    student = StudentShape(layers=max(s for s, _ in pairs), width=width_s, heads=2, ffn=4 * width_s)
    teacher = StudentShape(layers=max(t for _, t in pairs), width=width_t, heads=2, ffn=4 * width_t)
    trial = Trial("sst2", "bert-base", student.name, knowledge=knowledge, strategy="First", projection=kind)
    terms = knowledge_terms(trial, pairs, student, teacher)
    return Objective(trial, terms, student, teacher, regression=False)


def test_one_projection_per_projected_term():
    pairs = [(1, 6), (2, 12)]
    knowledge = ("hidden_mse", "attention_ce_mean", "value_relation", "embedding_mse", "contrastive")
    projections = objective_of(knowledge, pairs, 128, 768).projections
    assert sorted(projections) == [
        "contrastive",
        "embedding_mse_at_0_0",
        "hidden_mse_at_1_6",
        "hidden_mse_at_2_12",
    ]
    assert all(p.student_width == 128 and p.teacher_width == 768 for p in projections.values())
    # Distinct modules: each term learns its own map.
    assert projections["hidden_mse_at_1_6"] is not projections["hidden_mse_at_2_12"]


def test_equal_widths_need_no_projection():
    assert len(objective_of(("hidden_mse",), [(1, 1)], 384, 384).projections) == 0


def test_projections_round_trip_through_a_checkpoint():
    pairs = [(1, 3), (2, 6)]
    torch.manual_seed(1)
    saved = objective_of(("hidden_mse", "pkd"), pairs, 16, 24, kind="mlp").projections
    buffer = io.BytesIO()
    torch.save(saved.state_dict(), buffer)
    buffer.seek(0)
    torch.manual_seed(2)
    restored = objective_of(("hidden_mse", "pkd"), pairs, 16, 24, kind="mlp").projections
    restored.load_state_dict(torch.load(buffer))
    x = torch.randn(2, 5, 16)
    assert sorted(saved) == ["hidden_mse_at_1_3", "hidden_mse_at_2_6", "pkd_at_1_3", "pkd_at_2_6"]
    for key in saved:
        torch.testing.assert_close(restored[key](x), saved[key](x))


def test_projection_learns_to_close_the_gap():
    """A few optimizer steps on hidden_mse lower the loss: the projection is trainable with the student."""
    torch.manual_seed(3)
    student, teacher = torch.randn(4, 6, 8), torch.randn(4, 6, 12)
    mask = torch.ones(4, 6)
    projection = Projection(8, 12)
    optimizer = torch.optim.Adam(projection.parameters(), lr=0.05)
    first = hidden_mse(projection(student), teacher, mask).item()
    for _ in range(50):
        optimizer.zero_grad()
        hidden_mse(projection(student), teacher, mask).backward()
        optimizer.step()
    assert hidden_mse(projection(student), teacher, mask).item() < 0.9 * first
