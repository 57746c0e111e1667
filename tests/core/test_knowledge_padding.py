"""Padding never leaks into a loss, and losses that should vanish on identical inputs do.

A batch with padding appended (any length, any content, NaN included) gives the same value to 1e-6, and
padded positions receive exactly zero gradient.
"""

from __future__ import annotations

import pytest
import torch

from kdgrid.core.knowledge import KNOWLEDGE
from kdgrid.core.losses import compute_knowledge
from kdgrid.core.model.projection import Projection

torch.set_num_threads(1)

# Knowledge with a token axis (the ones a mask applies to); the others read logits or sentence vectors.
TOKEN_LEVEL = sorted(name for name, spec in KNOWLEDGE.items() if spec.call_style in ("pair", "relation"))
LENGTHS = [4, 2, 3]
WIDTH_S, WIDTH_T, HEADS_S, HEADS_T = 8, 12, 2, 3


def test_token_level_set_is_what_we_think():
    assert set(TOKEN_LEVEL) == {
        "attention_mse_sum",
        "attention_ce_mean",
        "hidden_mse",
        "cos",
        "pkd",
        "mmd",
        "gram",
        "query_relation",
        "key_relation",
        "value_relation",
        "embedding_mse",
        "cka",
        "flex_kd",  # a method folder's knowledge (its teacher side arrives at the student's width)
    }


def _teacher_width(name: str) -> int:
    """The teacher's width a knowledge reads: the student's where its method brings the teacher there first."""
    return WIDTH_S if KNOWLEDGE[name].teacher_at_student_width else WIDTH_T


def _mask(lengths: list[int], length: int) -> torch.Tensor:
    return torch.tensor([[1] * n + [0] * (length - n) for n in lengths])


def _side(width: int, heads: int, length: int, seed: int, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    b = len(LENGTHS)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=dtype)

    return {
        "scores": rand(b, heads, length, length) * 3,
        "hidden": rand(b, length, width),
        "embeddings": rand(b, length, width),
        "query": rand(b, length, width),
        "key": rand(b, length, width),
        "value": rand(b, length, width),
    }


