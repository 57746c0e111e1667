"""The SSD scan (Mamba-2's state-space duality, Dao & Gu, ICML 2024) in chunks, and the mixing matrix it applies.

One head of a causal SSD layer maps values ``x [L, P]`` to ``y [L, P]`` through a lower-triangular matrix

    M[i, j] = (C_i . B_j) * exp(sum_{k=j+1..i} log_a_k)      for j <= i (0 above the diagonal)
    y = M x  (+ D x, added by the mixer)

with ``C_i, B_j`` of the state size N and a per-token log decay ``log_a_k = -softplus(A_log_k) <= 0`` (Phi-Mamba's
"discrete" multi-head Mamba-2, as MOHAWK materialises it: Bick et al., NeurIPS 2024). Materialising M costs
``L^2`` per head; the scan computes ``y`` in chunks of Q tokens instead: within a chunk the ``Q x Q`` block of M,
across chunks an ``N x P`` state carried forward, so memory grows as ``L x Q``, not ``L^2``.

Shapes (every function): ``x [B, L, H, P]``, ``c, b [B, L, H, N]``, ``log_a [B, L, H]``; matrices
``[B, H, L, L]`` (row i = output token, column j = input token). Padding is the caller's (the mixer zeroes the
padded values and their log decays, `kdgrid.core.model.ssm.mixer`). Everything is differentiable and runs in the
inputs' dtype on any device.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kdgrid.core.model.shapes import SSM_CHUNK


def segment_sums(log_a: torch.Tensor) -> torch.Tensor:
    """``[..., T] -> [..., T, T]``: ``S[..., i, j] = sum_{k=j+1..i} log_a[..., k]`` for ``j <= i`` (0 on the
    diagonal) and ``-inf`` above it, so ``exp(S)`` is the decay from token j to token i. Built by a cumulative sum
    of a masked copy rather than as a difference of two cumulative sums, which would lose the small sums of nearby
    tokens to cancellation in long sequences."""
    length = log_a.shape[-1]
    # [..., k, j] = log_a[..., k] (row k), kept where k > j: summing rows k = j+1..i gives S[i, j]
    repeated = log_a[..., None, :].expand(*log_a.shape, length).transpose(-1, -2)
    strictly_below = torch.ones(length, length, dtype=torch.bool, device=log_a.device).tril(-1)
    sums = torch.cumsum(repeated.masked_fill(~strictly_below, 0.0), dim=-2)
    on_or_below = torch.ones(length, length, dtype=torch.bool, device=log_a.device).tril()
    return sums.masked_fill(~on_or_below, float("-inf"))


def causal_matrix(c: torch.Tensor, b: torch.Tensor, log_a: torch.Tensor) -> torch.Tensor:
    """The causal mixing matrix ``M [B, H, L, L]`` of the module docstring (without D)."""
    decay = torch.exp(segment_sums(log_a.transpose(1, 2)))  # [B, H, L, L]
    return torch.einsum("bihn,bjhn->bhij", c, b) * decay


def causal_scan(
    x: torch.Tensor, c: torch.Tensor, b: torch.Tensor, log_a: torch.Tensor, chunk: int = SSM_CHUNK
) -> torch.Tensor:
    """``y = M x`` per head (``[B, L, H, P]``), computed in chunks of ``chunk`` tokens (module docstring)."""
    batch, length, heads, width = x.shape
    pad = (-length) % chunk
    # tokens added to fill the last chunk carry nothing (x, b, c = 0) and do not decay (log_a = 0); their outputs
    # are cut off
    if pad:
        x, c, b = (F.pad(t, (0, 0, 0, 0, 0, pad)) for t in (x, c, b))
        log_a = F.pad(log_a, (0, 0, 0, pad))
    chunks = (length + pad) // chunk
    x = x.reshape(batch, chunks, chunk, heads, width)
    c = c.reshape(batch, chunks, chunk, heads, -1)
    b = b.reshape(batch, chunks, chunk, heads, -1)
    log_a = log_a.reshape(batch, chunks, chunk, heads).permute(0, 3, 1, 2)  # [B, H, chunks, Q]
    # within each chunk: the Q x Q block of M applied to the chunk's values
    block = torch.einsum("bcihn,bcjhn->bhcij", c, b) * torch.exp(segment_sums(log_a))
    y = torch.einsum("bhcij,bcjhp->bcihp", block, x)
    # each chunk's contribution to the state at its end: sum_j exp(sum_{k=j+1..end} log_a_k) B_j x_j^T
    cumulative = torch.cumsum(log_a, dim=-1)  # [B, H, chunks, Q]
    total = cumulative[..., -1]  # [B, H, chunks]
    to_end = torch.exp(total[..., None] - cumulative)  # decay from each token to its chunk's end
    states = torch.einsum("bcjhn,bhcj,bcjhp->bchnp", b, to_end, x)
    # the state entering each chunk, carried across chunks (a short loop: L / Q steps)
    entering = []
    state = torch.zeros_like(states[:, 0])
    for index in range(chunks):
        entering.append(state)
        state = torch.exp(total[:, :, index])[..., None, None] * state + states[:, index]
    carried = torch.stack(entering, dim=1)  # [B, chunks, H, N, P]
    # its effect inside the chunk: C_i . (decay from the chunk's start to i) state
    from_start = torch.exp(cumulative).permute(0, 2, 3, 1)  # [B, chunks, Q, H]
    y = y + torch.einsum("bcihn,bchnp->bcihp", c, carried) * from_start[..., None]
    return y.reshape(batch, chunks * chunk, heads, width)[:, :length]
