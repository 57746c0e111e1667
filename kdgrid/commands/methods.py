"""``kdgrid methods``: every method kdgrid knows (the built-ins of `kdgrid.core.methods` and the plugins'), one
line each, with its paper, its options and its presets (what ``preset: NAME`` sets on its trials)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

FLAG = ""  # the help of a flag shows no type (Typer would print <bool>)




def methods(
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print one JSON list (name, title, paper, options, depends_on, presets).", metavar=FLAG),
    ] = False,
) -> None:
    """List the methods kdgrid knows: the built-in ones and those a plugin registers, each with its one line,
    its paper and the trial options that turn it on or set it (docs/methods.md).

    Example: kdgrid methods, then name one's options in a sweep file's options"""
    from kdgrid.core.method_registry import registered_methods

    found = registered_methods()
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "name": spec.name,
                        "title": spec.title,
                        "paper": spec.paper,
                        "options": list(spec.options),
                        "depends_on": list(spec.depends_on),
                        "presets": {preset.name: _preset_values(preset) for preset in spec.presets},
                    }
                    for spec in found
                ],
                indent=1,
            )
        )
        return
    for spec in found:
        options = f" [options: {', '.join(spec.options)}]" if spec.options else ""
        print(f"{spec.name:<18} {spec.title}{options}")
        print(f"{'':<18} paper: {spec.paper}")
        for preset in spec.presets:
            values = ", ".join(f"{key}={value}" for key, value in _preset_values(preset).items()) or "nothing"
            print(f"{'':<18} preset {preset.name}: sets {values}")


def _preset_values(preset: Any) -> dict[str, Any]:
    """A `kdgrid.core.method_registry.Preset`'s values: ``{field: value}`` and ``{"options.NAME": value}``."""
    return {**dict(preset.fields), **{f"options.{name}": value for name, value in preset.options}}


def register(app: typer.Typer) -> None:
    app.command()(methods)
