"""The SSM student: its scan against its materialised matrix, the matrix against the formula written as loops,
padding, shapes, gradients, parameter counts, names and MOHAWK's weight transfer."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification

from kdgrid.core.model.shapes import SSMShape, ssm_shape
from kdgrid.core.model.ssm.mixer import SSDMixer
from kdgrid.core.model.ssm.model import build_ssm, load_ssm, transfer_from_bert
from kdgrid.core.model.ssm.scan import causal_matrix, causal_scan, segment_sums
from kdgrid.errors import ConfigError, KdgridError


def test_segment_sums_by_hand():
    s = segment_sums(torch.tensor([1.0, 2.0, 4.0]))
    inf = float("-inf")
    assert s.tolist() == [[0.0, inf, inf], [2.0, 0.0, inf], [6.0, 4.0, 0.0]]


def _inputs(batch=2, length=11, heads=3, width=4, state=5, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, length, heads, width, generator=g, dtype=dtype)
    c = torch.randn(batch, length, heads, state, generator=g, dtype=dtype)
    b = torch.randn(batch, length, heads, state, generator=g, dtype=dtype)
    log_a = -torch.nn.functional.softplus(torch.randn(batch, length, heads, generator=g, dtype=dtype))
    return x, c, b, log_a


def test_causal_matrix_is_the_formula_written_as_loops():
    _x, c, b, log_a = _inputs(batch=1, length=5, heads=2)
    matrix = causal_matrix(c, b, log_a)
    for h in range(2):
        for i in range(5):
            for j in range(5):
                if j > i:
                    expected = 0.0
                else:
                    decay = math.exp(sum(float(log_a[0, k, h]) for k in range(j + 1, i + 1)))
                    expected = float(c[0, i, h] @ b[0, j, h]) * decay
                assert float(matrix[0, h, i, j]) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("chunk", [1, 3, 4, 64])
def test_the_chunked_scan_is_the_matrix_times_the_values(chunk):
    x, c, b, log_a = _inputs(length=11)
    expected = torch.einsum("bhij,bjhp->bihp", causal_matrix(c, b, log_a), x)
    assert torch.allclose(causal_scan(x, c, b, log_a, chunk), expected, atol=1e-10)


def test_the_scan_in_float32_over_many_chunks_is_within_1e_5():
    x, c, b, log_a = _inputs(length=300, heads=2, dtype=torch.float32)
    expected = torch.einsum(
        "bhij,bjhp->bihp", causal_matrix(c.double(), b.double(), log_a.double()), x.double()
    )
    assert (causal_scan(x, c, b, log_a, 64).double() - expected).abs().max() < 1e-5


def _mixer(causal: bool, seed: int = 0, width: int = 12, heads: int = 3, state: int = 4, chunk: int = 4):
    torch.manual_seed(seed)
    mixer = SSDMixer(width, heads, state, causal=causal, chunk=chunk)
    with torch.no_grad():
        mixer.skip.copy_(torch.tensor([0.5, -1.0, 2.0]))
    return mixer


def _values(mixer: SSDMixer, u: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    batch, length, width = u.shape
    return (mixer.value(u) * mask[..., None]).view(batch, length, mixer.heads, width // mixer.heads)


@pytest.mark.parametrize("causal", [True, False])
def test_the_materialised_matrix_times_the_values_is_the_mixer(causal):
    mixer = _mixer(causal)
    u = torch.randn(3, 10, 12)
    mask = torch.ones(3, 10)
    mask[1, 7:] = 0  # right padding
    mask[2, 4] = 0  # a hole in the middle
    matrices = mixer.matrices(u, mask)
    x = _values(mixer, u, mask)
    expected = torch.einsum("bhij,bjhp->bihp", matrices, x).reshape(3, 10, 12)
    assert (mixer.mix(u, mask) - expected).abs().max() < 1e-5
    assert matrices.shape == (3, 3, 10, 10)
    upper = torch.triu(matrices, diagonal=1).abs().max()
    assert (upper == 0) if causal else (upper > 0)
    # padded rows and columns are zero
    assert matrices[1, :, 7:].abs().max() == 0 and matrices[1, :, :, 7:].abs().max() == 0


def test_the_bidirectional_matrix_is_the_formula_written_as_loops():
    mixer = _mixer(causal=False)
    u = torch.randn(1, 6, 12, dtype=torch.float64)
    mixer = mixer.double()
    mask = torch.ones(1, 6, dtype=torch.float64)
    with torch.no_grad():
        matrix = mixer.matrices(u, mask)
        c, b, log_a = mixer.forward_scan(u, mask)
        c2, b2, log_a2 = mixer.backward_scan(u, mask)
    for h in range(3):
        for i in range(6):
            for j in range(6):
                if j < i:
                    expected = float(c[0, i, h] @ b[0, j, h]) * math.exp(
                        float(log_a[0, j + 1 : i + 1, h].sum())
                    )
                elif j == i:
                    expected = float(c[0, i, h] @ b[0, i, h]) + float(mixer.skip[h])
                else:
                    expected = float(c2[0, i, h] @ b2[0, j, h]) * math.exp(float(log_a2[0, i:j, h].sum()))
                assert float(matrix[0, h, i, j]) == pytest.approx(expected, abs=1e-10)


@pytest.mark.parametrize("causal", [True, False])
def test_padding_changes_no_real_output(causal):
    mixer = _mixer(causal)
    u = torch.randn(1, 6, 12)
    padded = torch.cat([u, 1e3 * torch.randn(1, 5, 12)], dim=1)  # garbage in the padding
    mask = torch.cat([torch.ones(1, 6), torch.zeros(1, 5)], dim=1)
    alone = mixer(u, torch.ones(1, 6))
    assert torch.allclose(mixer(padded, mask)[:, :6], alone, atol=1e-5)
    assert mixer.mix(padded, mask)[:, 6:].abs().max() == 0
    # a hole: the sequence with the token removed
    holed = torch.cat([u[:, :3], torch.randn(1, 1, 12), u[:, 3:]], dim=1)
    hole_mask = torch.ones(1, 7)
    hole_mask[0, 3] = 0
    out = mixer.mix(holed, hole_mask)
    assert torch.allclose(
        torch.cat([out[:, :3], out[:, 4:]], dim=1), mixer.mix(u, torch.ones(1, 6)), atol=1e-5
    )


@pytest.mark.parametrize("name", ["ssm-l2-h24-a3-n4-f48", "ssm-l2-h24-a3-n4-f48-causal-mean"])
def test_the_model_shapes_gradients_and_parameter_count(name):
    shape = ssm_shape(name)
    model = build_ssm(shape, num_labels=3, seed=0, vocab_size=50)
    ids = torch.randint(0, 50, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[0, 6:] = 0
    out = model(ids, attention_mask=mask, output_hidden_states=True)
    assert out.logits.shape == (2, 3)
    assert len(out.hidden_states) == 3 and out.hidden_states[2].shape == (2, 9, 24)
    matrices = model.mixing_matrices(out.hidden_states, mask)
    assert matrices[0] is None and matrices[1].shape == (2, 3, 9, 9)
    (out.logits.sum() + sum(m.sum() for m in matrices[1:])).backward()
    for param_name, param in model.named_parameters():
        assert param.grad is not None, param_name
        assert param.grad.abs().sum() > 0, param_name
    assert sum(p.numel() for p in model.parameters()) == shape.param_count(num_labels=3, vocab_size=50)


def test_the_same_seed_builds_the_same_model():
    shape = ssm_shape("ssm-l1-h8-a2")
    a, b = build_ssm(shape, 2, seed=3, vocab_size=20), build_ssm(shape, 2, seed=3, vocab_size=20)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def test_names():
    shape = ssm_shape("SSM-L6-H384-A12")
    assert shape == SSMShape(layers=6, width=384, heads=12, ffn=1536, state=32)
    assert shape.name == "ssm-l6-h384-a12-n32-f1536"
    assert ssm_shape(shape.name) == shape
    assert ssm_shape("ssm-l2-h64-a4-causal-mean").name == "ssm-l2-h64-a4-n16-f256-causal-mean"
    with pytest.raises(ConfigError, match="ssm-l6-h384-a12"):
        ssm_shape("ssm-6-384")
    with pytest.raises(ConfigError, match="not divisible"):
        ssm_shape("ssm-l2-h10-a3")


def test_weight_transfer_copies_every_shared_part_and_no_mixer_part():
    config = BertConfig(vocab_size=50, hidden_size=24, num_hidden_layers=2, num_attention_heads=3,
                        intermediate_size=48, num_labels=2)  # fmt: skip
    torch.manual_seed(0)
    teacher = BertForSequenceClassification(config)
    student = build_ssm(ssm_shape("ssm-l2-h24-a3-n8-f48"), 2, seed=1, vocab_size=50)
    before = {k: v.clone() for k, v in student.state_dict().items()}
    copied = transfer_from_bert(student, teacher)
    t = teacher.state_dict()
    s = student.state_dict()
    assert torch.equal(s["layers.1.intermediate.weight"], t["bert.encoder.layer.1.intermediate.dense.weight"])
    assert torch.equal(
        s["layers.0.mixer_norm.bias"], t["bert.encoder.layer.0.attention.output.LayerNorm.bias"]
    )
    assert torch.equal(s["embeddings.word_embeddings.weight"], t["bert.embeddings.word_embeddings.weight"])
    assert torch.equal(s["classifier.weight"], t["classifier.weight"])
    for key in (
        "layers.0.mixer.forward_scan.query.weight",
        "layers.0.mixer.value.weight",
        "layers.1.mixer.output.bias",
        "layers.1.mixer.skip",
        "layers.1.mixer.backward_scan.decay.bias",
    ):
        assert torch.equal(s[key], before[key]), key
    assert "layers.1.output_norm.weight" in copied
    wrong = build_ssm(ssm_shape("ssm-l3-h24-a3"), 2, vocab_size=50)
    with pytest.raises(ValueError, match="layers, width, ffn and labels"):
        transfer_from_bert(wrong, teacher)


def test_a_saved_student_loads_back_whole_and_a_bad_folder_is_refused(tmp_path):
    model = build_ssm(ssm_shape("ssm-l1-h8-a2-causal"), 3, seed=2, vocab_size=20)
    model.save_pretrained(tmp_path / "s", safe_serialization=True)
    loaded = load_ssm(tmp_path / "s")
    assert loaded.config.shape == model.config.shape and loaded.config.num_labels == 3
    assert all(
        torch.equal(p, q)
        for p, q in zip(model.state_dict().values(), loaded.state_dict().values(), strict=True)
    )
    (tmp_path / "s" / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(KdgridError, match="not an SSM student"):
        load_ssm(tmp_path / "s")


def test_an_ssm_students_attention_scores_are_its_mixing_matrices_with_the_padding_bias():
    from kdgrid.core.model.capture import PAD_BIAS
    from kdgrid.core.model.ssm.capture import SSMCapture, capture_student

    model = build_ssm(ssm_shape("ssm-l2-h8-a2"), 2, seed=0, vocab_size=20).eval()  # no dropout: two passes agree
    mask = torch.tensor([[1, 1, 1, 0]])
    capture = capture_student(model, {"scores", "hidden"}, {0, 2})
    assert isinstance(capture, SSMCapture)
    features = capture({"input_ids": torch.tensor([[1, 2, 3, 0]]), "attention_mask": mask})
    assert features.scores[1] is None  # only the layers asked for
    hidden = model(torch.tensor([[1, 2, 3, 0]]), attention_mask=mask, output_hidden_states=True).hidden_states
    expected = model.layers[1].mixer.matrices(hidden[1], mask)
    assert torch.allclose(features.scores[2][..., :3], expected[..., :3])
    assert torch.all(features.scores[2][..., 3] == PAD_BIAS)
    assert features.hidden[1] is None and features.hidden[2].shape == (1, 4, 8)


def test_flops_by_hand():
    # L = 4 tokens, d = 8, H = 2 heads of P = 4, N = 2, f = 16, one block, bidirectional, chunk Q = min(64, 4) = 4
    shape = ssm_shape("ssm-l1-h8-a2-n2-f16")
    value_output = 2 * (2 * 4 * 8 * 8)  # two d x d projections, 2 FLOPs a multiply-add
    ffn = 2 * (2 * 4 * 8 * 16)
    projections = 2 * 4 * 8 * (2 * 2 * 2 + 2)  # per direction: B and C (H N = 4 each) and the decay (H = 2)
    # per direction and head (H = 2): C B^T and its product with the values within the chunk, 2 L Q (N + P);
    # the states in and out, 4 L N P
    scan = 2 * (2 * 4 * 4 * (2 + 4) + 4 * 4 * 2 * 4)
    head = 2 * (8 * 8 + 8 * 2)  # pooler and classifier
    per_direction = projections + scan
    assert shape.flops_per_sequence(4) == value_output + ffn + 2 * per_direction + head
    causal = ssm_shape("ssm-l1-h8-a2-n2-f16-causal")
    assert causal.flops_per_sequence(4) == value_output + ffn + per_direction + head
