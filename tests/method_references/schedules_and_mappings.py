"""Three methods that are a rule rather than a loss:

- **All-to-one** (Yu, Wen & Mou, "Revisiting Intermediate-Layer Matching in Knowledge Distillation:
  Layer-Selection Strategy Doesn't Matter (Much)", Findings of IJCNLP-AACL 2025): every student layer is matched
  with one teacher layer; the authors' code takes that layer as an argument, kdgrid fixes the last one.
- **A cosine temperature curriculum** from T0 to T1 over the training progress p in [0, 1] (the half-cosine of
  SGDR, Loshchilov & Hutter, ICLR 2017, and of CTKD's reversal curriculum, applied to the temperature itself):
  ``T(p) = T1 + (T0 - T1) (1 + cos(pi p)) / 2``, with p = k / (S - 1) at the k-th (0-based) of S steps.
- **Teacher assistants** (Mirzadeh, Farajtabar, Li, Levine, Matsukawa & Ghasemzadeh, "Improved Knowledge
  Distillation via Teacher Assistant", AAAI 2020): an assistant of intermediate size is distilled from the
  teacher, then the student is distilled from the assistant, each step plain KD.
"""

from __future__ import annotations

import math


def all_to_one_pairs(student_layers: int, teacher_layers: int) -> list[tuple[int, int]]:
    """Every student layer 1..L_S with the last teacher layer."""
    return [(i, teacher_layers) for i in range(1, student_layers + 1)]


def cosine_temperature(step: int, steps: int, start: float, end: float) -> float:
    """``T(p)`` at the 0-based ``step`` of ``steps``."""
    p = step / (steps - 1)
    return end + (start - end) * (1 + math.cos(math.pi * p)) / 2
