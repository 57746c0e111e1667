"""When the running `kdgrid` command started, for the times commands print (``kdgrid report``'s "updated in
... s").

A command run as its own process (the ``kdgrid`` script, ``python -m kdgrid.cli``: `kdgrid.cli.main` without
arguments) started when the process began loading kdgrid (`kdgrid.LOADED_AT`), so its printed time counts the
loading of the command line and its libraries, about half a second of a small report: the time a user waited
but for the interpreter's own start. A command run inside an existing process (``main([...])``: tests, scripts)
started when it was called. Outside a command, now.
"""

from __future__ import annotations

import time

import kdgrid

_started: float | None = None


def start(*, whole_process: bool) -> None:
    """Mark a command's start: the process's loading of kdgrid when ``whole_process``, else now."""
    global _started
    _started = kdgrid.LOADED_AT if whole_process else time.perf_counter()


def stop() -> None:
    """Forget the mark (a later command in the same process marks its own)."""
    global _started
    _started = None


def started() -> float:
    """The running command's start (`time.perf_counter` seconds); now when no command is running."""
    return time.perf_counter() if _started is None else _started
