"""Trial claims: which process is training a trial right now, so that no two processes train the same trial.

Before a job process trains a trial it claims it: ``<store>/_claims/<trial_id>.json`` (the folder starts with
``_``: store readers never look inside), holding the holder's host, pid, executor job id
(`executor_job_id`: ``slurm:<array>_<task>``, ``ray:<tune trial id>`` or ``local:<pid>``), ``started_at`` (UTC)
and a token naming this one claim. While the trial runs a background thread of the job process touches the file
every `heartbeat_s` seconds (its mtime is the heartbeat). The claim is released (deleted) once the trial's row,
done or failed, is written. Another process never trains a claimed trial; it takes a claim over only when the
claim is stale (`stale_reason`): no heartbeat for `stale_after_s` seconds, the holder's process gone on this
host, or the holder's SLURM/Ray job known to have ended. Every takeover is logged in one line naming the trial,
the old holder and why.

Why ``link()`` and not ``open(O_CREAT | O_EXCL)``: the claim is written whole to a unique temporary file first,
then hard-linked to its final name. ``link()`` is atomic on every NFS version (``O_EXCL`` is not on NFSv2 and old
clients), and the claim appears with its content: an ``O_EXCL`` create shows an empty file until the holder
writes, and a crash there leaves a claim naming nobody. A lost NFS reply can make ``link()`` report an error
although it succeeded, so success is decided by the temporary file's link count (2: the link is ours), as
``open(2)`` advises.

Why a takeover cannot be won twice: a process that finds the claim with token ``t`` stale first creates the
lock ``<trial_id>.json.reclaim-<t>`` with the same exclusive ``link()``. Only the one that creates it may
replace the claim (``os.replace``, after checking the claim still carries ``t``); the others leave the trial.
A lock whose own holder died is itself stale and is taken over the same way.

While it trains, the holder also records how far its job got: ``<trial_id>.json.progress`` (`PROGRESS_SUFFIX`,
written whole at each heartbeat when it changed) holds the claim's token and the job's step, steps, epoch and
epochs, so ``kdgrid status`` can say where each running trial is. It is a separate file so that the claim file
itself is never rewritten (a rewrite could overwrite a takeover); a progress file whose token is not the claim's
is another holder's and is not read.

Ages are measured on the store's own clock (the mtime of a file just written there), never against this host's
clock, so nodes whose clocks differ agree on them.

Fencing: every claim carries a ``generation``, 1 for a fresh claim and the taken-over claim's generation + 1 for
a takeover (written into the replacement before it replaces the stale claim, so the file that wins holds it).
A holder re-validates its claim immediately before it writes a row (`HeldClaims.validate`): the claim file must
still carry its token and generation, and its last heartbeat must be younger than the stale limit (older, a taker
may be replacing it at this moment). A row written under a lost claim is recorded ``superseded`` by the worker
(`kdgrid.launch.worker`): kept in the store, never counted. The heartbeat thread marks a claim it finds taken
over as lost (`HeldClaims.lost`), so the worker stops the trial's training. What is left is the instant between
the validation and the row's rename: a holder stopped exactly there (for longer than the stale limit) can still
write a done row next to the taker's; readers detect two done rows of one trial, count it once and name it
(`kdgrid.store.read.duplicate_done_trials`, ``kdgrid store check``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import socket
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Collection, Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kdgrid.env_numbers import positive_from_env
from kdgrid.errors import ConfigError
from kdgrid.store import run_ledger

logger = logging.getLogger(__name__)

CLAIMS_DIR = "_claims"
CLAIM_SUFFIX = ".json"
RECLAIM_INFIX = ".reclaim-"
TMP_PREFIX = ".tmp-"
PROGRESS_SUFFIX = ".progress"  # beside the claim: <trial_id>.json.progress (never a claim name: no .json end)

HEARTBEAT_ENV = "KDGRID_CLAIM_HEARTBEAT_S"
STALE_ENV = "KDGRID_CLAIM_STALE_S"
DEFAULT_HEARTBEAT_S = 30.0
"""Seconds between two heartbeats of a held claim (environment ``KDGRID_CLAIM_HEARTBEAT_S``)."""
DEFAULT_STALE_AFTER_S = 600.0
"""A claim without a heartbeat for this many seconds is stale (``KDGRID_CLAIM_STALE_S``). Generous: a slow
shared filesystem or a paused node must not make a running trial look abandoned; a process that died on the same
host, or a job its executor saw end, is detected at once anyway."""
MAX_RECLAIM_DEPTH = 3  # a lock on a lock on a lock: only crashes in the middle of takeovers nest


def heartbeat_s() -> float:
    """Seconds between two heartbeats (`DEFAULT_HEARTBEAT_S`, or ``KDGRID_CLAIM_HEARTBEAT_S``)."""
    return positive_from_env(HEARTBEAT_ENV, DEFAULT_HEARTBEAT_S)


def stale_after_s() -> float:
    """Seconds without a heartbeat after which a claim is stale (`DEFAULT_STALE_AFTER_S`, or
    ``KDGRID_CLAIM_STALE_S``); at least twice `heartbeat_s`, so one late heartbeat never frees a claim.

    Raises:
        ConfigError: a threshold below twice the heartbeat interval.
    """
    stale, beat = positive_from_env(STALE_ENV, DEFAULT_STALE_AFTER_S), heartbeat_s()
    if stale < 2 * beat:
        raise ConfigError(f"{STALE_ENV}={stale:g} must be at least twice {HEARTBEAT_ENV}={beat:g}")
    return stale


def claims_dir(store: Path | str) -> Path:
    return Path(store) / CLAIMS_DIR


def claim_path(store: Path | str, trial_id: str) -> Path:
    return claims_dir(store) / f"{trial_id}{CLAIM_SUFFIX}"


def slurm_job_holder(job_id: str) -> str:
    """The `executor_job_id` of SLURM job ``job_id`` as sacct and submitit write it (``1234_5`` in an array)."""
    return f"slurm:{job_id}"


def ray_job_holder(trial_id: str) -> str:
    """The `executor_job_id` of the job run by Ray Tune trial ``trial_id``."""
    return f"ray:{trial_id}"


def executor_job_id() -> str:
    """The executor's name for the job this process runs: ``slurm:<array job>_<task>`` (``slurm:<job>`` outside
    an array), ``ray:<Tune trial id>`` inside a Ray Tune trial, else ``local:<pid>``."""
    env = os.environ
    if env.get("SLURM_ARRAY_JOB_ID") and env.get("SLURM_ARRAY_TASK_ID"):
        return slurm_job_holder(f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}")
    if env.get("SLURM_JOB_ID"):
        return slurm_job_holder(env["SLURM_JOB_ID"])
    if "ray" in sys.modules:  # only asked when Ray is already loaded: importing it costs seconds
        try:
            from ray import tune

            with warnings.catch_warnings():  # outside a Tune trial Ray warns and answers None
                warnings.simplefilter("ignore")
                trial_id = tune.get_context().get_trial_id()
        except Exception:  # no Tune context at all
            trial_id = None
        if trial_id:
            return ray_job_holder(trial_id)
    return f"local:{os.getpid()}"


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Claim:
    """One claim file's content, and (when read back) its heartbeat's age.

    Attributes:
        trial_id: the trial claimed (for a takeover lock: the name of the file it locks).
        token: names this claim (a fresh uuid per claim), so a holder only ever releases its own.
        host, pid: the holder's process.
        job_id: the holder's executor job (`executor_job_id`).
        started_at: when the claim was made, UTC ISO 8601 (the holder's clock).
        generation: the fencing token: 1 for a fresh claim, one more than the claim it took over for a takeover.
        heartbeat_age_s: seconds since the last heartbeat on the store's clock; None for a claim not read back.
        heartbeat_at: the last heartbeat (the file's mtime, store clock); None for a claim not read back.
        progress: how far the holder's job got at its last heartbeat (`JobProgress.as_dict`: step, steps, epoch,
            epochs); None before its first batch, or for a claim not read back.
    """

    trial_id: str
    token: str
    host: str
    pid: int
    job_id: str
    started_at: str
    generation: int = 1
    heartbeat_age_s: float | None = field(default=None, compare=False)
    heartbeat_at: float | None = field(default=None, compare=False)
    progress: dict[str, int] | None = field(default=None, compare=False)

    @classmethod
    def mine(cls, trial_id: str, generation: int = 1) -> Claim:
        """A new claim of ``trial_id`` held by this process (``generation``: its fencing token)."""
        return cls(
            trial_id,
            uuid.uuid4().hex,
            socket.gethostname(),
            os.getpid(),
            executor_job_id(),
            _utc_now(),
            generation,
        )

    def to_json(self) -> str:
        payload = asdict(self)
        payload.pop("heartbeat_age_s")
        payload.pop("heartbeat_at")
        payload.pop("progress")
        return json.dumps(payload, sort_keys=True)

    def age_s(self) -> float | None:
        """Seconds since ``started_at`` on this host's clock (None if it cannot be read)."""
        try:
            started = datetime.fromisoformat(self.started_at)
        except ValueError:
            return None
        return max(0.0, (datetime.now(timezone.utc) - started).total_seconds())

    def holder(self) -> str:
        """``host pid <pid> (<job id>)``: who holds it, for messages."""
        return f"{self.host} pid {self.pid} ({self.job_id})"


def _read(path: Path, now: float) -> Claim | None:
    """The claim in ``path`` with its heartbeat age against ``now`` (store clock); None when there is none.
    A file that is not a readable claim counts as one of an unknown holder (it still ages, so it goes stale)."""
    try:
        mtime = path.stat().st_mtime
        text = path.read_text()
    except (FileNotFoundError, NotADirectoryError):
        return None
    age = now - mtime
    try:
        payload: dict[str, Any] = json.loads(text)
        return Claim(str(payload["trial_id"]), str(payload["token"]), str(payload["host"]),
                     int(payload["pid"]), str(payload["job_id"]), str(payload["started_at"]),
                     int(payload.get("generation", 1)), age, mtime)  # fmt: skip
    except (ValueError, KeyError, TypeError, AttributeError):
        return Claim(path.name, f"unreadable-{int(mtime)}", "?", -1, "?", "", 1, age, mtime)


def progress_path(claim_file: Path) -> Path:
    """The progress file beside the claim file ``claim_file``."""
    return claim_file.with_name(claim_file.name + PROGRESS_SUFFIX)


def _read_progress(claim_file: Path, token: str) -> dict[str, int] | None:
    """The progress recorded beside ``claim_file`` by the holder of ``token``; None if none (or another's)."""
    try:
        payload = json.loads(progress_path(claim_file).read_text())
        if payload.get("token") != token:
            return None
        return {key: int(payload[key]) for key in JobProgress.KEYS}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


@dataclass(frozen=True)
class JobProgress:
    """How far a job got: ``step`` of ``steps`` shared batches (all epochs), in ``epoch`` (1-based) of
    ``epochs``, as the core's ``on_step(done, total)`` reports it."""

    KEYS = ("step", "steps", "epoch", "epochs")

    step: int
    steps: int
    epochs: int

    @property
    def epoch(self) -> int:
        """The epoch the step is in: steps 1..S/E are epoch 1, and so on."""
        per_epoch = max(1, self.steps // max(1, self.epochs))
        return min(self.epochs, max(1, -(-self.step // per_epoch)))

    def as_dict(self) -> dict[str, int]:
        return {"step": self.step, "steps": self.steps, "epoch": self.epoch, "epochs": self.epochs}


def _write_progress(store: Path, claim: Claim, progress: JobProgress) -> None:
    """Write ``claim``'s progress file whole (temporary file, rename); a failure only costs the display."""
    record = json.dumps({"token": claim.token, **progress.as_dict()}, sort_keys=True)
    tmp: Path | None = None
    try:
        tmp = _write_temporary(claims_dir(store), record)
        os.replace(tmp, progress_path(claim_path(store, claim.trial_id)))
    except OSError:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def store_now(store: Path | str) -> float:
    """Now on the store's clock: the mtime of a file written there just now (this host's clock if the store
    cannot be written, e.g. a read-only copy)."""
    folder = claims_dir(store)
    probe = folder / f"{TMP_PREFIX}now-{uuid.uuid4().hex}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.touch()
        return probe.stat().st_mtime
    except OSError:
        return time.time()
    finally:
        probe.unlink(missing_ok=True)


def read_claim(store: Path | str, trial_id: str, *, now: float | None = None) -> Claim | None:
    """The claim of ``trial_id``, or None. ``now``: the store's clock (`store_now`), taken here if not given."""
    return _read(claim_path(store, trial_id), store_now(store) if now is None else now)


def read_claims(store: Path | str, trial_ids: Collection[str] | None = None) -> dict[str, Claim]:
    """trial id -> its claim, for every claim in the store (only ``trial_ids`` when given): one listing, one
    look at the store's clock."""
    folder = claims_dir(store)
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return {}
    wanted = [n[: -len(CLAIM_SUFFIX)] for n in names if n.endswith(CLAIM_SUFFIX) and not n.startswith(".")]
    wanted = [t for t in wanted if trial_ids is None or t in trial_ids]
    if not wanted:
        return {}
    now = store_now(store)
    found = {trial_id: _read(claim_path(store, trial_id), now) for trial_id in wanted}
    return {
        trial_id: dataclasses.replace(
            claim, progress=_read_progress(claim_path(store, trial_id), claim.token)
        )
        for trial_id, claim in found.items()
        if claim is not None
    }


def _pid_gone(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: alive, someone else's
        return False
    return False


def stale_reason(
    claim: Claim, *, finished_jobs: Collection[str] = (), stale_after: float | None = None
) -> str | None:
    """Why ``claim`` is stale, or None while it is live.

    Stale: its holder's job is in ``finished_jobs`` (executor job ids an executor saw end), its process is gone
    on this host, or no heartbeat for ``stale_after`` seconds (default `stale_after_s`).
    """
    if claim.job_id in finished_jobs:
        return f"its job {claim.job_id} has ended"
    if claim.host == socket.gethostname() and _pid_gone(claim.pid):
        return f"process {claim.pid} is gone on {claim.host}"
    limit = stale_after_s() if stale_after is None else stale_after
    age = claim.heartbeat_age_s
    if age is not None and age > limit:
        return f"no heartbeat for {age:.0f} s (stale after {limit:g} s)"
    return None


def live_claims(store: Path | str, trial_ids: Collection[str] | None = None) -> dict[str, Claim]:
    """trial id -> claim, for the claims that are not stale (`stale_reason`)."""
    limit = stale_after_s()
    claims = read_claims(store, trial_ids)
    return {t: c for t, c in claims.items() if stale_reason(c, stale_after=limit) is None}


def _write_temporary(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"{TMP_PREFIX}{uuid.uuid4().hex}"
    with open(tmp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    return tmp


def _link_exclusive(tmp: Path, final: Path) -> bool:
    """Give ``tmp``'s file the name ``final`` unless ``final`` exists: True when this call made the link."""
    try:
        os.link(tmp, final)
    except FileExistsError:
        pass
    except OSError:  # NFS: the reply to a link that succeeded can be lost; the link count tells
        pass
    try:
        return os.stat(tmp).st_nlink == 2
    except OSError:
        return False


def _take_over(path: Path, stale: Claim, replacement: Path, depth: int = 0) -> bool:
    """Replace the stale claim ``stale`` in ``path`` by the file ``replacement`` if this process wins the
    takeover lock of ``stale``'s token; False (nothing changed) when another process holds it, the claim
    changed meanwhile, or its holder beat again since it was found stale (it came back: the claim is live)."""
    if depth >= MAX_RECLAIM_DEPTH:
        return False
    lock = path.with_name(f"{path.name}{RECLAIM_INFIX}{stale.token}")
    mine = Claim.mine(lock.name)
    lock_tmp = _write_temporary(path.parent, mine.to_json())
    try:
        if not _link_exclusive(lock_tmp, lock):
            other = _read(lock, lock_tmp.stat().st_mtime)
            if other is None or stale_reason(other) is None:
                return False  # another process is taking this claim over right now
            if not _take_over(lock, other, lock_tmp, depth + 1):
                return False
        current = _read(path, replacement.stat().st_mtime)
        if current is None or current.token != stale.token:
            return False
        beat_since = (current.heartbeat_at or 0.0) > (stale.heartbeat_at or float("inf"))
        if beat_since:
            return False  # its holder beat since it was found stale: it is back, the claim is live
        os.replace(replacement, path)
        return True
    finally:
        held = _read(lock, 0.0)
        if held is not None and held.token == mine.token:
            lock.unlink(missing_ok=True)
        lock_tmp.unlink(missing_ok=True)


def try_claim(store: Path | str, trial_id: str, *, finished_jobs: Collection[str] = ()) -> Claim | None:
    """Claim ``trial_id`` for this process: the new claim, or None when a live claim of another holder exists.

    A stale claim (`stale_reason`; ``finished_jobs``: executor job ids known to have ended) is taken over and the
    takeover logged (a warning naming the trial, the old holder and why); the new claim's generation is the old
    one's + 1 (the fencing token).
    """
    path = claim_path(store, trial_id)
    claim = Claim.mine(trial_id)
    tmp = _write_temporary(path.parent, claim.to_json())
    try:
        for _ in range(3):  # a claim released between our tries: try again
            if _link_exclusive(tmp, path):
                return claim
            current = _read(path, tmp.stat().st_mtime)
            if current is None:
                continue
            reason = stale_reason(current, finished_jobs=finished_jobs)
            if reason is None:
                return None
            successor = replace(claim, generation=current.generation + 1)
            replacement = _write_temporary(path.parent, successor.to_json())
            try:
                if _take_over(path, current, replacement):
                    logger.warning(
                        "kdgrid: reclaimed trial %s from %s: %s", trial_id, current.holder(), reason
                    )
                    run_ledger.note_reclaimed(store, trial_id)
                    return successor
            finally:
                replacement.unlink(missing_ok=True)
            return None
        return None
    finally:
        tmp.unlink(missing_ok=True)


def release(store: Path | str, claim: Claim) -> None:
    """Delete ``claim`` if the store still holds it (never another holder's claim of the same trial)."""
    path = claim_path(store, claim.trial_id)
    current = _read(path, 0.0)
    if current is not None and current.token == claim.token:
        path.unlink(missing_ok=True)
    if _read_progress(path, claim.token) is not None:
        progress_path(path).unlink(missing_ok=True)


class HeldClaims:
    """The claims a job process holds, kept alive by a background heartbeat thread until released.

    Use as a context manager: leaving it (normally, by an exception or `SystemExit`) releases every claim still
    held. `release` lets one go as soon as its trial's row is written. A claim the heartbeat finds taken over is
    moved to `lost` (trial id -> why): its trial's training here should stop, and a row of it is superseded.
    """

    def __init__(
        self, store: Path | str, claims: Iterable[Claim], *, interval_s: float | None = None
    ) -> None:
        self.store = Path(store)
        self.claims: dict[str, Claim] = {claim.trial_id: claim for claim in claims}
        self.lost: dict[str, str] = {}
        self.interval_s = heartbeat_s() if interval_s is None else interval_s
        self.stale_after_s = stale_after_s()
        self._lock = threading.Lock()
        self._progress: JobProgress | None = None  # the job's, noted by `note_progress`
        self._progress_written: JobProgress | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="kdgrid-claim-heartbeat", daemon=True)
        if self.claims:
            self._thread.start()

    def __contains__(self, trial_id: object) -> bool:
        return trial_id in self.claims

    def __iter__(self) -> Iterator[str]:
        return iter(list(self.claims))

    def _beat(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.heartbeat()

    def _lose(self, trial_id: str, why: str) -> None:
        """Move the claim of ``trial_id`` to `lost` (lock held)."""
        self.claims.pop(trial_id, None)
        self.lost[trial_id] = why
        logger.warning("kdgrid: lost the claim of trial %s: %s; its training here stops and a row it still "
                       "writes is recorded superseded (never counted)", trial_id, why)  # fmt: skip

    @staticmethod
    def _taken_by(current: Claim | None) -> str:
        if current is None:
            return "its claim file was removed"
        return f"taken over by {current.holder()} (generation {current.generation})"

    def heartbeat(self) -> None:
        """Touch every held claim; one that another process took over is moved to `lost`, with a warning."""
        with self._lock:
            for trial_id, claim in list(self.claims.items()):
                path = claim_path(self.store, trial_id)
                current = _read(path, 0.0)
                if current is None or current.token != claim.token:
                    self._lose(trial_id, self._taken_by(current))
                    continue
                with contextlib.suppress(OSError):  # a missed heartbeat; the next one may succeed
                    os.utime(path)
            progress = self._progress
            if progress is not None and progress != self._progress_written:
                for claim in self.claims.values():
                    _write_progress(self.store, claim, progress)
                self._progress_written = progress

    def note_progress(self, step: int, steps: int, epochs: int) -> None:
        """The job reached ``step`` of ``steps`` shared batches over ``epochs`` epochs (every held trial shares
        them); recorded beside each claim at the next heartbeat."""
        self._progress = JobProgress(step, steps, epochs)

    def validate(self, trial_id: str) -> str | None:
        """Check, right before a row of ``trial_id`` is written, that this process still holds its claim: None if
        it does, else why not (the claim then moves to `lost`).

        Held: the claim file carries this claim's token and generation, and its last heartbeat is younger than
        the stale limit on the store's clock (an older one may be being taken over at this instant)."""
        with self._lock:
            if trial_id in self.lost:
                return self.lost[trial_id]
            claim = self.claims.get(trial_id)
            if claim is None:
                return "this process holds no claim of it"
            path = claim_path(self.store, trial_id)
            current = _read(path, store_now(self.store))
            if current is None or current.token != claim.token or current.generation != claim.generation:
                self._lose(trial_id, self._taken_by(current))
                return self.lost[trial_id]
            age = current.heartbeat_age_s or 0.0
            if age > self.stale_after_s:
                why = f"no heartbeat for {age:.0f} s (stale after {self.stale_after_s:g} s): it may be taken over"
                self._lose(trial_id, why)
                with contextlib.suppress(OSError):
                    release(self.store, claim)  # let another run train it cleanly
                return why
            return None

    def release(self, trial_id: str) -> None:
        """Let the claim of ``trial_id`` go (its row is written)."""
        with self._lock:
            claim = self.claims.pop(trial_id, None)
        if claim is not None:
            release(self.store, claim)

    def close(self) -> None:
        """Stop the heartbeat and release every claim still held."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        for trial_id in list(self.claims):
            self.release(trial_id)

    def __enter__(self) -> HeldClaims:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def claim_trials(store: Path | str, trial_ids: Iterable[str]) -> tuple[HeldClaims, dict[str, Claim]]:
    """Claim each of ``trial_ids``: (the claims won, heartbeat running; trial id -> the live claim of another
    holder, for those left alone)."""
    won: list[Claim] = []
    taken: dict[str, Claim] = {}
    for trial_id in trial_ids:
        claim = try_claim(store, trial_id)
        if claim is not None:
            won.append(claim)
            continue
        current = read_claim(store, trial_id)
        if current is not None:
            taken[trial_id] = current
    return HeldClaims(store, won), taken
