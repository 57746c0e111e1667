"""The SSD mixer that takes the place of a BERT layer's self-attention in an SSM student.

Per token, the mixer projects the input ``u [B, L, d]`` to values ``x = W_x u`` (split into H heads of size
P = d / H, one mixing head per teacher head), and per direction to ``C = W_C u`` and ``B = W_B u`` (``[H, N]``
per token: C plays attention's query, B its key) and a decay logit ``A_log = W_A u [H]`` (``log_a =
-softplus(A_log)``, Phi-Mamba's discrete parameterisation). Each head mixes its values with one ``L x L`` matrix,
then the heads are concatenated and projected back (``W_o``), as attention's heads are.

Bidirectional (the default) is the sum of a forward scan and a flipped backward scan, each with its own B, C and
decay, and one diagonal (Hydra's quasiseparable matrix, Hwang et al. 2024, in its "two scans summed" form):

    M[i, j] = (C_i . B_j) exp(sum_{k=j+1..i} log_a_k)          j < i   (the forward scan)
    M[i, i] = C_i . B_i + D                                          (the forward scan's diagonal, plus D)
    M[i, j] = (C'_i . B'_j) exp(sum_{k=i..j-1} log_a'_k)       j > i   (the backward scan, mirrored)

The backward scan runs the causal scan on the flipped sequence and drops its diagonal term ``C'_i . B'_i x_i``,
so the diagonal is counted once. The causal variant keeps the first two lines (upper triangle 0).

Padding (``mask [B, L]``, 1 = real token) is honoured on both sides: a padded token's value is zeroed (it feeds
no one) and its log decay set to 0 (it neither decays nor breaks the chain between real tokens), and the outputs
at padded tokens are zeroed; so a real token's output equals that of the batch without the padding, wherever the
padding is, and `matrices` returns M with padded rows and columns zeroed, with ``y = M x`` exactly.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from kdgrid.core.model.shapes import SSM_CHUNK
from kdgrid.core.model.ssm.scan import causal_matrix, causal_scan

# The decay logit's bias is drawn so that softplus(bias) (the per-token log decay's magnitude) lies in this range
# at initialisation: a token's influence halves after about 1.4 to 70 tokens (Mamba-2 draws its dt likewise).
DECAY_RANGE = (0.01, 0.5)


def _flip(tensor: torch.Tensor) -> torch.Tensor:
    """The sequence (dimension 1) reversed."""
    return torch.flip(tensor, dims=[1])


class Direction(nn.Module):
    """One scan direction's projections: C (``query``), B (``key``), each ``d -> H N``, and the decay logit
    ``d -> H``."""

    def __init__(self, width: int, heads: int, state: int) -> None:
        super().__init__()
        self.heads, self.state = heads, state
        self.query = nn.Linear(width, heads * state)
        self.key = nn.Linear(width, heads * state)
        self.decay = nn.Linear(width, heads)

    def reset_decay(self, generator: torch.Generator | None = None) -> None:
        """Draw the decay logit's bias as `DECAY_RANGE` says (log-uniform), its weight small."""
        low, high = (math.log(v) for v in DECAY_RANGE)
        magnitude = torch.exp(torch.rand(self.heads, generator=generator) * (high - low) + low)
        with torch.no_grad():
            self.decay.bias.copy_(torch.log(torch.expm1(magnitude)))  # softplus^-1
            self.decay.weight.mul_(0.1)

    def forward(self, u: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """C, B ``[B, L, H, N]`` and the log decay ``[B, L, H]`` (0 on padded tokens)."""
        batch, length, _ = u.shape
        c = self.query(u).view(batch, length, self.heads, self.state)
        b = self.key(u).view(batch, length, self.heads, self.state)
        log_a = -nn.functional.softplus(self.decay(u)) * mask[..., None]
        return c, b, log_a


class SSDMixer(nn.Module):
    """The mixer of the module docstring: ``u [B, L, d] -> [B, L, d]``; `matrices` gives its M per head."""

    def __init__(
        self, width: int, heads: int, state: int, *, causal: bool = False, chunk: int = SSM_CHUNK
    ) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"width {width} is not divisible by {heads} heads")
        self.width, self.heads, self.state, self.causal, self.chunk = width, heads, state, causal, chunk
        self.value = nn.Linear(width, width)
        self.forward_scan = Direction(width, heads, state)
        self.backward_scan = None if causal else Direction(width, heads, state)
        self.skip = nn.Parameter(torch.ones(heads))  # D, per head
        self.output = nn.Linear(width, width)

    def _values(self, u: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch, length, _ = u.shape
        x = self.value(u) * mask[..., None]
        return x.view(batch, length, self.heads, self.width // self.heads)

    def mix(self, u: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The heads' mixed values before the output projection, ``[B, L, d]`` (0 on padded tokens)."""
        mask = mask.to(u.dtype)
        x = self._values(u, mask)
        c, b, log_a = self.forward_scan(u, mask)
        y = causal_scan(x, c, b, log_a, self.chunk) + self.skip[:, None] * x
        if self.backward_scan is not None:
            c2, b2, log_a2 = self.backward_scan(u, mask)
            backward = _flip(causal_scan(_flip(x), _flip(c2), _flip(b2), _flip(log_a2), self.chunk))
            diagonal = torch.einsum("blhn,blhn->blh", c2, b2)[..., None] * x
            y = y + backward - diagonal
        return (y * mask[..., None, None]).reshape(u.shape)

    def forward(self, u: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``W_o`` of the mixed values: the sub-layer's output ``[B, L, d]`` (before the block's residual)."""
        return self.output(self.mix(u, mask))

    def matrices(self, u: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """M per head, ``[B, H, L, L]`` (module docstring), padded rows and columns zeroed: for every head h,
        ``mix(u)[:, :, h] = M[:, h] @ x[:, :, h]`` with ``x`` the (masked) values. ``L^2`` memory per head: for
        the matrix-orientation loss and the knowledge that reads attention, not for the forward pass."""
        mask = mask.to(u.dtype)
        c, b, log_a = self.forward_scan(u, mask)
        matrix = causal_matrix(c, b, log_a)
        matrix = matrix + torch.diag_embed(self.skip[None, :, None].expand(*matrix.shape[:-1]))
        if self.backward_scan is not None:
            c2, b2, log_a2 = self.backward_scan(u, mask)
            # the mirror of the causal matrix of the flipped sequence, strictly above the diagonal
            mirrored = torch.flip(causal_matrix(_flip(c2), _flip(b2), _flip(log_a2)), dims=[-2, -1])
            matrix = matrix + torch.triu(mirrored, diagonal=1)
        keep = mask[:, None, :, None] * mask[:, None, None, :]
        return matrix * keep
