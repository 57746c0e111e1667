"""Capture: recomputed attention scores equal HF's eager attentions; only what is needed is captured."""

from __future__ import annotations

import pytest
import torch
from transformers import BertForSequenceClassification

from kdgrid.core.model.capture import PAD_BIAS, FeatureCapture, attention_scores
from kdgrid.core.model.models import bert_config
from kdgrid.core.model.shapes import StudentShape


def tiny_bert(
    layers: int = 2, width: int = 32, heads: int = 4, seed: int = 0
) -> BertForSequenceClassification:
    torch.manual_seed(seed)
    config = bert_config(
        StudentShape(layers=layers, width=width, heads=heads, ffn=2 * width), 3, vocab_size=100
    )
    return BertForSequenceClassification(config).eval()


def padded_batch() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 100, (3, 7), generator=generator)
    mask = torch.ones(3, 7, dtype=torch.long)
    mask[1, 5:] = 0
    mask[2, 2:] = 0
    ids[mask == 0] = 0
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


def test_softmax_of_recomputed_scores_equals_hf_attentions() -> None:
    model = tiny_bert()
    batch = padded_batch()
    model.config._attn_implementation = "sdpa"  # capture needs no attention maps: the fused kernel will do
    features = FeatureCapture(model, {"scores", "hidden"})(batch)
    model.config._attn_implementation = "eager"  # the maps HF materialises and returns
    reference = model(**batch, output_attentions=True)
    assert len(features.scores) == 3 and features.scores[0] is None
    for layer in (1, 2):
        probs = torch.softmax(features.scores[layer], dim=-1)
        assert probs.shape == (3, 4, 7, 7)
        torch.testing.assert_close(probs, reference.attentions[layer - 1], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(features.logits, reference.logits)


def test_captured_qkv_and_hidden_have_the_agreed_shapes() -> None:
    model = tiny_bert(layers=3, width=48, heads=6)
    batch = padded_batch()
    features = FeatureCapture(model, {"query", "key", "value", "hidden"})(batch)
    assert len(features.hidden) == 4
    assert all(h.shape == (3, 7, 48) for h in features.hidden)
    for name in ("query", "key", "value"):
        tensors = getattr(features, name)
        assert tensors[0] is None and all(t.shape == (3, 7, 48) for t in tensors[1:])
    # The value of layer 1 is the value projection of the embeddings' output.
    attention = model.bert.encoder.layer[0].attention.self
    torch.testing.assert_close(features.value[1], attention.value(features.hidden[0]))
    assert features.sentence.shape == (3, 48)


def test_only_needed_features_are_kept() -> None:
    model = tiny_bert()
    capture = FeatureCapture(model, {"logits"})
    features = capture(padded_batch())
    assert features.hidden == [] and features.scores == [] and features.query == []
    capture.set_needs({"key"})
    features = capture(padded_batch())
    assert features.query == [] and len(features.key) == 3
    capture.remove()
    with pytest.raises(ValueError, match="unknown feature"):
        FeatureCapture(model, {"attention"})


def test_scores_carry_the_padding_bias_on_key_columns_only() -> None:
    q = torch.zeros(1, 3, 4)
    mask = torch.tensor([[1, 1, 0]])
    scores = attention_scores(q, q, mask, heads=2)
    assert scores.shape == (1, 2, 3, 3)
    assert torch.all(scores[..., :2] == 0) and torch.all(scores[..., 2] == PAD_BIAS)


@pytest.mark.parametrize("scores_read", ["inside", "outside"])
def test_scores_under_bf16_autocast_are_float32_like_a_float32_capture(scores_read: str) -> None:
    """Under bf16 autocast Q and K are bf16; the scores built from them are float32, the padding bias exactly
    ``PAD_BIAS`` (bf16 would make it -9984 and round every padded score to a multiple of 64), and the real scores
    differ from a float32 capture's only by the rounding of Q and K, whether a loss reads them inside the autocast
    region or (as the objective does) outside it."""
    model = tiny_bert()
    batch = padded_batch()
    reference = FeatureCapture(model, {"scores"})(batch).scores
    with torch.autocast("cpu", dtype=torch.bfloat16):
        features = FeatureCapture(model, {"scores"})(batch)
        assert features.logits.dtype == torch.bfloat16  # the forward pass did run in bf16
        inside = [features.scores[layer] for layer in (1, 2)] if scores_read == "inside" else None
    scores = inside or [features.scores[layer] for layer in (1, 2)]
    padded = batch["attention_mask"] == 0
    for layer, got in zip((1, 2), scores, strict=True):
        assert got.dtype == torch.float32
        want = reference[layer]
        assert want is not None
        real = ~padded[:, None, None, :].expand_as(want)
        torch.testing.assert_close(got[real], want[real], rtol=0.02, atol=0.05)
        # The bias is exact: padded scores are the bias plus a real-sized score, not a bf16 rounding of their sum.
        torch.testing.assert_close(got[~real], want[~real], rtol=0, atol=0.05)


def test_gradients_flow_through_captured_student_features() -> None:
    model = tiny_bert().train()
    features = FeatureCapture(model, {"scores"})(padded_batch())
    features.scores[2].sum().backward()
    assert model.bert.encoder.layer[1].attention.self.query.weight.grad is not None


def test_scores_are_computed_per_layer_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    import kdgrid.core.model.capture as capture

    computed: list[int] = []
    real = capture.attention_scores

    def counting(query, key, mask, heads):
        computed.append(query.shape[-1])
        return real(query, key, mask, heads)

    monkeypatch.setattr(capture, "attention_scores", counting)
    features = FeatureCapture(tiny_bert(layers=3), {"scores"})(padded_batch())
    assert computed == []  # nothing until a loss asks
    first = features.layer_feature("scores", 3)
    assert features.layer_feature("scores", 3) is first and len(computed) == 1  # computed once, then kept
    assert [s is None for s in features.scores[:]] == [True, False, False, False] and len(computed) == 3


def test_only_the_layers_asked_for_are_kept() -> None:
    model = tiny_bert()
    batch = padded_batch()
    everything = FeatureCapture(model, {"scores", "hidden", "query"})(batch)
    features = FeatureCapture(model, {"scores", "hidden", "query"}, layers={0, 2})(batch)
    assert [h is not None for h in features.hidden] == [True, False, True]
    assert features.query[1] is None and features.scores[1] is None
    for need in ("hidden", "query", "scores"):
        assert torch.equal(features.layer_feature(need, 2), everything.layer_feature(need, 2))
    assert torch.equal(features.embeddings, everything.embeddings)
    assert torch.equal(features.sentence, everything.sentence)  # layer 2 is the last of this 2-layer BERT
    with pytest.raises(ValueError, match=r"hidden of layer 1 was not captured \(captured: 0, 2\)"):
        features.layer_feature("hidden", 1)
    with pytest.raises(ValueError, match="query of layer 1 was not captured"):
        features.layer_feature("query", 1)


def test_a_forward_pass_while_suspended_keeps_nothing_and_capture_works_after() -> None:
    import gc
    import weakref

    model = tiny_bert()
    capture = FeatureCapture(model, {"value"})
    batch = {k: v for k, v in padded_batch().items() if k != "token_type_ids"}
    outputs: list[weakref.ref] = []
    watch = model.bert.encoder.layer[1].attention.self.value.register_forward_hook(
        lambda module, args, output: outputs.append(weakref.ref(output))
    )
    model(**batch)  # a pass that is not the capture's, outside `suspended`: its hooks keep V (and its graph)
    gc.collect()
    assert outputs[-1]() is not None
    with capture.suspended():
        model(**batch)
    gc.collect()
    assert outputs[-1]() is None  # kept by nothing
    assert outputs[0]() is None  # entering `suspended` dropped what the earlier pass left
    watch.remove()
    features = capture(batch)  # and the capture records again
    attention = model.bert.encoder.layer[1].attention.self
    hidden = model(**batch, output_hidden_states=True).hidden_states[1]
    torch.testing.assert_close(features.value[2], attention.value(hidden))
