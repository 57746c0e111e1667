"""Loading teachers and checkpoints: float32 whatever was saved, the config read before any weight (label count,
regression or classification, the real shape), and one message for a Hub model that cannot be had."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import BertForSequenceClassification

from kdgrid.core.data import get_task
from kdgrid.core.model import models, shapes
from kdgrid.core.model.models import bert_config, check_torch_version, load_pretrained_bert, load_teacher
from kdgrid.core.model.shapes import (
    TEACHERS,
    ResolvedTeacher,
    StudentShape,
    cached_config,
    fetch_config,
    local_config,
    parse_model_config,
    resolve_teacher,
)
from kdgrid.core.training.trial_setup import validate_trials
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.trial import Trial
from tests.hub import conftest as hub_conftest
from tests.hub.hub_cache import HubModel, build_model, saved_files, vocabulary_files, write_repo
from tests.teachers import TINY_TEACHER_SHAPE, save_random_teacher

use_hub = hub_conftest.use_hub  # the Hub-shaped cache's offline switch (a fixture), shared with tests/hub
Switch = Callable[[Path], dict[str, str]]

MRPC_TEACHER = TEACHERS["bert-base"]["mrpc"].hub_name
NARROW = {"layers": 12, "width": 48, "heads": 12, "ffn": 192}  # the declared depth and heads, a tiny width


def _hub_teacher(root: Path, repo_id: str, num_labels: int, **config: object) -> None:
    spec = HubModel(repo_id, **NARROW, num_labels=num_labels, config_extra=dict(config))
    files = {**saved_files(build_model(spec, seed=0), ()), **vocabulary_files(True)}
    write_repo(root / "hub", repo_id, files)


def _no_weights_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("weights were loaded before the config was checked")

    monkeypatch.setattr(BertForSequenceClassification, "from_pretrained", refuse)


# ------------------------------------------------------------------------------------------- reading a config


def test_a_config_is_read_as_bert_with_or_without_model_type() -> None:
    turc = parse_model_config({"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
                               "intermediate_size": 512}, "google/x")  # fmt: skip
    assert turc.shape == StudentShape(2, 128, 2, 512) and turc.num_labels == 2 and not turc.is_regression
    defaults = parse_model_config({"model_type": "bert"}, "x")
    assert defaults.shape == StudentShape(12, 768, 12, 3072)  # BertConfig's defaults
    three = parse_model_config({"id2label": {"0": "a", "1": "b", "2": "c"}, "num_labels": 7}, "x")
    assert three.num_labels == 3  # id2label wins, as in transformers
    assert parse_model_config({"num_labels": 1}, "x").is_regression
    assert parse_model_config(
        {"id2label": {"0": "a", "1": "b"}, "problem_type": "regression"}, "x"
    ).is_regression
    with pytest.raises(ConfigError, match=r"'roberta' model; kdgrid loads BERT models only"):
        parse_model_config({"model_type": "roberta"}, "x")


def test_a_directory_without_config_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"has no config.json"):
        local_config(tmp_path)


def test_torch_below_2_6_is_one_message() -> None:
    with pytest.raises(KdgridError, match=r"needs torch >= 2.6, found 2.5.1.*pytorch_model.bin"):
        check_torch_version("2.5.1")
    for version in ("2.6.0", "2.13.0+cpu", "3.0.0"):
        check_torch_version(version)
    check_torch_version()  # the installed one


# ------------------------------------------------------------------------------------------------------ dtype


def test_a_bf16_directory_loads_as_float32(tmp_path: Path) -> None:
    model = BertForSequenceClassification(bert_config(TINY_TEACHER_SHAPE, 2, vocab_size=100)).to(
        torch.bfloat16
    )
    model.save_pretrained(tmp_path / "bf16")
    loaded = load_pretrained_bert(str(tmp_path / "bf16"), 2, what="init 'pretrain'")
    assert {p.dtype for p in loaded.parameters()} == {torch.float32}
    assert torch.equal(loaded.classifier.weight, model.classifier.weight.float())


# ---------------------------------------------------------------------------------------- the teacher's head


def test_a_local_teacher_with_the_wrong_label_count_is_refused_before_loading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = save_random_teacher(tmp_path / "two", TINY_TEACHER_SHAPE, num_labels=2)
    teacher = resolve_teacher(source, "mnli")
    _no_weights_loaded(monkeypatch)
    with pytest.raises(ConfigError) as error:
        load_teacher(teacher, get_task("mnli").num_labels)
    message = str(error.value)
    assert f"teacher {source} has 2 outputs (classification" in message
    assert "task mnli needs 3 (classification)" in message


@pytest.mark.parametrize(
    ("num_labels", "problem_type", "task", "found", "needed"),
    [
        (1, "single_label_classification", "stsb", "1 outputs (classification", "needs 1 (regression)"),
        (2, "regression", "mrpc", "2 outputs (regression", "needs 2 (classification)"),
        (1, None, "cola", "1 outputs (regression", "needs 2 (classification)"),
    ],
)
def test_regression_and_classification_heads_are_not_mixed(
    tmp_path: Path, num_labels: int, problem_type: str | None, task: str, found: str, needed: str
) -> None:
    model = BertForSequenceClassification(bert_config(TINY_TEACHER_SHAPE, num_labels, vocab_size=100))
    model.config.problem_type = problem_type
    model.save_pretrained(tmp_path / "t")
    with pytest.raises(ConfigError, match=rf"{re.escape(found)}.*task {task} {re.escape(needed)}"):
        load_teacher(resolve_teacher(str(tmp_path / "t"), task), get_task(task).num_labels)


def test_a_hub_teacher_with_the_wrong_label_count_is_one_message_in_the_preflight(
    tmp_path: Path, use_hub: Switch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pre-flight (`validate_trials`) reads the cached config: one message, no weight loaded."""
    _hub_teacher(tmp_path, MRPC_TEACHER, 2)
    use_hub(tmp_path)
    _no_weights_loaded(monkeypatch)
    trials = [Trial("mnli", MRPC_TEACHER, "bert-tiny", init="random", lr=lr) for lr in (1e-4, 2e-4)]
    with pytest.raises(ConfigError, match=rf"teacher {MRPC_TEACHER} has 2 outputs.*task mnli needs 3"):
        validate_trials(trials)


