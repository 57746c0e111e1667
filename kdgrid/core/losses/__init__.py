"""Every knowledge loss, one module per family, each loss registered by the `kdgrid.core.knowledge.register`
decorator beside its definition: `attention` (paper eq. 10, 11), `hidden` (eq. 12-14, TinyBERT's embedding MSE),
`hidden_relations` (eq. 15, 16), `qkv_relations` (MiniLMv2), `logits` (eq. 9's soft and hard terms), `cka`,
`sentence` (InfoNCE, ReAugKD); `compute` calls any of them from feature dicts.

Conventions shared by every function (``docs/design.md``, "Loss conventions", restates them with each formula):

* Argument order: student first, teacher second, then the padding mask.
* Shapes: attention scores ``[B, H, L, L]`` (pre-softmax, the padding bias already added on key columns; the
  head counts of student and teacher may differ), hidden states ``[B, L, d]``, queries / keys / values
  ``[B, L, d]`` before the head split, logits ``[B, C]``, sentence vectors ``[B, d]``, mask ``[B, L]`` with 1 for
  a real token and 0 for padding.
* Padding never leaks into a loss: padded positions are replaced (not multiplied) before any arithmetic, so a
  batch with padding of any length and any content (even NaN) gives the same value as the unpadded batch.
* The teacher is a fixed target: every function reads its teacher inputs through
  `kdgrid.core.teacher.targets.fixed` (detached), so gradients reach the student (and a projection applied to the
  student) only, whether or not the caller ran the teacher under ``torch.no_grad()``; inside
  `kdgrid.core.teacher.targets.trainable_targets` (a learnable strategy's target, `kdgrid.core.mapping`) they
  keep the target's graph instead. What a function derives from the teacher alone (a Gram product, a head-mean attention
  distribution, relation log-probabilities) goes through `kdgrid.core.teacher.targets.teacher_side`, so the
  students of one group compute it once per batch.
* Each function returns a 0-dim tensor, unweighted: the objective multiplies by beta / alpha.
* Where the student must be in the teacher's width (``needs_projection`` in the registry) the caller passes the
  student already projected by a `kdgrid.core.model.projection.Projection`; `compute_knowledge` does that for it.

The registry itself (`kdgrid.core.knowledge`) imports no torch: it reads these modules' ``@register``
declarations without importing them, and imports a module only when one of its functions is called. A new
built-in loss is one module here (or a family module's new function); a user's is a plugin (docs/extending.md).
"""

from kdgrid.core.losses.attention import attention_ce_mean, attention_mse_sum
from kdgrid.core.losses.cka import cka
from kdgrid.core.losses.compute import compute_knowledge
from kdgrid.core.losses.hidden import cos, embedding_mse, hidden_mse, pkd
from kdgrid.core.losses.hidden_relations import gram, mmd
from kdgrid.core.losses.logits import hard_label, soft_label
from kdgrid.core.losses.qkv_relations import key_relation, query_relation, value_relation
from kdgrid.core.losses.sentence import contrastive, reaug_relation

__all__ = [
    "attention_ce_mean",
    "attention_mse_sum",
    "cka",
    "compute_knowledge",
    "contrastive",
    "cos",
    "embedding_mse",
    "gram",
    "hard_label",
    "hidden_mse",
    "key_relation",
    "mmd",
    "pkd",
    "query_relation",
    "reaug_relation",
    "soft_label",
    "value_relation",
]
