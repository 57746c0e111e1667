"""curriculum (sweeps/methods.yaml): kdgrid's layer-wise curriculum against stage-wise distillation's stages."""

from __future__ import annotations

from kdgrid.core.matching import layer_pairs
from kdgrid.core.methods.layer_curriculum.spec import HEAD, Curriculum, parameter_layer
from tests.method_references.stagewise import CLASSIFIER, stages

TOTAL = 189  # the sweep's 3 epochs of 63 steps


def kdgrid_curriculum(boundaries: list[float]) -> Curriculum:
    """The sweep's curriculum cell: hidden states at Dilatation on a 2-layer student of a 6-layer teacher."""
    pairs = layer_pairs("Dilatation", 2, 6)
    return Curriculum.of(boundaries, [(f"hidden_mse@{s}-{t}", (s, t)) for s, t in pairs])


def test_the_layer_stages_train_the_blocks_the_paper_trains() -> None:
    curriculum = kdgrid_curriculum([1 / 3, 2 / 3])  # the paper's equal stages
    theirs = stages([1, 2], {1: {"hidden_mse@1-3"}, 2: {"hidden_mse@2-6"}}, TOTAL)
    for j, stage in enumerate(theirs[:-1]):
        assert curriculum.first_steps(TOTAL)[j] == stage.first_step
        assert curriculum.stage(stage.first_step, TOTAL) == j
        assert curriculum.trainable_layers(j) == stage.trainable
        assert curriculum.stage_terms(j) == stage.terms


def test_the_sweeps_boundaries_start_the_stages_where_its_recipe_says() -> None:
    curriculum = kdgrid_curriculum([0.2, 0.4])
    assert curriculum.first_steps(TOTAL) == [0, 38, 76]  # ceil(0.2 x 189), ceil(0.4 x 189)
    assert [curriculum.stage(k, TOTAL) for k in (37, 38, 75, 76, 188)] == [0, 1, 1, 2, 2]


def test_the_last_stage_trains_the_classifier_alone_on_the_labels() -> None:
    curriculum = kdgrid_curriculum([1 / 3, 2 / 3])
    last = stages([1, 2], {1: {"hidden_mse@1-3"}, 2: {"hidden_mse@2-6"}}, TOTAL)[-1]
    assert last.first_step == curriculum.first_steps(TOTAL)[-1]
    # kdgrid names the classifier stage's trainable part HEAD: the parameters outside the encoder and embeddings
    ours = {CLASSIFIER if layer is HEAD else layer for layer in curriculum.trainable_layers(curriculum.full_stage)}
    assert ours == last.trainable and curriculum.stage_terms(curriculum.full_stage) == last.terms
    assert parameter_layer("classifier.weight") is HEAD and parameter_layer("bert.pooler.dense.weight") is HEAD


def test_layer_curriculum_last_all_is_kdgrids_earlier_full_last_stage() -> None:
    pairs = layer_pairs("Dilatation", 2, 6)
    curriculum = Curriculum.of([0.2, 0.4], [(f"hidden_mse@{s}-{t}", (s, t)) for s, t in pairs], "all")
    assert curriculum.trainable_layers(curriculum.full_stage) is None  # every parameter
    assert curriculum.stage_terms(curriculum.full_stage) is None  # the trial's full objective


def test_each_later_stage_starts_a_fresh_optimizer_as_the_papers_stages_do() -> None:
    fresh = kdgrid_curriculum([1 / 3, 2 / 3])
    theirs = stages([1, 2], {1: {"hidden_mse@1-3"}, 2: {"hidden_mse@2-6"}}, TOTAL)
    restarts = [k for k in range(TOTAL) if fresh.restarts_optimizer(k, TOTAL)]
    assert restarts == [stage.first_step for stage in theirs[1:]]  # a new Adam at each later stage's start
    pairs = layer_pairs("Dilatation", 2, 6)
    shared = Curriculum.of([0.2, 0.4], [(f"hidden_mse@{s}-{t}", (s, t)) for s, t in pairs], "all", "shared")
    assert not any(shared.restarts_optimizer(k, TOTAL) for k in range(TOTAL))  # kdgrid's earlier form