# ---------------------------------------------------------------------------------------- the teacher's shape


def test_a_cached_paper_teacher_is_planned_with_its_real_shape(tmp_path: Path, use_hub: Switch) -> None:
    use_hub(tmp_path)
    declared = resolve_teacher("bert-base", "mrpc")
    assert declared.shape == TEACHERS["bert-base"]["mrpc"].shape and declared.shape_declared
    _hub_teacher(tmp_path, MRPC_TEACHER, 2)
    real = resolve_teacher("bert-base", "mrpc")
    assert real.shape == StudentShape(12, 48, 12, 192) and not real.shape_declared
    assert real.task == "mrpc" and real.source == MRPC_TEACHER and not real.is_local
    assert cached_config(MRPC_TEACHER).shape == real.shape  # type: ignore[union-attr]


def test_a_teacher_planned_with_the_declared_shape_is_checked_against_its_config_at_load(
    tmp_path: Path, use_hub: Switch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planned where nothing was cached (the declared BERT-base shape), loaded where the config says otherwise:
    refused before any weight loads."""
    _hub_teacher(tmp_path, MRPC_TEACHER, 2)
    use_hub(tmp_path)
    planned = ResolvedTeacher(MRPC_TEACHER, TEACHERS["bert-base"]["mrpc"].shape, False, "mrpc", True)
    _no_weights_loaded(monkeypatch)
    with pytest.raises(ConfigError, match=r"gives shape w48-l12-h12-f192, but its trials were planned with "
                       r"w768-l12-h12-f3072, the shape kdgrid declares"):  # fmt: skip
        load_teacher(planned, 2)


# ---------------------------------------------------------------------------- a Hub model that cannot be had


def test_an_uncached_hub_teacher_offline_is_one_message_naming_prefetch(
    tmp_path: Path, use_hub: Switch
) -> None:
    use_hub(tmp_path)
    teacher = resolve_teacher("bert-base", "mrpc")  # planning needs no network: the declared shape
    for call in (
        lambda: load_teacher(teacher, 2),
        lambda: validate_trials([Trial("mrpc", "bert-base", "bert-tiny")]),
    ):
        with pytest.raises(
            KdgridError, match=r"not cached, and HF_HUB_OFFLINE forbids.*`kdgrid prefetch SWEEP`"
        ):
            call()
    with pytest.raises(KdgridError, match=r"kdgrid prefetch"):
        load_pretrained_bert("google/bert_uncased_L-2_H-128_A-2", 2, what="init 'pretrain'")


def test_an_unknown_hub_id_is_one_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Hub answers 404 (simulated: the Hub is not reachable from the test machines)."""
    import huggingface_hub
    from huggingface_hub.errors import RepositoryNotFoundError

    def not_found(repo_id: str, filename: str, **kwargs: object) -> str:
        error = RepositoryNotFoundError.__new__(
            RepositoryNotFoundError
        )  # its __init__ wants an HTTP response
        Exception.__init__(error, f"404 {repo_id}")
        raise error

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", not_found)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    with pytest.raises(
        KdgridError, match=r"'someone/no-such-model' is neither a directory here nor a model on"
    ):
        fetch_config("someone/no-such-model", what="teacher")
    with pytest.raises(KdgridError, match=r"neither a directory here nor a model"):
        resolve_teacher("someone/no-such-model", "mrpc")
    assert not shapes.hub_offline()


