"""The four initialization schemes, and their failures before training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import BertForMaskedLM, BertForSequenceClassification

from kdgrid.core.job.init import build_student, check_init, preload_layers
from kdgrid.core.model.models import ATTENTION_IMPLEMENTATION, bert_config
from kdgrid.core.model.shapes import ResolvedTeacher, StudentShape, turc_hub_name
from kdgrid.errors import ConfigError, KdgridError
from kdgrid.trial import Trial

STUDENT = StudentShape(layers=2, width=32, heads=2, ffn=64)
TEACHER_SHAPE = StudentShape(layers=4, width=32, heads=2, ffn=64)
VOCAB = 200


@pytest.fixture
def teacher(tmp_path: Path) -> tuple[ResolvedTeacher, BertForSequenceClassification]:
    torch.manual_seed(7)
    model = BertForSequenceClassification(bert_config(TEACHER_SHAPE, 2, vocab_size=VOCAB))
    model.save_pretrained(tmp_path / "teacher")
    return ResolvedTeacher(str(tmp_path / "teacher"), TEACHER_SHAPE, True), model


def trial(init: str, **kw: object) -> Trial:
    config: dict[str, object] = {"student": STUDENT.name, **kw}
    return Trial(task="synthetic-single-binary", teacher="t", init=init, **config)  # type: ignore[arg-type]


def test_random_init_is_seeded_and_leaves_the_global_rng_alone(teacher) -> None:  # type: ignore[no-untyped-def]
    resolved, teacher_model = teacher
    state = torch.get_rng_state()
    a, info = build_student(trial("random", seed=1), STUDENT, 2, resolved, teacher_model)
    assert torch.equal(torch.get_rng_state(), state)
    b, _ = build_student(trial("random", seed=1), STUDENT, 2, resolved, teacher_model)
    c, _ = build_student(trial("random", seed=2), STUDENT, 2, resolved, teacher_model)
    assert info == {"init_source": None}
    assert torch.equal(a.bert.embeddings.word_embeddings.weight, b.bert.embeddings.word_embeddings.weight)
    assert not torch.equal(a.bert.embeddings.word_embeddings.weight, c.bert.embeddings.word_embeddings.weight)
    assert (
        a.config.vocab_size == VOCAB
        and a.config._attn_implementation == ATTENTION_IMPLEMENTATION
        and a.training
    )


def test_pretrain_loads_a_checkpoint_of_the_students_shape(teacher, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    resolved, teacher_model = teacher
    torch.manual_seed(3)
    pretrained = BertForMaskedLM(bert_config(STUDENT, 2, vocab_size=VOCAB))
    pretrained.save_pretrained(tmp_path / "pre")
    model, info = build_student(
        trial("pretrain", init_from=str(tmp_path / "pre")), STUDENT, 3, resolved, teacher_model
    )
    assert info["init_source"] == str(tmp_path / "pre")
    for name, param in pretrained.bert.encoder.state_dict().items():
        assert torch.equal(model.bert.encoder.state_dict()[name], param), name
    assert model.classifier.weight.shape == (3, 32)


def test_pretrain_failures(teacher, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    resolved, teacher_model = teacher
    BertForMaskedLM(bert_config(StudentShape(3, 32, 2, 64), 2, vocab_size=VOCAB)).save_pretrained(
        tmp_path / "deep"
    )
    with pytest.raises(ConfigError, match=r"has shape w32-l3-h2-f64, the student is w32-l2-h2-f64"):
        check_init(trial("pretrain", init_from=str(tmp_path / "deep")), STUDENT, resolved)
    # No compact BERT of this shape was released: say so, and what to do.
    with pytest.raises(ConfigError, match=r"Turc et al. released no compact BERT of shape w32-l2"):
        check_init(trial("pretrain"), STUDENT, resolved)
    assert turc_hub_name(StudentShape(2, 128, 2, 512)) == "google/bert_uncased_L-2_H-128_A-2"
    # Offline, a Hub checkpoint that is not cached is a KdgridError naming it.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tiny = StudentShape(2, 128, 2, 512)
    with pytest.raises(KdgridError, match=r"google/bert_uncased_L-2_H-128_A-2"):
        build_student(trial("pretrain", student="bert-tiny"), tiny, 2, resolved, teacher_model)


def test_general_distillation_loads_a_local_checkpoint_and_records_its_info(teacher, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    resolved, teacher_model = teacher
    torch.manual_seed(4)
    source = BertForSequenceClassification(bert_config(STUDENT, 2, vocab_size=VOCAB))
    source.bert.save_pretrained(tmp_path / "gd")  # a bare BertModel, as a general-distillation run saves it
    (tmp_path / "gd" / "general_distillation.json").write_text(
        json.dumps({"teacher": "bert-base", "steps": 10})
    )
    gd = trial("general_distillation", init_from=str(tmp_path / "gd"))
    model, info = build_student(gd, STUDENT, 2, resolved, teacher_model)
    assert info["general_distillation"] == {"teacher": "bert-base", "steps": 10}
    assert info["init_fresh_keys"] == ["classifier.bias", "classifier.weight"]  # the head starts fresh
    assert torch.equal(
        model.bert.encoder.layer[1].output.dense.weight, source.bert.encoder.layer[1].output.dense.weight
    )
    # The student must read the teacher's tokens: a checkpoint with another vocabulary is refused.
    with pytest.raises(ConfigError, match=r"vocabulary of 200 tokens, the teacher's tokenizer 30522"):
        build_student(gd, STUDENT, 2, resolved, None, vocab_size=30522)
    with pytest.raises(ConfigError, match=r"needs init_from"):
        check_init(trial("general_distillation"), STUDENT, resolved)
    with pytest.raises(ConfigError, match=r"is not a directory"):
        check_init(trial("general_distillation", init_from="org/hub-name"), STUDENT, resolved)


def test_preload_copies_embeddings_and_chosen_teacher_layers(teacher) -> None:  # type: ignore[no-untyped-def]
    resolved, teacher_model = teacher
    model, info = build_student(trial("preload"), STUDENT, 2, resolved, teacher_model)
    assert info["preload_layers"] == [2, 4]  # evenly spaced: round(i * 4 / 2)
    assert torch.equal(
        model.bert.embeddings.word_embeddings.weight, teacher_model.bert.embeddings.word_embeddings.weight
    )
    for student_layer, teacher_layer in ((0, 1), (1, 3)):
        s = model.bert.encoder.layer[student_layer].state_dict()
        t = teacher_model.bert.encoder.layer[teacher_layer].state_dict()
        assert all(torch.equal(s[k], t[k]) for k in s)
    chosen, _ = build_student(
        trial("preload", options={"preload_layers": [1, 2]}), STUDENT, 2, resolved, teacher_model
    )
    assert torch.equal(
        chosen.bert.encoder.layer[1].attention.self.query.weight,
        teacher_model.bert.encoder.layer[1].attention.self.query.weight,
    )
    # From the saved directory instead of the loaded teacher: the same weights.
    reloaded, _ = build_student(trial("preload"), STUDENT, 2, resolved, None)
    assert torch.equal(
        reloaded.bert.encoder.layer[0].intermediate.dense.weight,
        model.bert.encoder.layer[0].intermediate.dense.weight,
    )


def test_preload_failures(teacher) -> None:  # type: ignore[no-untyped-def]
    resolved, _ = teacher
    narrow = StudentShape(2, 16, 2, 64)
    with pytest.raises(ConfigError, match=r"needs the teacher's width, heads and ffn.*w32-l2-h2-f64"):
        check_init(trial("preload", student=narrow.name), narrow, resolved)
    deep = StudentShape(6, 32, 2, 64)
    with pytest.raises(ConfigError, match=r"6 layers, the teacher .* only 4"):
        check_init(trial("preload", student=deep.name), deep, resolved)
    with pytest.raises(ConfigError, match=r"preload_layers"):
        preload_layers(trial("preload", options={"preload_layers": [1, 9]}), 2, 4)
    with pytest.raises(ConfigError, match=r"unknown init 'magic'"):
        check_init(trial("magic"), STUDENT, resolved)


def test_a_masked_lm_init_names_its_fresh_pooler_and_a_renamed_key_is_refused(
    teacher: tuple[ResolvedTeacher, BertForSequenceClassification], tmp_path: Path
) -> None:
    """A masked-LM checkpoint has no pooler: it starts fresh and the row says so. A key renamed in the encoder
    would leave that layer random: refused, naming it."""
    from safetensors.torch import load_file, save_file

    resolved, teacher_model = teacher
    torch.manual_seed(5)
    BertForMaskedLM(bert_config(STUDENT, 2, vocab_size=VOCAB)).save_pretrained(tmp_path / "mlm")
    gd = trial("general_distillation", init_from=str(tmp_path / "mlm"))
    _, info = build_student(gd, STUDENT, 2, resolved, teacher_model)
    assert info["init_fresh_keys"] == [
        "bert.pooler.dense.bias",
        "bert.pooler.dense.weight",
        "classifier.bias",
        "classifier.weight",
    ]
    weights = tmp_path / "mlm" / "model.safetensors"
    renamed = {
        k.replace("layer.0.attention.output", "layer.0.attn.output"): v for k, v in load_file(weights).items()
    }
    save_file(renamed, weights, metadata={"format": "pt"})
    with pytest.raises(KdgridError, match=r"lacks 4 key\(s\) \(bert\.encoder\.layer\.0\.attention\.output"):
        build_student(gd, STUDENT, 2, resolved, teacher_model)
