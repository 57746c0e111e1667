"""Making a fixture teacher a real teacher in a second of CPU: it beats the majority class by far and its outputs
follow a declared class order (what a teacher gate checks).

The generated GLUE rows (`tests.hub.hub_cache.generate_split`) carry their label as a marker word in the first
sentence. A random deep, narrow BERT does not leave its loss plateau in a few hundred CPU steps (measured: 12
layers x 48, chance accuracy after 80 AdamW steps at several learning rates), so the encoder is set to read
markers and only the head is fine-tuned:

- `plant_marker_reader`: the word embeddings are faint beside the position embeddings except the marker words',
  each a spike on its own dimension; every layer attends uniformly (query and key weights zero) and passes values
  through unchanged (value and attention output weights the identity, feed-forward output zero), so the
  residual stream of every token, [CLS] included, carries the sequence's mean, where the marker dominates.
- `fine_tune_head`: the pooler and the classifier are trained on the frozen encoder's [CLS] states (cross-entropy
  on the teacher's own output indices, or mean squared error for a one-output head), full batch, seeded.

Tokenized with bert-base-uncased's WordPiece vocabulary, as kdgrid tokenizes them (the fixture repos ship that
``vocab.txt``). The weights stay a plain `BertForSequenceClassification`: kdgrid loads and runs them unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import BertForSequenceClassification, BertTokenizerFast

Texts = Sequence[tuple[str, ...]]  # one tuple per example: its text columns (one sentence or a pair)

HEAD_STEPS = 150  # full-batch AdamW steps on the head: every fixture teacher reaches >= 0.9 on dev (tested)
HEAD_LEARNING_RATE = 1e-2
FAINT_WORDS = 0.1  # word embeddings scaled by this, beside the position embeddings
MARKER_SPIKE = 1.0  # a marker word's embedding on its dimension (the others are ~0.002)
MAX_LENGTH = 32  # a generated pair is shorter (`tests.hub.hub_cache.SENTENCE_WORDS`): nothing is truncated


@functools.cache
def tokenizer(vocab_file: Path) -> BertTokenizerFast:
    """bert-base-uncased's tokenizer from the folder of ``vocab_file`` (the offline MiniLM teacher's)."""
    return BertTokenizerFast.from_pretrained(str(vocab_file.parent))


def encode(vocab_file: Path, texts: Texts) -> dict[str, torch.Tensor]:
    columns = list(zip(*texts, strict=True))
    return dict(
        tokenizer(vocab_file)(
            *[list(c) for c in columns],
            padding=True,
            truncation=True,
            max_length=MAX_LENGTH,
            return_tensors="pt",
        )
    )


@torch.no_grad()
def plant_marker_reader(
    model: BertForSequenceClassification, vocab_file: Path, markers: Sequence[str]
) -> None:
    """Set ``model``'s encoder to carry the marker word of a sequence into its [CLS] state (module docstring);
    marker k spikes dimension k. The head is left as it is."""
    width = model.config.hidden_size
    ids = tokenizer(vocab_file).convert_tokens_to_ids(list(markers))
    assert len(markers) <= width and tokenizer(vocab_file).unk_token_id not in ids, markers
    words = model.bert.embeddings.word_embeddings.weight
    words.mul_(FAINT_WORDS)
    for dimension, token in enumerate(ids):
        words[token].zero_()
        words[token, dimension] = MARKER_SPIKE
    identity = torch.eye(width)
    for layer in model.bert.encoder.layer:
        attention = layer.attention.self
        for linear in (attention.query, attention.key):
            linear.weight.zero_()
            linear.bias.zero_()
        for linear in (attention.value, layer.attention.output.dense):
            linear.weight.copy_(identity)
            linear.bias.zero_()
        layer.output.dense.weight.zero_()
        layer.output.dense.bias.zero_()


def fine_tune_head(
    model: BertForSequenceClassification,
    vocab_file: Path,
    texts: Texts,
    targets: Sequence[float],
    *,
    seed: int,
) -> None:
    """Train the pooler and classifier of ``model`` on (``texts``, ``targets``) over the frozen encoder's [CLS]
    states: the same bytes on every run (seeded, one thread). Leaves the model in eval mode."""
    regression = model.config.num_labels == 1
    model.eval()
    with torch.no_grad():
        states = model.bert(**encode(vocab_file, texts)).last_hidden_state[:, 0]
    labels = torch.tensor(targets, dtype=torch.float32 if regression else torch.long)
    head = [*model.bert.pooler.parameters(), *model.classifier.parameters()]
    optimizer = torch.optim.AdamW(head, lr=HEAD_LEARNING_RATE, weight_decay=0.0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for _ in range(HEAD_STEPS):
            logits = model.classifier(model.bert.pooler.activation(model.bert.pooler.dense(states)))
            if regression:
                loss = torch.nn.functional.mse_loss(logits.squeeze(-1), labels)
            else:
                loss = torch.nn.functional.cross_entropy(logits, labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()


@torch.no_grad()
def predict(model: BertForSequenceClassification, vocab_file: Path, texts: Texts) -> torch.Tensor:
    """``[N, num_labels]`` logits of ``texts`` (eval mode)."""
    model.eval()
    return model(**encode(vocab_file, texts)).logits
