"""The fixture is the Hub as it is, and kdgrid's real loading code reads each real shape: minimal 2020 textattack
configs (no label keys on the binary teachers, no ``problem_type`` on STS-B), compact BERTs read from
``model.safetensors``, BERT-large teachers with ``tokenizer.json``, a legacy (non-zip) ``pytorch_model.bin``, and
a teacher as weak as the weakest real one, which the gate still accepts."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from kdgrid.core.model.models import load_checkpoint, load_teacher, load_tokenizer
from kdgrid.core.model.shapes import fetch_config, resolve_teacher
from kdgrid.core.teacher.gate import judge_classifier
from kdgrid.core.teacher.label_order import LabelOrder
from tests.hub.hub_cache import (
    LEGACY_BIN_REPO,
    SEED,
    WEAK_TEACHER_Z,
    build_model,
    dev_split,
    paper_models,
    teacher_examples,
    train_teacher,
    vocabulary_file,
    weaken_teacher,
    write_model,
)
from tests.hub.teacher_training import predict

Switch = Callable[[Path], dict[str, str]]
MODELS = {model.repo_id: model for model in paper_models()}


def _snapshot(root: Path, repo_id: str) -> Path:
    (snapshot,) = (root / "hub" / f"models--{repo_id.replace('/', '--')}" / "snapshots").iterdir()
    return snapshot


def _write(root: Path, repo_id: str) -> Path:
    index = list(MODELS).index(repo_id)
    write_model(root / "hub", MODELS[repo_id], SEED + index, train=False)
    return _snapshot(root, repo_id)


def test_binary_textattack_configs_carry_no_label_keys_and_load_with_two_labels(
    tmp_path: Path, use_hub: Switch
) -> None:
    snapshot = _write(tmp_path, "textattack/bert-base-uncased-SST-2")
    config = json.loads((snapshot / "config.json").read_text())
    assert not {"id2label", "label2id", "num_labels", "problem_type"} & set(config)
    assert config["architectures"] == ["BertForSequenceClassification"]
    use_hub(tmp_path)
    teacher = resolve_teacher("bert-base", "sst2")
    assert fetch_config(teacher.source, what="teacher").num_labels == 2
    assert load_teacher(teacher, 2).config.num_labels == 2


def test_the_sts_b_config_has_no_problem_type_and_loads_as_a_regression_head(
    tmp_path: Path, use_hub: Switch
) -> None:
    snapshot = _write(tmp_path, "textattack/bert-base-uncased-STS-B")
    config = json.loads((snapshot / "config.json").read_text())
    assert "problem_type" not in config and config["id2label"] == {"0": "LABEL_0"}
    use_hub(tmp_path)
    model = load_teacher(resolve_teacher("bert-base", "stsb"), 1)
    assert model.config.num_labels == 1 and model.classifier.out_features == 1


def test_compact_berts_are_read_from_model_safetensors(tmp_path: Path, use_hub: Switch) -> None:
    repo = "google/bert_uncased_L-2_H-128_A-2"
    snapshot = _write(tmp_path, repo)
    assert {"model.safetensors", "pytorch_model.bin"} <= {p.name for p in snapshot.iterdir()}
    (snapshot / "pytorch_model.bin").unlink()  # only the safetensors file is left to read
    use_hub(tmp_path)
    loaded = load_checkpoint(repo, 2, what="init 'pretrain'", fresh_head=True, ignore_mismatched_sizes=True)
    reference = build_model(MODELS[repo], SEED + list(MODELS).index(repo))
    torch.testing.assert_close(
        loaded.model.bert.encoder.layer[1].output.dense.weight,
        reference.bert.encoder.layer[1].output.dense.weight,
    )
    assert loaded.fresh_keys == ("classifier.bias", "classifier.weight")


def test_bert_large_teachers_ship_tokenizer_json_and_kdgrid_tokenizes_with_it(
    tmp_path: Path, use_hub: Switch
) -> None:
    snapshot = _write(tmp_path, "yoshitomo-matsubara/bert-large-uncased-rte")
    assert (snapshot / "tokenizer.json").is_file()
    use_hub(tmp_path)
    tokenizer = load_tokenizer(resolve_teacher("bert-large", "rte"))
    assert tokenizer.is_fast and len(tokenizer) == 30522
    assert tokenizer("Hello world", "Again")["input_ids"] == [101, 7592, 2088, 102, 2153, 102]


def test_a_legacy_non_zip_bin_loads(tmp_path: Path, use_hub: Switch) -> None:
    snapshot = _write(tmp_path, LEGACY_BIN_REPO)
    weights = snapshot / "pytorch_model.bin"
    assert not zipfile.is_zipfile(weights) and not (snapshot / "model.safetensors").exists()
    use_hub(tmp_path)
    model = load_teacher(resolve_teacher("bert-base", "cola"), 2)
    reference = build_model(MODELS[LEGACY_BIN_REPO], SEED + list(MODELS).index(LEGACY_BIN_REPO))
    torch.testing.assert_close(model.classifier.weight, reference.classifier.weight)


def test_the_weak_rte_teacher_sits_near_the_gates_margin_and_passes() -> None:
    """As far above the majority class as the weakest real teacher (RTE, about 4.4 standard errors): above the
    gate's 3, and far below the other fixture teachers."""
    spec = MODELS["textattack/bert-base-uncased-RTE"]
    assert spec.weaker == WEAK_TEACHER_Z and spec.task == "rte"
    model = build_model(spec, SEED + list(MODELS).index(spec.repo_id))
    train_teacher(model, spec, SEED)
    accuracy = weaken_teacher(model, spec, SEED)
    texts, targets = teacher_examples(spec, dev_split("rte"), SEED)
    logits = predict(model, vocabulary_file(), texts).double().numpy()
    labels = np.asarray(targets, dtype=np.int64)
    report, reason = judge_classifier(logits, labels, LabelOrder((0, 1), "identity"))
    assert reason is None and report["score"] == pytest.approx(accuracy)
    n, majority = len(labels), report["majority"]
    z = (report["score"] - majority) / (majority * (1 - majority) / n) ** 0.5
    assert 3.5 < z < 5.5 and report["score"] < 0.85
