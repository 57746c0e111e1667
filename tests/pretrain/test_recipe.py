"""The pretrain recipe: canonical form, key stability, different recipes get different keys, refusals; the
artifact locations and their manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kdgrid.core.pretrained import artifacts
from kdgrid.core.pretrained.corpus_spec import parse_corpus
from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.errors import ConfigError


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path / "cache"))


def _recipe(**changes: object) -> PretrainRecipe:
    return PretrainRecipe(**{"student": "bert-tiny", "corpus": "generated", **changes})


def test_key_is_stable_and_pinned() -> None:
    recipe = _recipe(steps=10)
    assert recipe.key == _recipe(steps=10).key == PretrainRecipe.from_dict(recipe.to_dict()).key
    # The key of a fixed recipe never changes across versions of kdgrid unless RECIPE_VERSION is bumped.
    assert recipe.key == "9f24bba60073d15f"


def test_equal_configurations_are_equal_recipes() -> None:
    assert _recipe(student="w128-l2").key == _recipe(student="bert-tiny").key
    assert _recipe(student="bert-tiny").student == "w128-l2-h2-f512"
    gd = dict(teacher="minilm-l6")
    assert _recipe(**gd, knowledge=("vr", "query_relation", "key_relation")).key == _recipe(**gd).key
    assert _recipe(**gd, strategy="minilm").strategy == "MiniLM"
    # Plain pre-training ignores the distillation settings, and its masked-LM loss, its only term, has weight 1
    # (a recipe file of TinyBERT's general distillation, mlm_weight 0, also serves `init: pretrain`).
    assert _recipe(knowledge=("hidden_mse",), strategy="Last").key == _recipe().key
    assert _recipe(mlm_weight=0.0).key == _recipe().key and _recipe(mlm_weight=0.0).mlm_weight == 1.0
    assert _recipe(**gd, mlm_weight=0.0, knowledge=("hidden_mse",)).mlm_weight == 0.0


@pytest.mark.parametrize(
    "change",
    [
        {"steps": 11},
        {"global_batch": 32},
        {"block_length": 64},
        {"lr": 2e-4},
        {"seed": 1},
        {"student": "bert-mini"},
        {"corpus": "polarity"},
        {"teacher": "minilm-l6"},
        {"max_documents": 5},
        {"dropout": 0.0},
        {"mlm_probability": 0.2},
    ],
)
def test_different_recipes_get_different_keys(change: dict[str, object]) -> None:
    assert _recipe(**{"steps": 10, **change}).key != _recipe(steps=10).key


def test_distillation_settings_change_the_key() -> None:
    base = _recipe(teacher="minilm-l6")
    assert base.objective == "general_distillation"
    for change in (
        {"knowledge": ("hidden_mse",), "strategy": "Last-1"},
        {"strategy": "Last-1"},
        {"beta": 2.0},
        {"relation_heads": 4},
    ):
        assert _recipe(teacher="minilm-l6", **change).key != base.key


def test_local_corpus_is_keyed_by_its_content(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("one document.\n\nanother one.\n")
    first = _recipe(corpus=str(corpus)).key
    moved = tmp_path / "moved.txt"
    moved.write_text(corpus.read_text())
    assert parse_corpus(str(moved)).identity() == parse_corpus(str(corpus)).identity()
    corpus.write_text("changed.\n")
    assert PretrainRecipe(student="bert-tiny", corpus=str(corpus)).key != first


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"objective": "general_distillation"}, "needs a teacher"),
        ({"teacher": "minilm-l6", "objective": "pretrain"}, "has no teacher"),
        ({"objective": "finetune"}, "objective"),
        ({"corpus": ""}, "corpus is empty"),
        ({"corpus": "/no/such/corpus"}, "is not a file or folder"),
        ({"corpus": "hub:"}, "hub:NAME"),
        ({"steps": 0}, "steps"),
        ({"block_length": 1024}, "block_length"),
        ({"teacher": "minilm-l6", "knowledge": ("soft_label",)}, "logits"),
        ({"teacher": "minilm-l6", "strategy": None}, "strategy"),
        ({"teacher": "minilm-l6", "projection": "conv"}, "projection"),
        ({"student": "w100"}, "unknown student"),
        ({"student": "ssm-l2-h128-a2"}, "pre-training takes BERT students"),
    ],
)
def test_refusals(change: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _recipe(**change)


def test_empty_corpus_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"no \*\.txt file"):
        _recipe(corpus=str(tmp_path / "empty"))


def test_unknown_keys_are_refused() -> None:
    with pytest.raises(ConfigError, match="unknown pretrain recipe key"):
        PretrainRecipe.from_dict({"student": "bert-tiny", "epochs": 3})


def test_artifact_location_and_publish(tmp_path: Path) -> None:
    recipe = _recipe(teacher="minilm-l6", steps=3)
    assert artifacts.artifact_dir(recipe) == tmp_path / "cache" / "pretrained" / recipe.key
    assert not artifacts.exists(recipe)

    def fill(folder: Path) -> None:
        (folder / "config.json").write_text("{}")

    path = artifacts.publish(recipe, fill, steps_done=3, world_size=2)
    assert path == artifacts.artifact_dir(recipe) and artifacts.exists(recipe)
    info = artifacts.read_manifest(path)
    assert info is not None
    assert info["key"] == recipe.key and info["steps"] == 3 and info["finished"] and info["world_size"] == 2
    assert PretrainRecipe.from_dict(info["recipe"]) == recipe
    assert set(info["versions"]) == set(artifacts.VERSIONED_PACKAGES)
    assert json.loads((path / "general_distillation.json").read_text()) == info
    assert [p.name for p in path.parent.iterdir()] == [recipe.key]  # no staging folder left behind
    # Publishing again keeps the first checkpoint.
    artifacts.publish(recipe, lambda folder: (folder / "config.json").write_text("second"), steps_done=3)
    assert (path / "config.json").read_text() == "{}"


def test_a_checkpoint_of_another_recipe_is_refused(tmp_path: Path) -> None:
    mine, other = _recipe(steps=3), _recipe(steps=4)
    with pytest.raises(ConfigError, match=r"belongs to pretrain recipe .*Nothing was overwritten"):
        artifacts.check_same_recipe(artifacts.manifest(other, 1, finished=False), mine, tmp_path)
    artifacts.check_same_recipe(artifacts.manifest(mine, 1, finished=False), mine, tmp_path)


def test_recipes_and_artifacts_import_neither_torch_nor_datasets() -> None:
    """`kdgrid plan` asks whether checkpoints exist: that must not cost torch's start-up."""
    import subprocess
    import sys

    code = (
        "import sys, kdgrid.core.pretrained.artifacts, kdgrid.core.pretrained.recipe, kdgrid.commands.pretrain; "
        "print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
