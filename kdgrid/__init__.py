"""kdgrid: knowledge-distillation experiment grids on transformers.

Import is light on purpose: sub-modules bring in torch, Ray or submitit only when they are used.
"""

__version__ = "0.1.0"
