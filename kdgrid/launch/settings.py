"""Executor settings: prefixed keys validated by name (shared by the SLURM and Ray executors).

Executor settings carry a prefix (``slurm_partition``, ``ray_gpus_per_job``) so that one flat mapping of flags can
reach any executor; an unknown key is refused at once, naming it and the allowed ones (as submitit does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kdgrid.errors import ConfigError


def normalize_settings(
    settings: Mapping[str, Any], *, prefix: str, allowed: Sequence[str], source: str
) -> dict[str, Any]:
    """Strip ``prefix`` (``slurm_``) from each key and check every key is allowed.

    Keys may come with or without the prefix (``slurm_partition`` or ``partition``). ``source`` names where the
    settings came from (a profile file, "flags") for the error message. Returns ``{unprefixed key: value}``.
    """
    normalized: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in settings.items():
        name = key[len(prefix) :] if key.startswith(prefix) else key
        if name not in allowed:
            unknown.append(key)
        else:
            normalized[name] = value
    if unknown:
        names = ", ".join(f"{prefix}{name}" for name in allowed)
        raise ConfigError(f"{source}: unknown setting(s) {', '.join(sorted(unknown))}; allowed: {names}")
    return normalized