# -- a checkpoint's keys -----------------------------------------------------------------------------------------


def _rewrite_weights(directory: Path, rename: Callable[[str], str | None]) -> None:
    """Rewrite a ``save_pretrained`` directory's ``model.safetensors`` with each key renamed (None: dropped)."""
    from safetensors.torch import load_file, save_file

    path = directory / "model.safetensors"
    tensors = load_file(path)
    renamed = {new: t for k, t in tensors.items() if (new := rename(k)) is not None}
    save_file(renamed, path, metadata={"format": "pt"})


def _masked_lm_checkpoint(path: Path) -> str:
    """A `BertForMaskedLM` of the tiny shape: encoder and ``cls.predictions.*``, no pooler, no classifier."""
    from transformers import BertForMaskedLM

    with torch.random.fork_rng():
        torch.manual_seed(0)
        BertForMaskedLM(bert_config(TINY_TEACHER_SHAPE, 2)).save_pretrained(path)
    return str(path)


@pytest.mark.parametrize(
    ("rename", "named"),
    [
        (
            lambda k: k.replace(".attention.self.query.", ".attention.self.q."),
            ["attention.self.query.weight"],
        ),
        (lambda k: k.replace("bert.", "encoder_model."), ["bert.embeddings.word_embeddings.weight"]),
        (lambda k: None if k.startswith("classifier.") else k, ["classifier.bias", "classifier.weight"]),
    ],
    ids=["a renamed layer", "a renamed base model", "no classifier"],
)
def test_a_teacher_with_keys_that_are_not_a_bert_classifiers_is_refused_naming_them(
    tmp_path: Path, rename: Callable[[str], str | None], named: list[str]
) -> None:
    source = save_random_teacher(tmp_path / "teacher", TINY_TEACHER_SHAPE)
    _rewrite_weights(tmp_path / "teacher", rename)
    with pytest.raises(KdgridError, match="does not match a BERT classifier's weights") as refused:
        load_pretrained_bert(source, 2, what="teacher")
    for key in named:
        assert key in str(refused.value)


def test_a_renamed_encoder_key_is_refused_even_where_the_head_starts_fresh(tmp_path: Path) -> None:
    """A student's init may lack a classifier, never an encoder weight: ``init: pretrain`` would quietly be
    random there."""
    source = save_random_teacher(tmp_path / "teacher", TINY_TEACHER_SHAPE)
    _rewrite_weights(tmp_path / "teacher", lambda k: k.replace("layer.1.output.dense", "layer.1.out.dense"))
    with pytest.raises(KdgridError, match=r"lacks 2 key\(s\).*layer\.1\.output\.dense.*no place for 2 key"):
        models.load_checkpoint(source, 2, what="init 'pretrain'", fresh_head=True)


def test_a_masked_lm_checkpoint_loads_with_a_fresh_head_named_and_its_encoder_weights(tmp_path: Path) -> None:
    from transformers import BertForMaskedLM

    source = _masked_lm_checkpoint(tmp_path / "mlm")
    loaded = models.load_checkpoint(source, 3, what="init 'pretrain'", fresh_head=True)
    assert loaded.fresh_keys == (
        "bert.pooler.dense.bias",
        "bert.pooler.dense.weight",
        "classifier.bias",
        "classifier.weight",
    )
    saved = BertForMaskedLM.from_pretrained(source)
    torch.testing.assert_close(
        loaded.model.bert.encoder.layer[1].output.dense.weight,
        saved.bert.encoder.layer[1].output.dense.weight,
    )
    # As a teacher (its classifier read), the same checkpoint is refused.
    with pytest.raises(KdgridError, match=r"classifier\.weight"):
        load_pretrained_bert(source, 3, what="teacher")


def test_a_complete_classifier_loads_with_nothing_fresh(tmp_path: Path) -> None:
    source = save_random_teacher(tmp_path / "teacher", TINY_TEACHER_SHAPE)
    assert models.load_checkpoint(source, 2, what="teacher", fresh_head=False).fresh_keys == ()


def test_only_a_teacher_not_meant_to_be_accurate_may_lack_its_classifier(tmp_path: Path) -> None:
    """A teacher without its classifier head (the raw offline MiniLM, a base model) is refused unless the trials
    declare it not meant to be accurate (``teacher_gate: false``): then its head is drawn fresh."""
    source = save_random_teacher(tmp_path / "teacher", TINY_TEACHER_SHAPE)
    _rewrite_weights(tmp_path / "teacher", lambda k: None if k.startswith("classifier.") else k)
    teacher = shapes.resolve_teacher(source, "sst2")
    with pytest.raises(KdgridError, match=r"classifier\.weight"):
        load_teacher(teacher, 2)
    model = load_teacher(teacher, 2, fresh_head=True)
    assert not model.training and not any(p.requires_grad for p in model.parameters())
