"""The `kdgrid` command line: one Typer app; each area's commands live in `kdgrid.commands.<area>`.

Errors a user can act on are printed as one message, without a traceback, with exit status 2: a `KdgridError`,
and an `OSError` from the filesystem (a path that is a file where a directory is needed, a full disk, no
permission), named by its file. The message is printed as plain text, never read as Rich markup, so text such
as ``[bold]`` or ``[/`` in a file name or a YAML value is shown as it is.

Before any command runs, the plugins of the installed entry points and of ``KDGRID_PLUGINS`` are loaded
(`kdgrid.plugins`), so the knowledge functions, strategies and options they register are known to every command; a
plugin that cannot be imported is such an error, except for help (``kdgrid --help``, ``kdgrid run --help``): it is
then a warning and the help is shown.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.text import Text

from kdgrid import command_clock
from kdgrid.commands import analysis, assets, core, export, methods, prefetch, pretrain, report, store, sweep
from kdgrid.commands.help_style import plain_help
from kdgrid.errors import EXIT_USER_ERROR, KdgridError
from kdgrid.markup import printable
from kdgrid.plugins import PluginError, load_plugins

app = typer.Typer(
    name="kdgrid",
    help=(
        "Knowledge-distillation grids on transformers: write a grid as a sweep file, run it on local CPUs/GPUs,"
        " Ray Tune or SLURM, keep every result in a Parquet store, resume what is missing, and regenerate the"
        " tables of 'Knowledge Distillation of Transformer-based Language Models Revisited'."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode="rich",
)

for area in (sweep, prefetch, core, methods, pretrain, analysis, report, store, assets, export):
    area.register(app)
plain_help(app)  # help without type noise (<bool>, <path>) or braces, on every command


def error_message(error: BaseException) -> str:
    """What the CLI prints after ``error:`` for an error the user can act on."""
    if isinstance(error, OSError) and not isinstance(error, KdgridError):
        what = error.strerror or type(error).__name__
        names = [str(name) for name in (error.filename, error.filename2) if name is not None]
        return f"{' -> '.join(names)}: {what}" if names else f"{what}: {error}"
    return str(error)


def print_error(error: BaseException) -> None:
    """``error: <message>`` on stderr, the message as plain text (a `Text`, never parsed as markup), control
    characters of user text (an escape sequence in a file name) shown as escapes (`kdgrid.markup.printable`)."""
    message = "\n".join(printable(line) for line in error_message(error).split("\n"))
    line = Text.assemble(("error:", "bold red"), " ", message)
    Console(stderr=True).print(line, highlight=False, soft_wrap=True)


def wants_help(argv: list[str] | None) -> bool:
    """Whether the command line only asks for help (no arguments, ``--help`` or ``-h``)."""
    args = sys.argv[1:] if argv is None else argv
    return not args or "--help" in args or "-h" in args


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``argv`` None: this process's command line, and its clock counts from the
    process's loading of kdgrid: `kdgrid.command_clock`)."""
    command_clock.start(whole_process=argv is None)
    try:
        try:
            load_plugins()  # entry points and KDGRID_PLUGINS: their names are known to every command
        except PluginError as error:
            if not wants_help(argv):
                raise
            # help needs no plugin: say what is broken and show it anyway
            Console(stderr=True).print(
                Text(f"warning: {error_message(error)}"), highlight=False, soft_wrap=True
            )
        app(args=argv, prog_name="kdgrid")
    except (KdgridError, OSError) as error:
        print_error(error)
        sys.exit(EXIT_USER_ERROR)
    finally:
        command_clock.stop()


if __name__ == "__main__":
    main()