def _pad(features: dict[str, torch.Tensor], extra: int, fill: str, seed: int) -> dict[str, torch.Tensor]:
    """Append ``extra`` positions to the token axis (both axes of scores) holding junk of kind ``fill``."""
    g = torch.Generator().manual_seed(seed)

    def junk(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        if fill == "nan":
            return torch.full(shape, float("nan"), dtype=dtype)
        if fill == "const":
            return torch.full(shape, 7.0, dtype=dtype)
        return torch.randn(*shape, generator=g, dtype=dtype) * 1e3

    padded = {}
    for name, x in features.items():
        if name == "scores":
            b, h, n, _ = x.shape
            out = junk((b, h, n + extra, n + extra), x.dtype)
            out[:, :, :n, :n] = x
        else:
            b, n, d = x.shape
            out = junk((b, n + extra, d), x.dtype)
            out[:, :n] = x
        padded[name] = out
    return padded


def _scramble_existing_padding(
    features: dict[str, torch.Tensor], mask: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Overwrite the batch's own padded positions with large junk."""
    pad = ~mask.bool()
    out = {}
    for name, x in features.items():
        x = x.clone()
        if name == "scores":
            pairs = ~(mask.bool()[:, :, None] & mask.bool()[:, None, :])
            x.masked_fill_(pairs[:, None], -1234.5)
        else:
            x.masked_fill_(pad[:, :, None], 987.0)
        out[name] = x
    return out


def _value(name, student, teacher, mask, projection):
    return compute_knowledge(
        name, student, teacher, mask, projection=projection, heads_s=HEADS_S, heads_t=HEADS_T
    )


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("name", TOKEN_LEVEL)
def test_appended_padding_of_any_length_and_content_changes_nothing(name, dtype):
    length = max(LENGTHS)
    mask = _mask(LENGTHS, length)
    student = _side(WIDTH_S, HEADS_S, length, seed=1, dtype=dtype)
    teacher = _side(_teacher_width(name), HEADS_T, length, seed=2, dtype=dtype)
    projection = Projection(WIDTH_S, WIDTH_T).to(dtype)
    base = _value(name, student, teacher, mask, projection)
    assert torch.isfinite(base)

    scrambled = _value(
        name,
        _scramble_existing_padding(student, mask),
        _scramble_existing_padding(teacher, mask),
        mask,
        projection,
    )
    torch.testing.assert_close(scrambled, base, rtol=1e-6, atol=1e-6)

    for extra in (1, 7):
        for fill in ("random", "const", "nan"):
            longer = _mask(LENGTHS, length + extra)
            padded = _value(
                name,
                _pad(student, extra, fill, seed=3),
                _pad(teacher, extra, fill, seed=4),
                longer,
                projection,
            )
            torch.testing.assert_close(padded, base, rtol=1e-6, atol=1e-6, msg=f"{name} {extra} {fill}")


@pytest.mark.parametrize("name", TOKEN_LEVEL)
def test_padded_positions_get_exactly_zero_gradient_even_when_nan(name):
    length = max(LENGTHS) + 3
    mask = _mask(LENGTHS, length)
    student = _pad(_side(WIDTH_S, HEADS_S, max(LENGTHS), 5, torch.float64), 3, "nan", seed=0)
    teacher = _pad(_side(_teacher_width(name), HEADS_T, max(LENGTHS), 6, torch.float64), 3, "nan", seed=0)
    student = {k: v.requires_grad_() for k, v in student.items()}
    projection = Projection(WIDTH_S, WIDTH_T).double()
    _value(name, student, teacher, mask, projection).backward()
    real = mask.bool()
    for need in KNOWLEDGE[name].needs:
        grad = student[need].grad
        assert torch.isfinite(grad).all(), f"{name}: non-finite gradient"
        if need == "scores":
            pairs = real[:, :, None] & real[:, None, :]
            assert (grad.masked_select(~pairs[:, None].expand_as(grad)) == 0).all()
        else:
            assert (grad[~real] == 0).all(), f"{name}: padded positions received gradient"
    assert all(torch.isfinite(p.grad).all() for p in projection.parameters() if p.grad is not None)


ZERO_ON_IDENTICAL = [
    "attention_mse_sum",
    "hidden_mse",
    "cos",
    "pkd",
    "mmd",
    "gram",
    "query_relation",
    "key_relation",
    "value_relation",
    "embedding_mse",
    "cka",
]


@pytest.mark.parametrize("name", ZERO_ON_IDENTICAL)
def test_identical_student_and_teacher_give_zero(name):
    length = max(LENGTHS) + 2
    mask = _mask(LENGTHS, length)
    features = _side(WIDTH_T, HEADS_T, length, seed=7, dtype=torch.float64)
    # Different junk in the padding of the two sides: only real positions must agree.
    student = _scramble_existing_padding(features, mask)
    value = compute_knowledge(name, student, features, mask, heads_s=HEADS_T, heads_t=HEADS_T)
    assert abs(value.item()) < 1e-12


@pytest.mark.parametrize("on", ["scores", "probs"])
def test_attention_mse_sum_on_probabilities_is_zero_on_identical(on):
    mask = _mask(LENGTHS, 4)
    scores = _side(WIDTH_T, HEADS_T, 4, seed=8, dtype=torch.float64)["scores"]
    value = compute_knowledge(
        "attention_mse_sum", {"scores": scores}, {"scores": scores}, mask, options={"on": on}
    )
    assert value.item() == 0.0


def test_sentence_and_response_losses_vanish_where_they_should():
    g = torch.Generator().manual_seed(9)
    sentence = torch.randn(4, 6, generator=g, dtype=torch.float64)
    assert (
        abs(compute_knowledge("reaug_relation", {"sentence": sentence}, {"sentence": sentence}).item())
        < 1e-12
    )
    regression = torch.randn(4, 1, generator=g, dtype=torch.float64)
    assert compute_knowledge("soft_label", {"logits": regression}, {"logits": regression}).item() == 0.0
    # Classification soft labels bottom out at the teacher's entropy, not zero.
    logits = torch.randn(4, 3, generator=g, dtype=torch.float64)
    p = logits.softmax(-1)
    entropy = -(p * p.log()).sum(-1).mean()
    value = compute_knowledge("soft_label", {"logits": logits}, {"logits": logits})
    assert value.item() == pytest.approx(entropy.item(), rel=1e-12)


def test_attention_with_the_bert_padding_bias_matches_an_unpadded_batch():
    """Real inputs: scores carrying BERT's -10000 key bias on padded columns, as `kdgrid.core.model.capture` builds."""
    g = torch.Generator().manual_seed(10)
    short = torch.randn(1, 2, 3, 3, generator=g)
    teacher_short = torch.randn(1, 12, 3, 3, generator=g)
    padded = torch.randn(1, 2, 5, 5, generator=g)
    teacher_padded = torch.randn(1, 12, 5, 5, generator=g)
    padded[:, :, :3, :3], teacher_padded[:, :, :3, :3] = short, teacher_short
    padded[..., 3:] += -10000.0
    teacher_padded[..., 3:] += -10000.0
    for name in ("attention_mse_sum", "attention_ce_mean"):
        fn = KNOWLEDGE[name].fn
        expected = fn(short, teacher_short, torch.ones(1, 3))
        got = fn(padded, teacher_padded, torch.tensor([[1, 1, 1, 0, 0]]))
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
