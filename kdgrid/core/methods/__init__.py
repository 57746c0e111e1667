"""The built-in methods, one folder each: their list (`BUILTIN_METHODS`, the folders here) and their loading.

Each folder holds a torch-free ``spec.py`` (its options with their types and ranges, its rules, its registration
with `kdgrid.core.method_registry.register_method` and the other registries, its parameter and memory needs, one
line for the docs' list) and, where the method computes something, a torch module that the training step imports
by name on first use. A built-in method is loaded exactly as a plugin is: importing its ``spec`` registers it.
`load_builtin_methods` imports them all, in the order of their folders' names (the order of their rules' messages),
the first time any ``kdgrid.core`` module is imported (`kdgrid.core.__init__`). So a new method is one new folder
and nothing else: docs/extending.md shows how.

A method's modules import the registries, the core's rooms below it and, only where its spec declares
``depends_on``, another method's (the import contracts in pyproject.toml check it).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil

# The built-in methods: every folder here with a spec, by name (their registration order).
BUILTIN_METHODS: tuple[str, ...] = tuple(
    sorted(
        module.name
        for module in pkgutil.iter_modules(__path__)
        if module.ispkg and importlib.util.find_spec(f"{__name__}.{module.name}.spec") is not None
    )
)


def load_builtin_methods() -> None:
    """Import every built-in method's spec (each registers itself); importing one twice is a no-op."""
    for name in BUILTIN_METHODS:
        importlib.import_module(f"{__name__}.{name}.spec")
