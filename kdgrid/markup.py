"""`plain`: user-given text (a sweep, study or file name, a path, an error message) made safe to print through
Rich, so it is shown as written and never read as markup (``[bold]``, ``[/x]``) or terminal control codes.

Every place that passes a user-given string to a Rich renderer that parses markup (``console.print`` of an
f-string, a progress bar's description or its ``[bold]{task.description}`` template) goes through it; Typer's
``echo`` and Rich ``Text`` objects print text literally and need nothing.
"""

from __future__ import annotations

from rich.markup import escape


def printable(value: object) -> str:
    """``str(value)`` with every control or format character (ESC, newline, BEL, bidi overrides) written as its
    escape sequence (``\\x1b``), so one value stays on one line and cannot drive the terminal."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def plain(value: object) -> str:
    """``value`` as Rich markup that renders exactly as the text: `printable`, then every ``[`` that could open
    a tag escaped (`rich.markup.escape`)."""
    return escape(printable(value))
