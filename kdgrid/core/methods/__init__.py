"""The built-in methods, one folder each: the one list of them (`BUILTIN_METHODS`) and their loading.

Each folder holds a torch-free ``spec.py`` (its options with their types and ranges, its rules, its registration
with `kdgrid.core.method_registry.register_method` and the other registries, its parameter and memory needs, one
line for the docs' list) and, where the method computes something, a torch module that the training step imports
by name on first use. A built-in method is loaded exactly as a plugin is: importing its ``spec`` registers it.
`load_builtin_methods` imports them all, in this order (the order of their rules' messages), the first time any
``kdgrid.core`` module is imported (`kdgrid.core.__init__`); docs/extending.md shows how a new method is added as one
folder of its own.

A method's modules import the registries, the core's rooms below it and, only where its spec declares
``depends_on``, another method's (the import contracts in pyproject.toml check it).
"""

from __future__ import annotations

import importlib

# The built-in methods, by folder name, in registration order.
BUILTIN_METHODS: tuple[str, ...] = (
    "lad",
    "alp_kd",
    "ctkd",
    "learned_lr",
    "lkd",
    "adakd",
    "projectors",
    "dot",
    "dual_head",
    "masking",
    "grad_split",
    "layer_curriculum",
    "reaugkd",
)


def load_builtin_methods() -> None:
    """Import every built-in method's spec (each registers itself); importing one twice is a no-op."""
    for name in BUILTIN_METHODS:
        importlib.import_module(f"{__name__}.{name}.spec")
