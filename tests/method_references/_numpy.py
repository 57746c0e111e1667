"""Plain numpy helpers the references share (float64, no kdgrid code): softmax, log-softmax, random draws."""

from __future__ import annotations

import numpy as np


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def sigmoid(x: np.ndarray | float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


def draw(shape: tuple[int, ...], seed: int, scale: float = 1.0) -> np.ndarray:
    """A float64 normal draw of ``shape`` (the inputs fed to both kdgrid and a reference)."""
    return scale * np.random.default_rng(seed).normal(size=shape)
