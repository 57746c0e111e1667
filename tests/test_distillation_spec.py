"""One distillation spec (`kdgrid.trial.Distillation`) for a trial and a pre-training recipe, serialised flat:
reading it from either changes no id or key, and a recipe's terms become the trial its objective reads."""

from __future__ import annotations

import dataclasses
import json

from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.pretrain.loss import distillation_trial
from kdgrid.trial import DISTILLATION_FIELDS, Distillation, Trial


def test_the_spec_is_the_same_six_fields_of_a_trial_and_of_a_recipe() -> None:
    trial_fields = {f.name for f in dataclasses.fields(Trial)}
    recipe_fields = {f.name for f in dataclasses.fields(PretrainRecipe)}
    assert set(DISTILLATION_FIELDS) == {f.name for f in dataclasses.fields(Distillation)}
    assert set(DISTILLATION_FIELDS) <= trial_fields & recipe_fields


def test_it_is_serialised_flat_so_ids_do_not_change() -> None:
    trial = Trial("polarity", "minilm-l6", "bert-tiny", knowledge=("cos",), strategy="First", beta=2.0,
                  relation_heads=2, options={"soft_t2": True})  # fmt: skip
    spec = trial.distillation
    assert spec == Distillation(("cos",), "First", 2.0, "linear", 2, (("soft_t2", True),))
    rebuilt = Trial.with_distillation(spec, task="polarity", teacher="minilm-l6", student="bert-tiny")
    assert rebuilt == trial and rebuilt.trial_id == trial.trial_id
    flat = json.loads(trial.canonical_json())
    assert {name: flat[name] for name in DISTILLATION_FIELDS} == {
        "knowledge": ["cos"], "strategy": "First", "beta": 2.0, "projection": "linear", "relation_heads": 2,
        "options": {"soft_t2": True},
    }  # fmt: skip
    assert "distillation" not in flat


def test_a_recipes_terms_become_its_objectives_trial_field_for_field() -> None:
    recipe = PretrainRecipe(student="bert-tiny", teacher="minilm-l6", corpus="generated", beta=0.5,
                            projection="mlp", options={"kd.scale": "mean"})  # fmt: skip
    trial = distillation_trial(recipe, heads=2)
    assert trial.distillation == dataclasses.replace(recipe.distillation, relation_heads=2)
    assert (trial.soft_weight, trial.alpha, trial.init, trial.seed) == (0.0, 0.0, "random", recipe.seed)
    assert distillation_trial(recipe).relation_heads == recipe.relation_heads is None
    assert json.loads(recipe.canonical_json())["beta"] == 0.5 and "distillation" not in recipe.to_dict()


def test_a_trial_and_a_recipe_canonicalise_options_and_serialise_alike() -> None:
    # One canonical form (`canonical_options`, `json_fields`, `versioned_json`): options written as a mapping or as
    # pairs in any order give the same value and id, and the JSON both hash is the same shape.
    pairs = (("temperature_schedule", "cosine"), ("soft_t2", True))
    for make in (
        lambda options: Trial("polarity", "minilm-l6", "bert-tiny", knowledge=("cos",), strategy="First",
                              options=options),
        lambda options: PretrainRecipe("bert-tiny", teacher="minilm-l6", knowledge=("cos",), strategy="First",
                                       options=options),
    ):  # fmt: skip
        as_pairs, as_mapping = make(pairs), make(dict(reversed(pairs)))
        assert as_pairs == as_mapping and as_pairs.canonical_json() == as_mapping.canonical_json()
        assert as_pairs.options == (("soft_t2", True), ("temperature_schedule", "cosine"))
        text = as_pairs.canonical_json()
        assert text == json.dumps(
            json.loads(text), sort_keys=True, separators=(",", ":")
        )  # sorted, no spaces
        data = json.loads(text)
        assert data["options"] == {"soft_t2": True, "temperature_schedule": "cosine"} and data[
            "knowledge"
        ] == ["cos"]
        assert {k: v for k, v in data.items() if k != "v"} == as_pairs.to_dict()
