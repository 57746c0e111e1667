"""An SSM student's shape and name, read without torch: what sweep expansion, the memory estimate and the trial
rules need to know of a state-space student before anything is built.

Names follow Turc et al.'s compact BERTs (L layers, H hidden width, A heads) behind the family prefix:

    ssm-l{layers}-h{width}-a{heads}[-n{state}][-f{ffn}][-causal][-mean]

``state`` is the SSD state size N per head (default: the head size ``width / heads``, so that the mixer's C and B
have the width of a teacher head's query and key, as in MOHAWK's Phi-Mamba), ``ffn`` the feed-forward inner size
(default ``4 x width``), ``-causal`` a forward scan only (default: bidirectional, a forward and a backward scan),
``-mean`` mean pooling over the real tokens (default: the [CLS] token). ``ssm-l6-h384-a12`` is MiniLM-L6's shape.
The canonical name writes every part (``ssm-l6-h384-a12-n32-f1536``), so two spellings of one student are one
trial.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kdgrid.core.shapes import MAX_POSITIONS, TYPE_VOCAB, VOCAB_SIZE, StudentShape
from kdgrid.errors import ConfigError

FAMILY_PREFIX = "ssm-"
CHUNK = 64
"""Tokens per chunk of the SSD scan (`kdgrid.core.model.ssm.scan`): memory per layer grows as ``L x CHUNK``, not
``L^2``."""
POOLINGS = ("cls", "mean")

_NAME_RE = re.compile(
    r"^ssm-l(?P<l>\d+)-h(?P<h>\d+)-a(?P<a>\d+)(?:-n(?P<n>\d+))?(?:-f(?P<f>\d+))?"
    r"(?P<causal>-causal)?(?P<mean>-mean)?$"
)
NAME_FORM = "ssm-l{layers}-h{width}-a{heads}[-n{state}][-f{ffn}][-causal][-mean]"


@dataclass(frozen=True)
class SSMShape(StudentShape):
    """A state-space student: ``layers`` post-LN blocks of width ``width``, each an SSD mixer of ``heads`` mixing
    heads (one per teacher head) with state size ``state`` per head and a feed-forward of inner size ``ffn``.

    Attributes (beyond `StudentShape`'s):
        state: N, the SSD state size per head (the width of B and C per head).
        causal: a forward scan only; else bidirectional (a forward scan plus a flipped backward scan).
        pooling: ``cls`` (the first token, through a dense + tanh pooler as BERT's) or ``mean`` (the mean over
            real tokens, through the same pooler).
    """

    state: int = 0
    causal: bool = False
    pooling: str = "cls"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.state < 1:
            raise ConfigError(f"SSM student {self.name}: state size must be at least 1")
        if self.pooling not in POOLINGS:
            raise ConfigError(f"SSM student pooling {self.pooling!r}: use one of {', '.join(POOLINGS)}")

    @property
    def name(self) -> str:
        suffix = ("-causal" if self.causal else "") + ("-mean" if self.pooling == "mean" else "")
        return f"ssm-l{self.layers}-h{self.width}-a{self.heads}-n{self.state}-f{self.ffn}{suffix}"

    @property
    def directions(self) -> int:
        return 1 if self.causal else 2

    def mixer_param_count(self) -> int:
        """One mixer's parameters: the value and output projections (``d x d`` + bias each), per direction the
        B and C projections (``d x H N`` + bias each) and the decay projection (``d x H`` + bias), and D (``H``)."""
        d, h, n = self.width, self.heads, self.state
        direction = 2 * (d * h * n + h * n) + (d * h + h)
        return 2 * (d * d + d) + self.directions * direction + h

    def param_count(self, num_labels: int = 2, vocab_size: int = VOCAB_SIZE) -> int:
        """Parameters of an `kdgrid.core.model.ssm.model.SSMForSequenceClassification` of this shape: BERT's
        embeddings, per block the mixer, two LayerNorms and the FFN, the pooler and the classifier."""
        d, f = self.width, self.ffn
        embeddings = (vocab_size + MAX_POSITIONS + TYPE_VOCAB) * d + 2 * d
        block = self.mixer_param_count() + 4 * d + (d * f + f) + (f * d + d)
        pooler = d * d + d
        return embeddings + self.layers * block + pooler + self.classifier_param_count(num_labels)

    def flops_per_sequence(self, seq_len: int, num_labels: int = 2) -> int:
        """Forward FLOPs of one sequence (a multiply-add = 2 FLOPs): per block the value / output projections
        (4 L d^2), per direction the B, C and decay projections (2 L d (2 H N + H)) and the chunked scan (per head,
        within chunks of Q = `CHUNK` tokens ``C B^T`` and its product with the values, 2 L Q (N + P); across chunks
        the states in and out, 4 L N P), the FFN (4 L d f); plus pooler and classifier."""
        n_tok, d, f, h, n = seq_len, self.width, self.ffn, self.heads, self.state
        p = d // h
        q = min(CHUNK, n_tok)
        scan = h * (2 * n_tok * q * (n + p) + 4 * n_tok * n * p)
        direction = 2 * n_tok * d * (2 * h * n + h) + scan
        per_block = 2 * (2 * n_tok * d * d + 2 * n_tok * d * f) + self.directions * direction
        head = 2 * (d * d + d * num_labels)
        return self.layers * per_block + head


def is_ssm_name(name: str) -> bool:
    """Whether a student name is of the SSM family (its prefix), well formed or not."""
    return name.strip().lower().startswith(FAMILY_PREFIX)


def ssm_shape(name: str) -> SSMShape:
    """The shape an SSM student name (`NAME_FORM`) stands for; `ConfigError` naming the form otherwise."""
    match = _NAME_RE.match(name.strip().lower())
    if not match:
        raise ConfigError(f"unknown SSM student {name!r}; write it {NAME_FORM!r}, e.g. 'ssm-l6-h384-a12'")
    width, heads = int(match["h"]), int(match["a"])
    if heads < 1 or width % heads:
        raise ConfigError(f"SSM student {name!r}: width {width} is not divisible by its {heads} heads")
    return SSMShape(
        layers=int(match["l"]),
        width=width,
        heads=heads,
        ffn=int(match["f"]) if match["f"] else 4 * width,
        state=int(match["n"]) if match["n"] else width // heads,
        causal=bool(match["causal"]),
        pooling="mean" if match["mean"] else "cls",
    )
