"""``kdgrid methods``: every method kdgrid knows (the built-ins of `kdgrid.core.methods` and the plugins'), one
line each, with its paper and its options."""

from __future__ import annotations

import json
from typing import Annotated

import typer

FLAG = ""  # the help of a flag shows no type (Typer would print <bool>)




def methods(
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print one JSON list (name, title, paper, options, depends_on).", metavar=FLAG),
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


def register(app: typer.Typer) -> None:
    app.command()(methods)
