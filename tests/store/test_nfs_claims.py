"""Claims on a real shared filesystem: a store exported over NFS on this machine (loopback only) and mounted twice
with attribute caching on (two clients: ``nosharecache``, each with its own caches), one `kdgrid run` on each
mount at once, one of them under a clock skewed by `faketime`, and the first one stalled past the stale limit
in the middle: every trial ends with exactly one counted done row, none lost.

It needs what a real cluster has and a container usually lacks: root, a kernel with the NFS server and client
(``nfsd`` and ``nfs`` in /proc/filesystems, or modules to load), Debian's ``nfs-kernel-server`` (``exportfs``,
``rpc.nfsd``, ``rpc.mountd``), ``mount.nfs`` and ``faketime``. Where one is missing the test is skipped, and the
skip's reason, printed in the test summary, says which. The guarantee it checks, and what it assumes of the
filesystem and the clocks, is stated in docs/running.md ("Claims on a shared filesystem").
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kdgrid.grid import load_sweep
from kdgrid.store import read_store
from kdgrid.store.read import duplicate_done_trials
from tests.launch.fakes import KDGRID_WITH_FAKES, store_rows

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("nfs")]

HEARTBEAT_S, STALE_S = 1.0, 4.0
ATTRIBUTE_CACHE_S = 0.5  # actimeo: under the heartbeat interval, as docs/running.md asks
SKEW = "+30s"  # the second client's clock, far past the stale limit: ages must come from the server's clock
TOOLS = ("exportfs", "rpc.nfsd", "rpc.mountd", "mount.nfs", "faketime")


def _filesystems() -> set[str]:
    try:
        return {line.split()[-1] for line in Path("/proc/filesystems").read_text().splitlines() if line.split()}
    except OSError:
        return set()


def nfs_unavailable() -> str | None:
    """Why this machine cannot serve and mount NFS on loopback, or None when it can."""
    if os.geteuid() != 0:
        return "serving NFS needs root"
    for module in ("nfsd", "nfs"):
        if module not in _filesystems() and shutil.which("modprobe") is not None:
            subprocess.run(["modprobe", module], capture_output=True, check=False)
        if module not in _filesystems():
            return (f"this kernel has no {'NFS server' if module == 'nfsd' else 'NFS client'} ('{module}' is not "
                    "in /proc/filesystems and cannot be loaded): a container or a VM built without it")
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return f"missing {', '.join(missing)} (Debian: apt-get install nfs-kernel-server nfs-common faketime)"
    return None


def _run(*command: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        pytest.skip(f"NFS set-up failed at `{' '.join(command)}`: {(done.stderr or done.stdout).strip()[:300]}")


@contextlib.contextmanager
def nfs_mounts(export: Path, mounts: list[Path]) -> Iterator[None]:
    """``export`` served over NFSv4.2 on 127.0.0.1 and mounted at each of ``mounts`` as a separate client (own
    attribute and data caches), attribute caching `ATTRIBUTE_CACHE_S`; everything undone afterwards."""
    if not Path("/proc/fs/nfsd/threads").exists():
        _run("mount", "-t", "nfsd", "nfsd", "/proc/fs/nfsd")
    mountd = subprocess.Popen(["rpc.mountd", "--foreground", "--no-nfs-version", "3"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)  # fmt: skip
    done: list[Path] = []
    try:
        _run("rpc.nfsd", "--no-nfs-version", "3", "4")
        _run("exportfs", "-i", "-o", "rw,sync,no_root_squash,insecure,no_subtree_check,fsid=7341",
             f"127.0.0.1:{export}")  # fmt: skip
        for mount in mounts:
            mount.mkdir(parents=True)
            _run("mount", "-t", "nfs4", "-o",
                 f"vers=4.2,proto=tcp,actimeo={ATTRIBUTE_CACHE_S:g},nosharecache,hard", f"127.0.0.1:{export}",
                 str(mount))  # fmt: skip
            done.append(mount)
        yield
    finally:
        for mount in reversed(done):
            subprocess.run(["umount", "-f", "-l", str(mount)], capture_output=True, check=False)
        subprocess.run(["exportfs", "-u", f"127.0.0.1:{export}"], capture_output=True, check=False)
        subprocess.run(["rpc.nfsd", "0"], capture_output=True, check=False)
        mountd.terminate()
        mountd.wait(timeout=30)


def _sweep(path: Path) -> Path:
    spec = {
        "name": "nfs",
        "fixed": {"task": "rte", "teacher": "bert-base", "student": "bert-tiny",
                  "options": {"test_seconds": 1.5, "test_epochs": 3}},
        "axes": {"seed": list(range(4)), "alpha": [0.1, 0.5, 0.9]},
    }  # fmt: skip
    path.write_text(json.dumps(spec))
    return path


def test_two_clients_of_one_nfs_store_with_a_skewed_clock_and_a_stall_train_each_trial_once(tmp_path: Path) -> None:
    reason = nfs_unavailable()
    if reason is not None:
        pytest.skip(f"no NFS on this machine: {reason}")
    export, first_mount, second_mount = tmp_path / "export", tmp_path / "client-a", tmp_path / "client-b"
    export.mkdir()
    sweep = _sweep(tmp_path / "nfs.yaml")
    ids = sorted(planned.trial.trial_id for planned in load_sweep(sweep).trials)
    env = {**os.environ, "KDGRID_CLAIM_HEARTBEAT_S": str(HEARTBEAT_S), "KDGRID_CLAIM_STALE_S": str(STALE_S),
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    args = ["--no-preflight", "--max-group-size", "2", "--set", "local_progress=false", "--set",
            "job_fn=tests.launch.fakes:job_to_store", "--set", "local_workers=1"]  # fmt: skip
    with nfs_mounts(export, [first_mount, second_mount]):
        first = subprocess.Popen([*KDGRID_WITH_FAKES, "run", str(sweep), "--store", str(first_mount / "store"),
                                  *args], env=env, start_new_session=True, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)  # fmt: skip
        time.sleep(4.0)  # claimed and training
        second = subprocess.Popen(["faketime", "-f", SKEW, *KDGRID_WITH_FAKES, "resume", str(sweep), "--store",
                                   str(second_mount / "store"), "--max-attempts", "5", *args], env=env,
                                  start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)  # fmt: skip
        time.sleep(2.0)
        os.killpg(first.pid, signal.SIGSTOP)  # a stalled client: the other takes its trials over
        time.sleep(STALE_S + 2 * HEARTBEAT_S)
        os.killpg(first.pid, signal.SIGCONT)
        outputs = [run.communicate(timeout=300)[0] for run in (first, second)]
        finish = subprocess.run([*KDGRID_WITH_FAKES, "resume", str(sweep), "--store", str(first_mount / "store"),
                                 "--max-attempts", "5", *args], env=env, capture_output=True, text=True,
                                timeout=300, check=False)  # fmt: skip
        rows = store_rows(export / "store")
        frame = read_store(export / "store")
    done = collections.Counter(t for t, status in rows if status == "done")
    print(f"NFS: {len(ids)} trials, {sum(done.values())} done rows, "
          f"{sum(s == 'superseded' for _, s in rows)} superseded, {sum(s == 'failed' for _, s in rows)} failed")
    assert finish.returncode == 0, finish.stdout + finish.stderr + "".join(outputs)
    assert done == collections.Counter(ids), (done, outputs)  # one counted done row per trial, none lost
    assert duplicate_done_trials(frame) == {}
