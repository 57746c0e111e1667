"""Student shapes, parameter counts, FLOPs, and teacher resolution."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import BertForSequenceClassification

from kdgrid.core.model.models import bert_config
from kdgrid.core.model.shapes import STUDENTS, TEACHERS, StudentShape, resolve_teacher, student_shape
from kdgrid.errors import ConfigError, KdgridError


@pytest.mark.parametrize(
    ("name", "millions"),
    [("bert-tiny", 4.4), ("bert-mini", 11.2), ("bert-small", 28.8), ("bert-medium", 41.4)],
)
def test_parameter_counts_match_the_known_sizes(name: str, millions: float) -> None:
    shape = STUDENTS[name]
    assert shape.param_count() / 1e6 == pytest.approx(millions, abs=0.05)


def test_parameter_count_formula_equals_the_real_model() -> None:
    shape = student_shape("w48-l3-h4-f80")
    model = BertForSequenceClassification(bert_config(shape, 3, vocab_size=1000))
    assert shape.param_count(3, vocab_size=1000) == sum(p.numel() for p in model.parameters())


def test_flops_per_sequence_by_hand() -> None:
    shape = StudentShape(layers=2, width=4, heads=2, ffn=8)
    # Per layer: 2 x (4 n d^2 + 2 n d f + 2 n^2 d) with n=3, d=4, f=8; head: 2 x (d^2 + 2 d).
    per_layer = 2 * (4 * 3 * 16 + 2 * 3 * 4 * 8 + 2 * 9 * 4)
    assert shape.flops_per_sequence(3, num_labels=2) == 2 * per_layer + 2 * (16 + 8)
    assert STUDENTS["bert-mini"].flops_per_sequence(128) > STUDENTS["bert-tiny"].flops_per_sequence(128)


def test_student_names_and_shapes() -> None:
    assert student_shape("BERT-Tiny") == StudentShape(2, 128, 2, 512)
    assert student_shape("w144-l8") == StudentShape(8, 144, 4, 576)  # head size 36: widths of Table 2
    assert student_shape("w768-l4") == StudentShape(4, 768, 12, 3072)
    assert student_shape("w384-l2-h12-f1536") == StudentShape(2, 384, 12, 1536)
    for width in (128, 144, 160, 168, 176, 132, 142, 154, 170):  # the width-depth study's widths
        shape = student_shape(f"w{width}-l4")
        assert shape.width % shape.heads == 0
    with pytest.raises(ConfigError, match=r"unknown student 'bert-huge'.*bert-tiny"):
        student_shape("bert-huge")
    with pytest.raises(ConfigError, match=r"not divisible"):
        student_shape("w100-l2-h3")


def test_paper_teachers_resolve_offline() -> None:
    resolved = resolve_teacher("bert-base", "mnli")
    assert resolved.source == "ishan/bert-base-uncased-mnli" and resolved.shape.layers == 12
    assert resolve_teacher("textattack/bert-base-uncased-RTE", "rte").shape.width == 768
    assert resolve_teacher("bert-large", "sst2").shape == StudentShape(24, 1024, 16, 4096)
    assert set(TEACHERS["bert-base"]) == {"mnli", "qqp", "qnli", "sst2", "cola", "stsb", "mrpc", "rte"}
    with pytest.raises(ConfigError, match=r"no bert-base teacher for task 'polarity'"):
        resolve_teacher("bert-base", "polarity")


def test_missing_teachers_are_clear_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KDGRID_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(KdgridError, match=r"kdgrid teacher finetune polarity"):
        resolve_teacher("minilm-l6", "polarity")
    with pytest.raises(KdgridError, match=r"could not be found on the Hugging Face Hub"):
        resolve_teacher("someone/not-a-cached-model", "rte")
    with pytest.raises(KdgridError, match=r"neither a local directory"):
        resolve_teacher("./not-here", "rte")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"no config.json"):
        resolve_teacher(str(tmp_path / "empty"), "rte")
