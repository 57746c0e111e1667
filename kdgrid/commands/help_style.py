"""How every command's help reads: no type noise and no braces.

Typer prints each option's Python type (``<bool>`` on every flag, ``<path>``, ``<list[str]>``, ``<int>``) and puts
a required argument in braces on the usage line (``kdgrid prefetch [OPTIONS] {sweeps}...``). `PlainHelpCommand`
builds every command's parameters so that a flag shows nothing after its name, an option without its own
metavar shows one plain word (`PLAIN_WORDS`: ``N``, ``NUMBER``, ``TEXT``, ``PATH``), and an argument is named in
capitals, the same in the usage line and in its panel, without a type (``kdgrid prefetch [OPTIONS] SWEEPS...``).
An option or argument that names its own metavar keeps it. `plain_help` gives every command of an app this class.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperOption

PLAIN_WORDS: dict[str, str] = {"int": "N", "float": "NUMBER", "str": "TEXT", "Path": "PATH"}
"""The word an option's value is shown by, per Python type (`TyperOption.bare_type`'s name)."""


class PlainArgument(TyperArgument):
    """An argument named in capitals, with no type beside it and no braces around it in the usage line."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")


def plain_word(option: TyperOption) -> str:
    """The metavar of an option that names none: ``""`` for a flag, else its type's plain word."""
    if option.is_flag:
        return ""
    bare = option.bare_type()
    element = bare[len("list[") : -1] if bare.startswith("list[") else bare
    if option.type_descriptor.is_path:
        return "PATH"
    return PLAIN_WORDS.get(element, element.upper())


class PlainHelpCommand(TyperCommand):
    """A `TyperCommand` whose parameters show no type noise (see the module's docstring)."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if isinstance(option, TyperOption) and option.metavar is None:
            option.metavar = ""  # a flag, as every other
        return option

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, TyperArgument):
                param.__class__ = PlainArgument  # the same parameter, help shown the plain way
                if param.metavar is None and param.name:
                    param.metavar = param.name.upper()
            elif isinstance(param, TyperOption) and param.metavar is None:
                param.metavar = plain_word(param)


def plain_help(app: typer.Typer) -> None:
    """Give every command of ``app`` and of its sub-apps (`typer.Typer.add_typer`) `PlainHelpCommand`, unless a
    command chose its own class."""
    pending = [app]
    while pending:
        current = pending.pop()
        for info in current.registered_commands:
            if info.cls in (None, TyperCommand):
                info.cls = PlainHelpCommand
        pending.extend(group.typer_instance for group in current.registered_groups if group.typer_instance)
