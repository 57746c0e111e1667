"""A study's named recipe (``preset: paper``): each method's preset values set on the trials that use it.

A sweep file may write ``preset: NAME`` at its top level (every study) or in a study (that study; it replaces the
top level's). Each registered method may declare a preset of that name (`kdgrid.core.method_registry.Preset`):
its Trial fields and options. For each grid point of the study, once the point's trial is built, every method
the trial uses (``MethodSpec.uses``, narrowed by the preset's ``applies``) sets its preset's values on it, except
those the study itself writes: its own ``fixed``, any axis, any override's ``set`` and the point's ``include``
entry keep theirs (a key written there is *protected*). What the sweep's top-level ``fixed`` (or an ``extends``
file) sets is the shared recipe, which a preset replaces. The values become the trial's own (its id says what
ran); `kdgrid plan` lists, per study, what a preset set. A preset named in a study none of whose trials uses a
method it covers is refused (it would silently set nothing); a top-level preset reaches only the studies that
use such a method.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kdgrid.suggest import did_you_mean
from kdgrid.trial import Trial

PRESET_KEY = "preset"


def preset_problem(value: Any) -> str | None:
    """Why ``preset: value`` is not allowed (None when it is): the name of a registered method's preset."""
    from kdgrid.core.method_registry import preset_names  # the registries: only when a preset is written

    names = preset_names()
    if isinstance(value, str) and value in names:
        return None
    hint = did_you_mean(value, names) if isinstance(value, str) else ""
    return f"unknown preset {value!r}; allowed: {', '.join(names) or '(none registered)'}{hint}"


def protected_keys(settings: Iterable[Mapping[str, Any]]) -> set[str]:
    """The keys ``settings`` (raw mappings of Trial fields) write: field names, and ``options.NAME`` for each
    option of an ``options`` mapping (or of each mapping in an axis' list of them)."""
    keys: set[str] = set()
    for mapping in settings:
        for field, value in mapping.items():
            keys.add(str(field))
            if field == "options":
                for options in value if isinstance(value, list) else [value]:
                    if isinstance(options, Mapping):
                        keys.update(f"options.{name}" for name in options)
    return keys


def preset_values(trial: Trial, name: str, protected: set[str]) -> dict[str, Any]:
    """What preset ``name`` sets on ``trial``: ``{field: value}`` and ``{"options.NAME": value}`` of every method
    the trial uses with a preset of that name (applying to it), less the ``protected`` keys. Raw values, as a
    sweep file writes them (the caller canonicalises them)."""
    from kdgrid.core.method_registry import presets_named

    values: dict[str, Any] = {}
    for spec, preset in presets_named(name):
        if spec.uses is None or not spec.uses(trial):
            continue
        if preset.applies is not None and not preset.applies(trial):
            continue
        for field, value in preset.fields:
            if field not in protected:
                values[field] = value
        for option, value in preset.options:
            if f"options.{option}" not in protected:
                values[f"options.{option}"] = value
    return values


def as_settings(values: Mapping[str, Any]) -> dict[str, Any]:
    """``preset_values``' keys as Trial settings: ``options.NAME`` keys gathered into one ``options`` mapping."""
    settings: dict[str, Any] = {k: v for k, v in values.items() if not k.startswith("options.")}
    options = {k.removeprefix("options."): v for k, v in values.items() if k.startswith("options.")}
    if options:
        settings["options"] = options
    return settings
