"""Keeping a report up to date while rows arrive: `kdgrid report --watch` and `kdgrid run --report DIR`.

The loop polls the store every ``interval_s`` seconds (a listing of file names: cheap even on a shared filesystem)
and lets `ReportWriter.update` rewrite what changed. It waits for the first row of an empty store, and stops
cleanly: when ``stop`` is set (the run finished, or Ctrl-C / SIGTERM under `watch_until_interrupted`), after the
update in progress, with one last update so the report shows the store's final state.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kdgrid.errors import ConfigError
from kdgrid.report.build import ReportUpdate, ReportWriter
from kdgrid.report.gather import NoRowsError

DEFAULT_INTERVAL_S = 10.0
# The bounds of ``--interval``: below the lower one a watch is a busy loop over the store's listing (a burden on a
# shared filesystem), above the upper one (a day) it never looks again in practice, and a timer cannot take it.
MIN_INTERVAL_S = 0.1
MAX_INTERVAL_S = 86_400.0
# While watching, figures are drawn again at most this often (matplotlib dominates an update of a big store).
FIGURES_EVERY_S = 300.0
# How often the summary pages of a watched report reload themselves in the browser.
PAGE_REFRESH_S = 30


def check_interval(interval_s: float) -> float:
    """``interval_s`` if it is a number of seconds from `MIN_INTERVAL_S` to `MAX_INTERVAL_S`.

    Raises:
        ConfigError: anything else (0, a negative number, nan, inf, 1e308), naming the option and its range.
    """
    if not MIN_INTERVAL_S <= interval_s <= MAX_INTERVAL_S:  # False for nan too
        raise ConfigError(
            f"--interval: expected seconds from {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g}, got {interval_s:g}"
        )
    return interval_s


def describe(update: ReportUpdate, writer: ReportWriter) -> str:
    """One line for the log about an update that changed something."""
    return (
        f"report {writer.out / 'index.html'} updated in {update.seconds:.1f} s: {update.trial_pages} trial "
        f"page(s), {update.tables} table(s), {update.figures} figure file(s) written"
    )


def watch(
    writer: ReportWriter,
    stop: threading.Event,
    *,
    interval_s: float = DEFAULT_INTERVAL_S,
    log: Callable[[str], None] = print,
    every_update: bool = True,
) -> None:
    """Update the report until ``stop`` is set, then once more. A store without rows is waited for.
    ``every_update`` False: log only the first update (beside a run's own progress lines)."""
    waiting_said = False
    updates = 0
    while True:
        stopping = stop.is_set()
        try:
            update = writer.update(final=stopping)
        except NoRowsError as error:
            if not waiting_said:
                log(f"{error}; waiting for rows")
                waiting_said = True
        else:
            if update.changed and (every_update or not updates):
                log(describe(update, writer))
            updates += update.changed
        if stopping:
            return
        stop.wait(interval_s)  # set meanwhile: one last update, then return


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """While inside, Ctrl-C (SIGINT) and SIGTERM set ``stop`` instead of interrupting a write halfway."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def handler(signum: int, frame: object) -> None:
        stop.set()

    for sig in previous:
        signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def watch_until_interrupted(
    writer: ReportWriter, *, interval_s: float = DEFAULT_INTERVAL_S, log: Callable[[str], None] = print
) -> None:
    """`watch` in the foreground until Ctrl-C or SIGTERM (`kdgrid report --watch`)."""
    stop = threading.Event()
    with stop_on_signals(stop):
        watch(writer, stop, interval_s=interval_s, log=log)
    log(f"stopped watching; the report in {writer.out} shows the store as last read")


@contextmanager
def watching(
    writer: ReportWriter | None,
    *,
    interval_s: float = DEFAULT_INTERVAL_S,
    log: Callable[[str], None] = print,
    every_update: bool = True,
) -> Iterator[None]:
    """Run `watch` in a background thread while inside (`kdgrid run --report DIR`); on leaving, stop it after
    one last update. ``writer`` None: do nothing."""
    if writer is None:
        yield
        return
    stop = threading.Event()

    def keep_watching() -> None:
        try:
            watch(writer, stop, interval_s=interval_s, log=log, every_update=every_update)
        except Exception as error:  # the run goes on without its report: say why, once
            log(f"the report in {writer.out} is no longer updated: {type(error).__name__}: {error}")

    thread = threading.Thread(target=keep_watching, daemon=True, name="kdgrid-report")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
