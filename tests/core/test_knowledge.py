"""Every knowledge loss against values computed by hand (plain loops over numpy / Python floats, never the
function under test), plus the registry, the names, gradients, mismatched shapes and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from kdgrid.core import knowledge as kn_registry
from kdgrid.core import losses as kn
from kdgrid.core.knowledge import (
    FEATURES,
    KNOWLEDGE,
    ShapeError,
    canonical_knowledge,
    canonical_pair,
    get_knowledge,
    paper_name,
    term_name,
    term_pairs,
)
from kdgrid.core.losses import compute_knowledge
from kdgrid.core.model.projection import Projection
from kdgrid.errors import ConfigError
from kdgrid.paper import DOUBLE_MATCH_PAIRS, PAPER_KNOWLEDGE

torch.set_num_threads(1)

# Two examples, lengths 3 and 2, padded to 3.
MASK = np.array([[1, 1, 1], [1, 1, 0]])


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.tensor(a, dtype=torch.float64)


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _real(mask: np.ndarray, b: int) -> list[int]:
    return [i for i in range(mask.shape[1]) if mask[b, i]]


def _softmax(values: list[float]) -> list[float]:
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    total = sum(exps)
    return [e / total for e in exps]


def _dot(a, b) -> float:
    return sum(float(x) * float(y) for x, y in zip(a, b, strict=True))


def _norm(a) -> float:
    return math.sqrt(_dot(a, a))


# ------------------------------------------------------------------------------------------------ literal checks


def test_hidden_mse_literal_numbers():
    # Example 0 has one real token: (1-0)^2 + (2-2)^2 = 1 over 1 token x 2 dims; the padded token is ignored.
    hs = torch.tensor([[[1.0, 2.0], [5.0, 5.0]]])
    ht = torch.tensor([[[0.0, 2.0], [-5.0, 9.0]]])
    assert kn.hidden_mse(hs, ht, torch.tensor([[1, 0]])).item() == pytest.approx(0.5)


def test_pkd_literal_numbers():
    # [CLS] (3, 4) -> (0.6, 0.8); teacher (1, 0): squared distance 0.16 + 0.64 = 0.8 summed over the width.
    hs = torch.tensor([[[3.0, 4.0], [9.0, 9.0]]])
    ht = torch.tensor([[[2.0, 0.0], [1.0, 1.0]]])
    mask = torch.tensor([[1, 1]])
    assert kn.pkd(hs, ht, mask).item() == pytest.approx(0.8)
    assert kn.pkd(hs, ht, mask, scale="mean").item() == pytest.approx(0.4)


def test_cos_literal_numbers():
    # Orthogonal -> 1, parallel -> 0: mean 0.5 over the two real tokens.
    hs = torch.tensor([[[1.0, 0.0], [2.0, 2.0]]])
    ht = torch.tensor([[[0.0, 3.0], [1.0, 1.0]]])
    assert kn.cos(hs, ht, torch.tensor([[1, 1]])).item() == pytest.approx(0.5)


def test_soft_label_literal_numbers():
    # Uniform teacher over 2 classes, student logits (0, ln 3): p_S = (1/4, 3/4); CE = -(ln(1/4) + ln(3/4)) / 2.
    s = torch.tensor([[0.0, math.log(3.0)]])
    t = torch.tensor([[0.0, 0.0]])
    expected = -(math.log(0.25) + math.log(0.75)) / 2
    assert kn.soft_label(s, t, 1.0).item() == pytest.approx(expected)
    # Regression: ((3 - 1) / 2)^2 = 1, times T^2 = 4 with t2.
    assert kn.soft_label(torch.tensor([[3.0]]), torch.tensor([[1.0]]), 2.0).item() == pytest.approx(1.0)
    assert kn.soft_label(torch.tensor([[3.0]]), torch.tensor([[1.0]]), 2.0, t2=True).item() == pytest.approx(
        4.0
    )


# ------------------------------------------------------------------------------------------- attention by hand


def _attention_inputs(seed: int, heads_s: int = 2, heads_t: int = 3):
    rng = _rng(seed)
    s = rng.normal(size=(2, heads_s, 3, 3)) * 2
    t = rng.normal(size=(2, heads_t, 3, 3)) * 2
    return s, t


def _head_softmax(scores: np.ndarray, b: int, h: int, i: int, mask: np.ndarray) -> dict[int, float]:
    keys = _real(mask, b)
    probs = _softmax([scores[b, h, i, j] for j in keys])
    return dict(zip(keys, probs, strict=True))


def test_attention_mse_sum_by_hand():
    s, t = _attention_inputs(1)
    total, count = 0.0, 0
    for b in range(2):
        real = _real(MASK, b)
        count += len(real) ** 2
        for i in real:
            for j in real:
                a_s = sum(s[b, h, i, j] for h in range(s.shape[1]))
                a_t = sum(t[b, h, i, j] for h in range(t.shape[1]))
                total += (a_s - a_t) ** 2
    got = kn.attention_mse_sum(_t(s), _t(t), torch.tensor(MASK))
    assert got.item() == pytest.approx(total / count, rel=1e-12)


def test_attention_mse_sum_on_probabilities_by_hand():
    s, t = _attention_inputs(2)
    total, count = 0.0, 0
    for b in range(2):
        real = _real(MASK, b)
        count += len(real) ** 2
        for i in real:
            p_s = [_head_softmax(s, b, h, i, MASK) for h in range(s.shape[1])]
            p_t = [_head_softmax(t, b, h, i, MASK) for h in range(t.shape[1])]
            for j in real:
                total += (sum(p[j] for p in p_s) - sum(p[j] for p in p_t)) ** 2
    got = kn.attention_mse_sum(_t(s), _t(t), torch.tensor(MASK), on="probs")
    assert got.item() == pytest.approx(total / count, rel=1e-12)


def test_attention_ce_mean_by_hand():
    s, t = _attention_inputs(3)
    total, rows = 0.0, 0
    for b in range(2):
        real = _real(MASK, b)
        for i in real:
            rows += 1
            mean_s = [sum(s[b, h, i, j] for h in range(2)) / 2 for j in real]
            mean_t = [sum(t[b, h, i, j] for h in range(3)) / 3 for j in real]
            p_s, p_t = _softmax(mean_s), _softmax(mean_t)
            total += -sum(pt * math.log(ps) for pt, ps in zip(p_t, p_s, strict=True))
    got = kn.attention_ce_mean(_t(s), _t(t), torch.tensor(MASK))
    assert got.item() == pytest.approx(total / rows, rel=1e-12)


def test_attention_ce_mean_on_probabilities_by_hand():
    s, t = _attention_inputs(4)
    total, rows = 0.0, 0
    for b in range(2):
        real = _real(MASK, b)
        for i in real:
            rows += 1
            p_s = [_head_softmax(s, b, h, i, MASK) for h in range(2)]
            p_t = [_head_softmax(t, b, h, i, MASK) for h in range(3)]
            for j in real:
                mean_s = sum(p[j] for p in p_s) / 2
                mean_t = sum(p[j] for p in p_t) / 3
                total += -mean_t * math.log(mean_s)
    got = kn.attention_ce_mean(_t(s), _t(t), torch.tensor(MASK), on="probs")
    assert got.item() == pytest.approx(total / rows, rel=1e-12)


def test_attention_ce_mean_of_identical_inputs_is_the_teacher_entropy():
    s, _ = _attention_inputs(5)
    entropy, rows = 0.0, 0
    for b in range(2):
        real = _real(MASK, b)
        for i in real:
            rows += 1
            p = _softmax([sum(s[b, h, i, j] for h in range(2)) / 2 for j in real])
            entropy += -sum(x * math.log(x) for x in p)
    got = kn.attention_ce_mean(_t(s), _t(s), torch.tensor(MASK))
    assert got.item() == pytest.approx(entropy / rows, rel=1e-12)


# ------------------------------------------------------------------------------------------- hidden by hand


def _hidden(seed: int, width_s: int = 4, width_t: int = 4, length: int = 3):
    rng = _rng(seed)
    return rng.normal(size=(2, length, width_s)), rng.normal(size=(2, length, width_t))


def test_hidden_mse_and_embedding_mse_by_hand():
    hs, ht = _hidden(10)
    total, tokens = 0.0, 0
    for b in range(2):
        for i in _real(MASK, b):
            tokens += 1
            total += sum((hs[b, i, k] - ht[b, i, k]) ** 2 for k in range(4))
    expected = total / (tokens * 4)
    assert kn.hidden_mse(_t(hs), _t(ht), torch.tensor(MASK)).item() == pytest.approx(expected, rel=1e-12)
    assert kn.embedding_mse(_t(hs), _t(ht), torch.tensor(MASK)).item() == pytest.approx(expected, rel=1e-12)


def test_cos_by_hand():
    hs, ht = _hidden(11)
    total, tokens = 0.0, 0
    for b in range(2):
        for i in _real(MASK, b):
            tokens += 1
            total += 1 - _dot(hs[b, i], ht[b, i]) / (_norm(hs[b, i]) * _norm(ht[b, i]))
    assert kn.cos(_t(hs), _t(ht), torch.tensor(MASK)).item() == pytest.approx(total / tokens, rel=1e-12)


def test_pkd_by_hand_both_scales():
    hs, ht = _hidden(12)
    total = 0.0
    for b in range(2):
        ns, nt = _norm(hs[b, 0]), _norm(ht[b, 0])
        total += sum((hs[b, 0, k] / ns - ht[b, 0, k] / nt) ** 2 for k in range(4))
    mask = torch.tensor(MASK)
    assert kn.pkd(_t(hs), _t(ht), mask).item() == pytest.approx(total / 2, rel=1e-12)
    assert kn.pkd(_t(hs), _t(ht), mask, scale="mean").item() == pytest.approx(total / 2 / 4, rel=1e-12)


def _mmd_by_hand(hs, ht, hs2, ht2, scale: str) -> float:
    total, count = 0.0, 0
    for b in range(2):
        real = _real(MASK, b)
        count += len(real) ** 2
        div_s = hs.shape[-1] if scale == "width" else len(real)
        div_t = ht.shape[-1] if scale == "width" else len(real)
        for i in real:
            for j in real:
                g_s = _dot(hs[b, i], hs2[b, j]) / div_s
                g_t = _dot(ht[b, i], ht2[b, j]) / div_t
                total += (g_s - g_t) ** 2
    return total / count


def test_mmd_by_hand_with_different_widths():
    hs, ht = _hidden(13, width_s=3, width_t=5)
    mask = torch.tensor(MASK)
    for scale in ("width", "length"):
        expected = _mmd_by_hand(hs, ht, hs, ht, scale)
        assert kn.mmd(_t(hs), _t(ht), mask, scale=scale).item() == pytest.approx(expected, rel=1e-12)


def test_mmd_with_a_second_hidden_state_by_hand():
    hs, ht = _hidden(14, width_s=3, width_t=5)
    hs2, ht2 = _hidden(15, width_s=3, width_t=5)
    got = kn.mmd(_t(hs), _t(ht), torch.tensor(MASK), second_s=_t(hs2), second_t=_t(ht2))
    assert got.item() == pytest.approx(_mmd_by_hand(hs, ht, hs2, ht2, "width"), rel=1e-12)


def test_gram_by_hand():
    hs, ht = _hidden(16)
    got = kn.gram(_t(hs), _t(ht), torch.tensor(MASK))
    assert got.item() == pytest.approx(_gram_by_hand(hs, ht, hs, ht), rel=1e-12)


def _gram_by_hand(hs, ht, hs2, ht2) -> float:
    width = hs.shape[-1]
    total = 0.0
    for b in range(2):
        real = _real(MASK, b)
        for p in range(width):
            for q in range(width):
                g_s = sum(hs[b, i, p] * hs2[b, i, q] for i in real) / len(real)
                g_t = sum(ht[b, i, p] * ht2[b, i, q] for i in real) / len(real)
                total += (g_s - g_t) ** 2
    return total / (2 * width * width)


def test_gram_from_token_products_by_hand():
    """Width 16 > 4 x length 3: the loss is built from [L, L] products only, and still equals eq. 16."""
    hs, ht = _hidden(18, width_s=16, width_t=16)
    hs2, ht2 = _hidden(19, width_s=16, width_t=16)
    mask = torch.tensor(MASK)
    got = kn.gram(_t(hs), _t(ht), mask)
    assert got.item() == pytest.approx(_gram_by_hand(hs, ht, hs, ht), rel=1e-12)
    got = kn.gram(_t(hs), _t(ht), mask, second_s=_t(hs2), second_t=_t(ht2))
    assert got.item() == pytest.approx(_gram_by_hand(hs, ht, hs2, ht2), rel=1e-12)


def test_gram_from_token_products_keeps_its_digits_near_the_teacher():
    """In fp32, a student within 0.1% of the teacher (the loss ~1e-12 of the Gram matrices' squared size) still
    gets the loss and its gradient to ~1e-5 of the fp64 values: no catastrophic cancellation."""
    generator = torch.Generator().manual_seed(0)
    teacher = torch.randn(4, 16, 128, generator=generator)
    teacher[..., 5] *= 20  # an outlier dimension, as BERT hidden states have
    student = teacher + 1e-3 * torch.randn(4, 16, 128, generator=generator)
    mask = torch.ones(4, 16, dtype=torch.long)
    mask[1, 9:] = 0

    def loss_and_grad(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        s = student.to(dtype).clone().requires_grad_()
        loss = kn.gram(s, teacher.to(dtype), mask)
        loss.backward()
        return loss.detach().double(), s.grad.double()

    loss32, grad32 = loss_and_grad(torch.float32)
    loss64, grad64 = loss_and_grad(torch.float64)
    assert 0 < loss64.item() < 1e-3
    assert abs(loss32 - loss64).item() < 1e-5 * loss64.item()
    assert (grad32 - grad64).norm().item() < 1e-4 * grad64.norm().item()


def test_cka_by_hand():
    hs, ht = _hidden(17, width_s=3, width_t=5)
    tokens_s = [hs[b, i] for b in range(2) for i in _real(MASK, b)]
    tokens_t = [ht[b, i] for b in range(2) for i in _real(MASK, b)]
    n = len(tokens_s)
    mean_s = [sum(x[k] for x in tokens_s) / n for k in range(3)]
    mean_t = [sum(y[k] for y in tokens_t) / n for k in range(5)]
    xs = [[x[k] - mean_s[k] for k in range(3)] for x in tokens_s]
    ys = [[y[k] - mean_t[k] for k in range(5)] for y in tokens_t]
    # Through the n x n kernels (the kernel form of linear CKA): CKA = <Kx, Ky> / (|Kx| |Ky|).
    kx = [[_dot(a, b) for b in xs] for a in xs]
    ky = [[_dot(a, b) for b in ys] for a in ys]
    inner = sum(kx[i][j] * ky[i][j] for i in range(n) for j in range(n))
    norm_x = math.sqrt(sum(v * v for row in kx for v in row))
    norm_y = math.sqrt(sum(v * v for row in ky for v in row))
    got = kn.cka(_t(hs), _t(ht), torch.tensor(MASK))
    assert got.item() == pytest.approx(1 - inner / (norm_x * norm_y), rel=1e-10)


# ------------------------------------------------------------------------------------------ relations by hand


def _relation_by_hand(xs: np.ndarray, xt: np.ndarray, heads: int) -> float:
    total, rows = 0.0, 0
    ws, wt = xs.shape[-1] // heads, xt.shape[-1] // heads
    for b in range(2):
        real = _real(MASK, b)
        for r in range(heads):
            for i in real:
                rows += 1
                qs = xs[b, i, r * ws : (r + 1) * ws]
                qt = xt[b, i, r * wt : (r + 1) * wt]
                p_s = _softmax([_dot(qs, xs[b, j, r * ws : (r + 1) * ws]) / math.sqrt(ws) for j in real])
                p_t = _softmax([_dot(qt, xt[b, j, r * wt : (r + 1) * wt]) / math.sqrt(wt) for j in real])
                total += sum(pt * (math.log(pt) - math.log(ps)) for pt, ps in zip(p_t, p_s, strict=True))
    return total / rows


@pytest.mark.parametrize("name", ["query_relation", "key_relation", "value_relation"])
def test_relations_by_hand_with_different_widths_and_heads(name):
    xs, xt = _hidden(20, width_s=4, width_t=6)
    fn = KNOWLEDGE[name].fn
    mask = torch.tensor(MASK)
    # Default R = the student's 2 heads (the teacher's 3 heads do not matter).
    assert fn(_t(xs), _t(xt), mask, 2, 3).item() == pytest.approx(_relation_by_hand(xs, xt, 2), rel=1e-12)
    # R = 1 relation head overrides the student's head count.
    got = fn(_t(xs), _t(xt), mask, 2, 3, relation_heads=1)
    assert got.item() == pytest.approx(_relation_by_hand(xs, xt, 1), rel=1e-12)


# ------------------------------------------------------------------------------------------ responses by hand


def test_soft_label_classification_by_hand():
    rng = _rng(30)
    s, t = rng.normal(size=(3, 4)) * 3, rng.normal(size=(3, 4)) * 3
    for temperature in (1.0, 2.0, 8.0):
        total = 0.0
        for b in range(3):
            p_t = _softmax([v / temperature for v in t[b]])
            p_s = _softmax([v / temperature for v in s[b]])
            total += -sum(pt * math.log(ps) for pt, ps in zip(p_t, p_s, strict=True))
        got = kn.soft_label(_t(s), _t(t), temperature)
        assert got.item() == pytest.approx(total / 3, rel=1e-12)
        got_t2 = kn.soft_label(_t(s), _t(t), temperature, t2=True)
        assert got_t2.item() == pytest.approx(total / 3 * temperature**2, rel=1e-12)


def test_hard_label_by_hand_classification_and_regression():
    s = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    labels = [1, 0]
    expected = -sum(math.log(_softmax(list(s[b]))[labels[b]]) for b in range(2)) / 2
    assert kn.hard_label(_t(s), torch.tensor(labels)).item() == pytest.approx(expected, rel=1e-12)
    reg = np.array([[2.5], [0.5]])
    gold = [3.0, 1.5]
    expected_reg = ((2.5 - 3.0) ** 2 + (0.5 - 1.5) ** 2) / 2
    assert kn.hard_label(_t(reg), torch.tensor(gold)).item() == pytest.approx(expected_reg)


# ---------------------------------------------------------------------------------- sentence-level by hand


def test_contrastive_by_hand():
    rng = _rng(40)
    s, t = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    tau = 0.5
    total = 0.0
    for i in range(3):
        sims = [_dot(s[i], t[k]) / (_norm(s[i]) * _norm(t[k])) / tau for k in range(3)]
        total += -math.log(_softmax(sims)[i])
    assert kn.contrastive(_t(s), _t(t), tau=tau).item() == pytest.approx(total / 3, rel=1e-12)


def test_reaug_relation_by_hand():
    rng = _rng(41)
    x, z = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    tau = 0.5
    for normalize in (True, False):
        xn = [v / _norm(v) for v in x] if normalize else list(x)
        zn = [v / _norm(v) for v in z] if normalize else list(z)
        total = 0.0
        for i in range(3):
            q = _softmax([_dot(zn[i], zn[j]) / tau for j in range(3)])
            qbar = _softmax([_dot(xn[i], zn[j]) / tau for j in range(3)])
            total += sum(a * (math.log(a) - math.log(c)) for a, c in zip(q, qbar, strict=True))
        got = kn.reaug_relation(_t(x), _t(z), tau=tau, normalize=normalize)
        assert got.item() == pytest.approx(total / 3, rel=1e-12)


def test_contrastive_prefers_matching_pairs():
    t = torch.randn(6, 8, generator=torch.Generator().manual_seed(0))
    matched = kn.contrastive(t.clone(), t)
    shuffled = kn.contrastive(t[torch.tensor([1, 2, 3, 4, 5, 0])], t)
    assert matched < shuffled


# ------------------------------------------------------------------------------------------------- registry


def test_registry_lists_every_knowledge_with_valid_metadata():
    expected = set(PAPER_KNOWLEDGE) | {
        "soft_label",
        "hard_label",
        "embedding_mse",
        "cka",
        "contrastive",
        "reaug_relation",
    }
    # the built-in losses' knowledge, and each built-in method's own (declared from its folder's loss module)
    from_methods = {n for n, s in KNOWLEDGE.items() if s.function.startswith("kdgrid.core.methods.")}
    assert set(KNOWLEDGE) - from_methods == expected
    for name, spec in KNOWLEDGE.items():
        assert spec.name == name
        assert spec.needs and spec.needs <= FEATURES
        assert spec.category in ("response", "feature", "relation")
        assert spec.fn.__doc__ and "[B" in spec.fn.__doc__, f"{name}'s docstring must give the shapes"
        assert spec.in_paper == (name in PAPER_KNOWLEDGE)


def test_paper_taxonomy_matches_section_4_4():
    feature = [k for k in PAPER_KNOWLEDGE if KNOWLEDGE[k].category == "feature"]
    relation = [k for k in PAPER_KNOWLEDGE if KNOWLEDGE[k].category == "relation"]
    assert feature == ["attention_mse_sum", "attention_ce_mean", "hidden_mse", "cos", "pkd"]
    assert relation == ["mmd", "gram", "query_relation", "key_relation", "value_relation"]
    regions = {k: KNOWLEDGE[k].region for k in PAPER_KNOWLEDGE}
    assert [k for k, r in regions.items() if r == "attention"] == ["attention_mse_sum", "attention_ce_mean"]
    assert sorted(k for k, r in regions.items() if r == "hidden") == [
        "cos",
        "gram",
        "hidden_mse",
        "mmd",
        "pkd",
    ]
    assert [k for k, r in regions.items() if r == "qkv"] == [
        "query_relation",
        "key_relation",
        "value_relation",
    ]
    projected = {k for k in PAPER_KNOWLEDGE if KNOWLEDGE[k].needs_projection}
    assert projected == {"hidden_mse", "cos", "pkd", "gram"}
    assert KNOWLEDGE["value_relation"].needs == {"value"}
    assert KNOWLEDGE["attention_ce_mean"].needs == {"scores"}


# Table 6 of the paper (bert-mini, MRPC), in its order.
TABLE_6 = """attention_ce_mean,cos attention_ce_mean,gram attention_ce_mean,hidden_mse attention_ce_mean,key_relation
attention_ce_mean,mmd attention_ce_mean,pkd attention_ce_mean,query_relation attention_ce_mean,value_relation
attention_mse_sum,cos attention_mse_sum,gram attention_mse_sum,hidden_mse attention_mse_sum,key_relation
attention_mse_sum,mmd attention_mse_sum,pkd attention_mse_sum,query_relation attention_mse_sum,value_relation
cos,key_relation cos,query_relation cos,value_relation gram,key_relation gram,query_relation gram,value_relation
hidden_mse,key_relation hidden_mse,query_relation hidden_mse,value_relation mmd,key_relation mmd,query_relation
mmd,value_relation pkd,key_relation pkd,query_relation pkd,value_relation"""


def test_double_match_pairs_are_table_6():
    assert [",".join(pair) for pair in DOUBLE_MATCH_PAIRS] == TABLE_6.split()
    assert len(set(DOUBLE_MATCH_PAIRS)) == 31


def test_canonical_pair_orders_by_region():
    assert canonical_pair("vr", "attention ce") == ("attention_ce_mean", "value_relation")
    assert canonical_pair("mmd", "key relation") == ("mmd", "key_relation")
    with pytest.raises(ConfigError, match="twice"):
        canonical_pair("gram", "gram")


@pytest.mark.parametrize(
    ("written", "name"),
    [
        ("attention mse", "attention_mse_sum"),
        ("Attention CE", "attention_ce_mean"),
        ("hidden mse", "hidden_mse"),
        ("cos", "cos"),
        ("PKD", "pkd"),
        ("mmd", "mmd"),
        ("gram", "gram"),
        ("query relation", "query_relation"),
        ("key relation", "key_relation"),
        ("value relation", "value_relation"),
        ("vr", "value_relation"),
        ("qr", "query_relation"),
        ("kr", "key_relation"),
        ("attention_mse_sum", "attention_mse_sum"),
        ("value-relation", "value_relation"),
    ],
)
def test_paper_names_map_to_registry_names(written, name):
    assert paper_name(written) == name
    assert canonical_knowledge(written) == name
    assert get_knowledge(written).name == name


def test_unknown_knowledge_lists_the_valid_names():
    with pytest.raises(ConfigError) as err:
        get_knowledge("attention kl")
    message = str(err.value)
    assert "attention kl" in message
    for name in KNOWLEDGE:
        assert name in message


def test_term_names_and_placements():
    pairs = [(1, 3), (2, 6)]
    assert term_pairs("hidden_mse", pairs) == pairs
    assert term_pairs("embedding_mse", pairs) == [(0, 0)]
    assert term_pairs("contrastive", pairs) == [None]
    assert term_name("hidden_mse", (2, 12)) == "hidden_mse@2-12"
    assert term_name("contrastive", None) == "contrastive"


# ------------------------------------------------------------------------------------------ non-finite guard


def test_a_nan_input_gives_a_non_finite_loss_for_the_objectives_guard():
    # `Objective.check_finite` (tests/core/test_objective_core.py) turns this into a DivergenceError.
    hs = torch.full((1, 2, 4), float("nan"))
    value = kn.hidden_mse(hs, torch.zeros(1, 2, 4), torch.ones(1, 2))
    assert not torch.isfinite(value)


# ------------------------------------------------------------------------------- mismatches, shapes, options


def _features(batch=2, length=5, width=128, heads=2, classes=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {
        "scores": torch.randn(batch, heads, length, length, generator=g),
        "hidden": torch.randn(batch, length, width, generator=g),
        "embeddings": torch.randn(batch, length, width, generator=g),
        "query": torch.randn(batch, length, width, generator=g),
        "key": torch.randn(batch, length, width, generator=g),
        "value": torch.randn(batch, length, width, generator=g),
        "logits": torch.randn(batch, classes, generator=g),
        "sentence": torch.randn(batch, width, generator=g),
    }


def test_bert_tiny_against_bert_base_shapes_every_knowledge():
    """2 student heads vs 12 teacher heads, width 128 vs 768: every knowledge yields a finite scalar (a knowledge
    whose method brings the teacher to the student's width gets it there)."""
    student = _features(width=128, heads=2, seed=1)
    teacher = _features(width=768, heads=12, seed=2)
    narrowed = _features(width=128, heads=12, seed=2)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    projection = Projection(128, 768)
    for name in KNOWLEDGE:
        value = compute_knowledge(
            name,
            student,
            narrowed if KNOWLEDGE[name].teacher_at_student_width else teacher,
            mask,
            projection=projection,
            heads_s=2,
            heads_t=12,
            labels=torch.tensor([0, 2]),
        )
        assert value.dim() == 0 and torch.isfinite(value), name


def test_width_mismatch_without_projection_names_both_shapes():
    hs, ht = torch.randn(2, 5, 128), torch.randn(2, 5, 768)
    for name in ("hidden_mse", "cos", "pkd", "gram", "embedding_mse"):
        with pytest.raises(ShapeError) as err:
            KNOWLEDGE[name].fn(hs, ht, torch.ones(2, 5))
        assert "[2, 5, 128]" in str(err.value) and "[2, 5, 768]" in str(err.value), name
        assert "Projection" in str(err.value)
    with pytest.raises(ShapeError, match=r"\[2, 128\].*\[2, 768\]"):
        kn.contrastive(torch.randn(2, 128), torch.randn(2, 768))


def test_sequence_and_mask_mismatches_name_the_shapes():
    with pytest.raises(ShapeError, match=r"\[2, 5, 8\].*\[2, 6, 8\]"):
        kn.mmd(torch.randn(2, 5, 8), torch.randn(2, 6, 8), torch.ones(2, 5))
    with pytest.raises(ShapeError, match=r"mask must be \[B, L\] = \[2, 5\], got shape \[2, 4\]"):
        kn.hidden_mse(torch.randn(2, 5, 8), torch.randn(2, 5, 8), torch.ones(2, 4))
    with pytest.raises(ShapeError, match=r"\[2, 2, 5, 5\].*\[2, 12, 6, 6\]"):
        kn.attention_ce_mean(torch.randn(2, 2, 5, 5), torch.randn(2, 12, 6, 6), torch.ones(2, 5))
    with pytest.raises(ShapeError, match=r"\[B, H, L, L\], got shape \[2, 5, 5\]"):
        kn.attention_mse_sum(torch.randn(2, 5, 5), torch.randn(2, 12, 5, 5), torch.ones(2, 5))
    with pytest.raises(ShapeError, match=r"\[2, 3\].*\[2, 4\]"):
        kn.soft_label(torch.randn(2, 3), torch.randn(2, 4), 1.0)
    with pytest.raises(ShapeError, match=r"labels must be \[B\] = \[2\]"):
        kn.hard_label(torch.randn(2, 3), torch.tensor([0, 1, 2]))


def test_relation_heads_must_divide_both_widths():
    q_s, q_t = torch.randn(2, 5, 128), torch.randn(2, 5, 768)
    with pytest.raises(ConfigError, match=r"relation_heads=5 .*student width 128.*teacher width 768"):
        kn.query_relation(q_s, q_t, torch.ones(2, 5), 2, 12, relation_heads=5)
    with pytest.raises(ConfigError, match="head count 3 does not divide its width 128"):
        kn.key_relation(q_s, q_t, torch.ones(2, 5), 3, 12)
    with pytest.raises(ConfigError, match="relation_heads or the student's head count"):
        kn.value_relation(q_s, q_t, torch.ones(2, 5))
    # relation_heads alone is enough (heads_s is only its default).
    assert torch.isfinite(kn.value_relation(q_s, q_t, torch.ones(2, 5), relation_heads=4))


def test_bad_variants_and_options_are_config_errors():
    hs = torch.randn(2, 5, 8)
    with pytest.raises(ConfigError, match="'sum', 'mean'"):
        kn.pkd(hs, hs, torch.ones(2, 5), scale="total")
    with pytest.raises(ConfigError, match="'scores', 'probs'"):
        kn.attention_mse_sum(torch.randn(2, 2, 5, 5), torch.randn(2, 2, 5, 5), torch.ones(2, 5), on="p")
    with pytest.raises(ConfigError, match="temperature must be > 0"):
        kn.soft_label(torch.randn(2, 3), torch.randn(2, 3), 0.0)
    with pytest.raises(ConfigError, match=r"no option\(s\) \['scale'\]; allowed: \['eps'\]"):
        compute_knowledge("cos", {"hidden": hs}, {"hidden": hs}, torch.ones(2, 5), options={"scale": "sum"})
    with pytest.raises(ConfigError, match="needs the teacher feature 'scores'"):
        compute_knowledge("attention_ce_mean", {"scores": torch.randn(2, 2, 5, 5)}, {}, torch.ones(2, 5))


def test_compute_knowledge_equals_the_direct_call_with_options():
    student, teacher = _features(width=8, seed=3), _features(width=8, seed=4)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    via = compute_knowledge("pkd", student, teacher, mask, options={"scale": "mean"})
    direct = kn.pkd(student["hidden"], teacher["hidden"], mask, scale="mean")
    assert via.item() == pytest.approx(direct.item())
    soft = compute_knowledge("soft_label", student, teacher, temperature=4.0, options={"t2": True})
    assert soft.item() == pytest.approx(
        kn.soft_label(student["logits"], teacher["logits"], 4.0, t2=True).item()
    )
    assert get_knowledge("pkd").options() == {"scale": "sum", "eps": 1e-12}


# ------------------------------------------------------------------------------------------------ gradients


@pytest.mark.parametrize("name", sorted(KNOWLEDGE))
def test_gradients_reach_student_and_projection_never_the_teacher(name):
    student = {k: v.requires_grad_() for k, v in _features(width=16, heads=2, seed=5).items()}
    spec = KNOWLEDGE[name]
    teacher_width = 16 if spec.teacher_at_student_width else 24
    teacher = {k: v.requires_grad_() for k, v in _features(width=teacher_width, heads=4, seed=6).items()}
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    projection = Projection(16, 24)
    value = compute_knowledge(
        name, student, teacher, mask, projection=projection, heads_s=2, heads_t=4, labels=torch.tensor([1, 2])
    )
    value.backward()
    for need in spec.needs:
        grad = student[need].grad
        assert grad is not None and grad.abs().sum() > 0, f"{name}: no gradient reaches the student's {need}"
        assert torch.isfinite(grad).all()
    for feature in teacher.values():
        assert feature.grad is None, f"{name}: a gradient reached the teacher"
    if spec.needs_projection:
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in projection.parameters()), name
    else:
        assert all(p.grad is None for p in projection.parameters()), name


# ------------------------------------------------------------------------------- agreement with TextBrewer


def test_paper_defaults_agree_with_textbrewer_when_installed():
    """The paper used TextBrewer's losses; our defaults reproduce them on padded batches (bias -10000 on keys).

    Skipped unless the ``bench`` extra (textbrewer) is installed. The one documented difference, mmd's masked
    branch dividing by the padded length, is not compared.
    """
    losses = pytest.importorskip("textbrewer.losses")
    g = torch.Generator().manual_seed(0)
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 3 + [0] * 3])

    def scores(heads: int) -> torch.Tensor:
        s = torch.randn(3, heads, 6, 6, generator=g, dtype=torch.float64)
        return s + (1 - mask[:, None, None, :].double()) * -10000.0

    ss, st = scores(2), scores(12)
    hs, ht = (torch.randn(3, 6, 8, generator=g, dtype=torch.float64) for _ in range(2))
    zs, zt = (torch.randn(3, 4, generator=g, dtype=torch.float64) for _ in range(2))
    pairs = [
        (kn.attention_mse_sum(ss, st, mask), losses.att_mse_sum_loss(ss, st, mask)),
        (kn.attention_ce_mean(ss, st, mask), losses.att_ce_mean_loss(ss, st, mask)),
        (kn.hidden_mse(hs, ht, mask), losses.hid_mse_loss(hs, ht, mask)),
        (kn.cos(hs, ht, mask), losses.cos_loss(hs, ht, mask)),
        (kn.pkd(hs, ht, mask), losses.pkd_loss(hs, ht, mask)),
        (kn.gram(hs, ht, mask), losses.fsp_loss([hs, hs], [ht, ht], mask)),
        (kn.mmd(hs, ht, torch.ones(3, 6)), losses.mmd_loss([hs, hs], [ht, ht], None)),
        (kn.soft_label(zs, zt, 4.0), losses.kd_ce_loss(zs, zt, 4.0)),
        (kn.soft_label(zs[:, :1], zt[:, :1], 2.0), losses.kd_mse_loss(zs[:, :1], zt[:, :1], 2.0)),
    ]
    for ours, theirs in pairs:
        assert ours.item() == pytest.approx(theirs.item(), rel=1e-10)


