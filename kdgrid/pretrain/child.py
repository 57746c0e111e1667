"""A pre-training run in a child process: its command line, and running it to its end with its output shown (and
logged) and the stop signals passed on.

Two callers start such children: `kdgrid pretrain --nproc-per-node N` (torchrun, which starts the N processes;
`kdgrid.commands.pretrain`) and `kdgrid run --make-checkpoints` (one ``kdgrid pretrain`` child per checkpoint,
`kdgrid.pretrain.checkpoint_grid`). The recipe travels as a JSON file (`write_recipe`), so the child trains
exactly the recipe its parent checked; how it runs travels as `kdgrid pretrain`'s options (`run_options`).
Nothing here imports torch (`kdgrid pretrain` imports it only once it trains).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from kdgrid.core.pretrained.recipe import PretrainRecipe
from kdgrid.pretrain.preemption import STOP_SIGNALS

if TYPE_CHECKING:
    from kdgrid.pretrain.train import RunSettings

ERROR_PREFIX = "error:"  # how the CLI starts the line of a refusal (`kdgrid.cli.print_error`)


def run_options(settings: RunSettings) -> list[str]:
    """`kdgrid pretrain`'s options that give a child process ``settings`` (how the run executes)."""
    options = [
        f"--micro-batch={settings.micro_batch}",
        f"--checkpoint-every={settings.checkpoint_every}",
        f"--device={settings.device}",
    ]
    options += [f"--stop-after={settings.stop_after}"] if settings.stop_after is not None else []
    options += [f"--work-dir={settings.work_dir}"] if settings.work_dir is not None else []
    options += [] if settings.progress else ["--no-progress"]
    return options


def write_recipe(recipe: PretrainRecipe, path: Path) -> Path:
    """``recipe`` as the JSON file a child reads with ``--recipe``; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(recipe.to_dict(), indent=1, sort_keys=True))
    return path


def pretrain_command(recipe_file: Path, settings: RunSettings, processes: int) -> list[str]:
    """The ``kdgrid pretrain`` command line of a child that makes ``recipe_file``'s recipe with ``processes``
    processes on its node (more than one: through torchrun, ``--nproc-per-node``)."""
    command = [
        sys.executable,
        "-m",
        "kdgrid.cli",
        "pretrain",
        f"--recipe={recipe_file}",
        *run_options(settings),
    ]
    return command + ([f"--nproc-per-node={processes}"] if processes > 1 else [])


@dataclass(frozen=True)
class ChildOutcome:
    """How a child ended: its exit status, its error (its last ``error:`` line, else the last line it wrote to
    standard error; empty when logged nothing or exit status 0) and how long it ran."""

    status: int
    error: str
    seconds: float


def run_child(
    command: Sequence[str],
    env: Mapping[str, str],
    *,
    log: Path | None = None,
    cwd: Path | None = None,
) -> ChildOutcome:
    """Run ``command`` to its end. Its standard output is ours (a terminal keeps its live progress bar); its
    standard error is ours too and, with ``log``, also appended to that file (then its last lines give
    `ChildOutcome.error`). A stop signal (`STOP_SIGNALS`) this process receives meanwhile is passed on to the
    child (from the main thread only, where Python can receive one)."""
    began = time.monotonic()
    last_lines: list[str] = []
    with _log_file(log, command) as sink:
        child = subprocess.Popen(
            list(command),
            env=dict(env),
            cwd=cwd,
            stderr=subprocess.PIPE if sink is not None else None,
            text=True,
            errors="replace",
        )
        copier = None
        if sink is not None:
            copier = threading.Thread(target=_copy_lines, args=(child.stderr, sink, last_lines), daemon=True)
            copier.start()
        with _passing_signals_to(child):
            status = child.wait()
        if copier is not None:
            copier.join()
    return ChildOutcome(status, _error_of(last_lines) if status else "", time.monotonic() - began)


@contextmanager
def _log_file(log: Path | None, command: Sequence[str]) -> Iterator[IO[str] | None]:
    if log is None:
        yield None
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as sink:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        sink.write(f"==== {stamp} {' '.join(command)}\n")
        sink.flush()
        yield sink


def _copy_lines(source: IO[str] | None, sink: IO[str], last_lines: list[str]) -> None:
    """Each line of the child's standard error to ours and to ``sink``; the last few kept in ``last_lines``."""
    assert source is not None
    for line in source:
        sys.stderr.write(line)
        sys.stderr.flush()
        sink.write(line)
        sink.flush()
        if line.strip():
            last_lines.append(line.rstrip("\n"))
            del last_lines[:-50]


def _error_of(lines: list[str]) -> str:
    for line in reversed(lines):
        if line.startswith(ERROR_PREFIX):
            return line[len(ERROR_PREFIX) :].strip()
    return lines[-1].strip() if lines else ""


@contextmanager
def _passing_signals_to(child: subprocess.Popen[str]) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {
        signum: signal.signal(signum, lambda signum, _: child.send_signal(signum)) for signum in STOP_SIGNALS
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
