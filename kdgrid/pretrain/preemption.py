"""Stop requests: a preempted or timed-out pre-training run stops at the next step boundary with a checkpoint.

SLURM warns a job before its time limit with ``SIGUSR2`` (submitit's ``--signal=USR2@<slurm_signal_delay_s>``,
the signal trials checkpoint on: `kdgrid.launch.slurm`) and a preempted one with ``SIGTERM`` (``torchrun`` also
forwards ``SIGTERM`` to its workers). While a run trains, `StopSignals` catches both and only records them: a
signal arrives in the middle of a step, on some processes and not others, and a checkpoint must hold a whole step
that every process agrees on. At each step boundary the processes agree with one collective (any process asked
to stop -> all stop, `kdgrid.pretrain.train`), process 0 writes the step checkpoint, and the run returns with
``stopped_by`` set. Who started the run then decides what follows: the SLURM task hands the signal to submitit,
which requeues the job (`kdgrid.pretrain.slurm`); the command exits with `stopped_exit_status`. A requeued or
re-run job resumes from that checkpoint.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

STOP_SIGNALS = (signal.SIGUSR2, signal.SIGTERM)


def stopped_exit_status(signum: int) -> int:
    """The exit status of a run stopped by ``signum`` after its checkpoint: 128 + the signal's number, as a
    shell reports a process the signal ended (SIGTERM: 143)."""
    return 128 + signum


class StopSignals:
    """A context manager that records `STOP_SIGNALS` instead of acting on them, and restores the handlers it
    replaced on exit (submitit's, a shell's). Outside the main thread (signals can only be caught there) it
    records nothing. ``received`` is the first signal's number, or ``None``."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.previous: dict[int, Callable[[int, FrameType | None], Any] | int | None] = {}

    def _record(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self.previous[signum] = signal.signal(signum, self._record)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        self.previous.clear()


def signal_name(signum: int | None) -> str | None:
    return signal.Signals(signum).name if signum is not None else None