def test_importing_the_library_starts_no_heavy_framework():
    import subprocess
    import sys

    code = (
        "import sys, kdgrid.core.losses, kdgrid.core.matching, kdgrid.core.model.projection; "
        "print(sorted(m for m in ('ray', 'submitit', 'transformers', 'datasets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_registry_reads_the_built_in_declarations_without_torch_and_importing_binds_them():
    import json
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from kdgrid.core import knowledge\n"
        "before = {n: repr(s) for n, s in knowledge.KNOWLEDGE.items()}\n"
        "torch_before = 'torch' in sys.modules\n"
        "import importlib, kdgrid.core.losses\n"
        "for s in list(knowledge.KNOWLEDGE.values()):\n"  # a method's own loss module binds on its own import
        "    importlib.import_module(s.function.partition(':')[0])\n"
        "after = {n: repr(s) for n, s in knowledge.KNOWLEDGE.items()}\n"
        "print(json.dumps([torch_before, before == after, sorted(before), sorted(knowledge._FUNCTIONS)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    torch_before, same, declared, bound = json.loads(out.stdout.strip().splitlines()[-1])
    assert torch_before is False
    assert same is True
    assert declared == bound == sorted(KNOWLEDGE)
    assert {"cka", "reaug_relation", *PAPER_KNOWLEDGE} <= set(declared)


def test_a_declaration_the_registry_cannot_read_is_refused(tmp_path):
    module = tmp_path / "made_up.py"
    module.write_text(
        "WIDTH = ['hidden']\n\n"
        "@register('made_up', needs=WIDTH, needs_projection=False, category='feature', region='hidden',\n"
        "          call_style='pair', source='none')\n"
        "def made_up(s, t, mask):\n"
        "    return s\n"
    )
    with pytest.raises(ValueError, match=r"made_up.py:3: a built-in knowledge's @register arguments must be literals"):
        kn_registry._declarations(module, "made_up")


def test_in_paper_and_the_written_name_come_from_the_paper():
    from kdgrid.paper import PAPER_KNOWLEDGE_LABELS

    assert set(PAPER_KNOWLEDGE_LABELS) == set(PAPER_KNOWLEDGE)
    for name, spec in KNOWLEDGE.items():
        assert spec.paper_label == PAPER_KNOWLEDGE_LABELS.get(name, name.replace("_", " "))
        assert canonical_knowledge(spec.paper_label) == name
    assert get_knowledge("attention mse").paper_label == "attention mse"
    assert not get_knowledge("cka").in_paper


def test_a_knowledge_may_declare_its_teacher_arrives_at_the_students_width(tmp_path):
    module = tmp_path / "narrowed.py"
    module.write_text(
        "@register('narrowed_made_up', needs=['hidden'], needs_projection=False, category='feature',\n"
        "          region='hidden', call_style='pair', source='none', teacher_at_student_width=True)\n"
        "def narrowed_made_up(s, t, mask):\n"
        "    return s\n"
    )
    [spec] = kn_registry._declarations(module, "narrowed")
    assert spec.teacher_at_student_width and not spec.needs_projection
    assert all(not KNOWLEDGE[name].teacher_at_student_width for name in ("hidden_mse", "cka", "pkd"))
