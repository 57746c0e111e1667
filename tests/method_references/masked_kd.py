"""MaskedKD (Son, Ryu, Lee & Lee, "The Role of Masking for Efficient Supervised Knowledge Distillation of Vision
Transformers", ECCV 2024), the teacher's input as the authors' code builds it (effl-lab/MaskedKD: ``losses.py``,
``vision_transformer_student.py``, ``models_teacher.py``), written again for a BERT's token batch.

- The student's forward pass on the whole input returns the attention probabilities of its **last** layer; their
  mean over heads, row [CLS], scores every other token: ``a_j = mean_h softmax_j(q_[CLS] . k_j / sqrt(d_h))``.
- The teacher reads [CLS] and the ``keep`` tokens of highest ``a_j`` (``topk``); the others are **removed** from its
  input (their position embeddings were added before the removal, so the kept tokens keep their positions). The
  README's recipe keeps 98 of 196 patches: half the tokens.

For a BERT teacher, removing a token is giving it attention mask 0: no kept token attends to it, and the kept
tokens' outputs are those of the shortened sequence. Here the candidates are the real tokens that are not special
tokens (the image's patches: [CLS] and [SEP] are always kept), and ``k_b = floor(f n_b + 1/2)`` of the n_b
candidates of example b are removed (all images have the same n). Plain torch.
"""

from __future__ import annotations

import torch


def cls_attention(attentions_last_layer: torch.Tensor) -> torch.Tensor:
    """``a_j`` ``[B, L]`` from the last layer's attention probabilities ``[B, H, L, L]``."""
    return attentions_last_layer.mean(dim=1)[:, 0, :]


def removed_positions(scores: torch.Tensor, candidates: torch.Tensor, fraction: float) -> torch.Tensor:
    """``[B, L]`` bool: per example, the ``k_b`` candidates of lowest score (the complement of the kept top-k)."""
    removed = torch.zeros_like(candidates)
    for b in range(scores.shape[0]):
        where = torch.nonzero(candidates[b]).flatten()
        count = int(torch.floor(torch.tensor(len(where) * fraction + 0.5)))
        order = torch.argsort(scores[b, where].double(), stable=True)
        removed[b, where[order[:count]]] = True
    return removed


def teacher_batch(batch: dict[str, torch.Tensor], removed: torch.Tensor) -> dict[str, torch.Tensor]:
    """The teacher's input: the same ids, attention mask 0 at the removed tokens."""
    return {**batch, "attention_mask": batch["attention_mask"].masked_fill(removed, 0)}
