"""A real single-node SLURM cluster on this machine, for the tests and for anyone who wants one.

It runs every daemon SLURM needs, each started directly (no systemd) and stopped by its pid file, never by name:
MariaDB (on a Unix socket only, ``--skip-networking``) -> munged -> slurmdbd -> slurmctld -> slurmd. Accounting goes
through slurmdbd so that ``sacct`` works: submitit needs it to see a cancelled or killed job (without it such a job
never writes its result file and ``job.result()`` waits forever).

Everything lives under one state directory (``$KDGRID_SLURM_STATE``, default ``/tmp/kdgrid-slurm``):
``etc/slurm.conf``, ``etc/slurmdbd.conf``, the munge key and socket, MariaDB's data directory and socket, the
daemons' pid files, logs and spool directories. Clients find the cluster through ``SLURM_CONF`` (see `env`); when
``/etc/slurm/slurm.conf`` is absent, `start` also links it there so that a plain ``sinfo`` in any shell works, and
`stop` removes that link again.

Settings chosen for containers without cgroups or DNS (Debian 12, root, no systemd as PID 1):
``ProctrackType=proctrack/linuxproc``, ``TaskPlugin=task/none``, ``SlurmctldHost=<hostname>(127.0.0.1)``,
``NodeAddr=127.0.0.1``, the node line from ``slurmd -C`` with 90 % of its RealMemory, ``select/cons_tres`` with
``CR_Core`` (one slot per core), ``AuthInfo=cred_expire=10`` and ``sched_interval=5,bf_interval=5`` so that a
requeued job starts again within ~15 s instead of ~120 s.

Developer infrastructure, not part of the installed package. Command line (run from a checkout)::

    slurm/local_cluster.sh start|stop|status|env [--state DIR] [--no-install] [--max-array-size N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kdgrid.errors import KdgridError

# Debian package -> a binary it installs (used to tell whether it is missing).
PACKAGES: dict[str, str] = {
    "munge": "munged",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "slurm-client": "sbatch",
    "slurmdbd": "slurmdbd",
    "mariadb-server": "mariadbd",
}
DEFAULT_STATE_DIR = Path("/tmp/kdgrid-slurm")
CLUSTER_NAME = "kdgrid"
PARTITION = "local"
MEMORY_FRACTION = 0.9
ETC_SLURM_CONF = Path("/etc/slurm/slurm.conf")
# Stop order: the reverse of the start order.
DAEMONS: tuple[str, ...] = ("mariadb", "munged", "slurmdbd", "slurmctld", "slurmd")


class ClusterUnavailableError(KdgridError):
    """The local cluster cannot start on this machine (not root, no apt-get, a daemon that will not come up)."""


class PackagesUnavailableError(ClusterUnavailableError):
    """The Debian packages are missing and cannot be installed (no apt-get, no reachable package mirror)."""


def state_dir_default() -> Path:
    return Path(os.environ.get("KDGRID_SLURM_STATE", DEFAULT_STATE_DIR))


@dataclass(frozen=True)
class ClusterPaths:
    """Where each file of the cluster lives under its state directory."""

    root: Path

    @property
    def etc(self) -> Path:
        return self.root / "etc"

    @property
    def slurm_conf(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def slurmdbd_conf(self) -> Path:
        # slurmdbd reads slurmdbd.conf from the directory of $SLURM_CONF.
        return self.etc / "slurmdbd.conf"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def log(self) -> Path:
        return self.root / "log"

    @property
    def munge_key(self) -> Path:
        return self.etc / "munge.key"

    @property
    def munge_socket(self) -> Path:
        return self.run / "munge.socket"

    @property
    def mysql_data(self) -> Path:
        return self.root / "mysql"

    @property
    def mysql_socket(self) -> Path:
        return self.run / "mysqld.sock"

    @property
    def ctld_state(self) -> Path:
        return self.root / "slurmctld"

    @property
    def slurmd_spool(self) -> Path:
        return self.root / "slurmd"

    def pid_file(self, daemon: str) -> Path:
        return self.run / f"{daemon}.pid"

    def log_file(self, daemon: str) -> Path:
        return self.log / f"{daemon}.log"


def missing_packages() -> list[str]:
    """The Debian packages of the cluster whose binaries are not on this machine."""
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    return [pkg for pkg, binary in PACKAGES.items() if shutil.which(binary, path=search) is None]


def cannot_start_reason() -> str | None:
    """Why the cluster cannot start here, or None when it can (root on Linux, packages present or installable)."""
    if not sys.platform.startswith("linux"):
        return f"a local SLURM cluster needs Linux (this is {sys.platform})"
    if os.geteuid() != 0:
        return f"the SLURM daemons need root (this process runs as uid {os.geteuid()})"
    if missing_packages() and shutil.which("apt-get") is None:
        return f"packages {missing_packages()} are missing and apt-get is not available to install them"
    return None


def install_packages() -> None:
    """``apt-get update`` then install the missing packages (no recommends); nothing when all are there."""
    missing = missing_packages()
    if not missing:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
    ):
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise PackagesUnavailableError(
                f"`{' '.join(command)}` failed (exit {done.returncode}):\n{done.stderr.strip()[-1500:]}"
            )


def _sbin(name: str) -> str:
    found = shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
    if found is None:
        raise ClusterUnavailableError(f"{name} is not installed; run `{sys.argv[0]} start` to install it")
    return found


def pid_alive(pid: int) -> bool:
    """True if the process exists and is not a zombie (PID 1 here does not reap orphans)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state letter follows the command name, which is in parentheses and may itself hold spaces.
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def node_line(memory_fraction: float = MEMORY_FRACTION) -> str:
    """The node definition from ``slurmd -C`` with NodeAddr=127.0.0.1 and a share of RealMemory."""
    done = subprocess.run([_sbin("slurmd"), "-C"], capture_output=True, text=True, check=True)
    first = done.stdout.strip().splitlines()[0]
    fields = dict(item.split("=", 1) for item in first.split())
    fields["RealMemory"] = str(int(int(fields.get("RealMemory", "1024")) * memory_fraction))
    name = fields.pop("NodeName")
    rest = " ".join(f"{key}={value}" for key, value in fields.items())
    return f"NodeName={name} NodeAddr=127.0.0.1 {rest} State=UNKNOWN"


def slurm_conf_text(paths: ClusterPaths, node: str, *, max_array_size: int = 1001) -> str:
    """The cluster's slurm.conf (cgroup-free, accounting through slurmdbd)."""
    host = socket.gethostname()
    return f"""# Written by slurm/local_cluster.py: a single-node cluster for tests. Do not edit; `stop` + `start`.
ClusterName={CLUSTER_NAME}
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={paths.munge_socket},cred_expire=10
CredType=cred/munge
StateSaveLocation={paths.ctld_state}
SlurmdSpoolDir={paths.slurmd_spool}
SlurmctldPidFile={paths.pid_file("slurmctld")}
SlurmdPidFile={paths.pid_file("slurmd")}
SlurmctldLogFile={paths.log_file("slurmctld")}
SlurmdLogFile={paths.log_file("slurmd")}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=5,bf_interval=5
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
# The munge socket for connections to slurmdbd is read from here, not from AuthInfo.
AccountingStoragePass={paths.munge_socket}
JobCompType=jobcomp/none
ReturnToService=2
KillWait=5
MinJobAge=600
MaxArraySize={max_array_size}
{node}
PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def slurmdbd_conf_text(paths: ClusterPaths) -> str:
    return f"""# Written by slurm/local_cluster.py.
AuthType=auth/munge
AuthInfo=socket={paths.munge_socket}
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=root
PidFile={paths.pid_file("slurmdbd")}
LogFile={paths.log_file("slurmdbd")}
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=root
StorageLoc=slurm_acct_db
"""


class LocalCluster:
    """The single-node cluster under one state directory.

    >>> cluster = LocalCluster()      # doctest: +SKIP
    >>> cluster.start()               # installs what is missing, starts the daemons, waits for an idle node
    >>> os.environ.update(cluster.env())
    >>> cluster.stop()
    """

    def __init__(self, state_dir: Path | str | None = None, *, max_array_size: int = 1001) -> None:
        self.paths = ClusterPaths(Path(state_dir) if state_dir is not None else state_dir_default())
        self.max_array_size = max_array_size

    # -- what clients need -------------------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        """Environment variables that point SLURM's clients (sbatch, sinfo, sacct, ...) at this cluster."""
        return {"SLURM_CONF": str(self.paths.slurm_conf)}

    def _daemon_env(self) -> dict[str, str]:
        # MYSQL_UNIX_PORT is the socket libmariadb uses when slurmdbd connects to "localhost".
        return {**os.environ, **self.env(), "MYSQL_UNIX_PORT": str(self.paths.mysql_socket)}

    def _client(self, *args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(args), env={**os.environ, **self.env()}, capture_output=True, text=True, timeout=timeout
        )

    # -- state ---------------------------------------------------------------------------------------------------
    def daemon_pids(self) -> dict[str, int | None]:
        """Each daemon's pid if it is running, else None."""
        pids: dict[str, int | None] = {}
        for daemon in DAEMONS:
            pid = read_pid(self.paths.pid_file(daemon))
            pids[daemon] = pid if pid is not None and pid_alive(pid) else None
        return pids

    def node_states(self) -> list[str]:
        """The node states ``sinfo`` reports (``idle``, ``mixed``, ``down*``, ...); empty when it does not answer."""
        if not self.paths.slurm_conf.is_file():
            return []
        try:
            done = self._client("sinfo", "-h", "-N", "-o", "%T", timeout=10)
        except (subprocess.TimeoutExpired, FileNotFoundError):
            return []
        return done.stdout.split() if done.returncode == 0 else []

    def is_running(self) -> bool:
        """All daemons alive and the node usable (idle, mixed or allocated)."""
        if not self.paths.slurm_conf.is_file() or None in self.daemon_pids().values():
            return False
        return any(state.rstrip("*~#") in ("idle", "mixed", "allocated") for state in self.node_states())

    def status(self) -> dict[str, object]:
        return {
            "state_dir": str(self.paths.root),
            "running": self.is_running(),
            "daemons": self.daemon_pids(),
            "nodes": self.node_states(),
            "env": self.env(),
        }

    # -- start ---------------------------------------------------------------------------------------------------
    def start(self, *, install: bool = True, timeout: float = 120) -> bool:
        """Start the cluster unless it already runs; returns True if this call started it.

        Raises `ClusterUnavailableError` with the reason (and the tail of the failing daemon's log) otherwise.
        """
        reason = cannot_start_reason()
        if reason is not None:
            raise ClusterUnavailableError(reason)
        if self.is_running():
            return False
        if install:
            install_packages()
        elif missing_packages():
            raise PackagesUnavailableError(
                f"packages {missing_packages()} are missing (install them or drop --no-install)"
            )
        self.stop()  # a half-started cluster from before: start clean
        self._write_files()
        deadline = time.monotonic() + timeout
        self._start_mariadb(deadline)
        self._start_munged(deadline)
        self._start_daemon("slurmdbd", [_sbin("slurmdbd")], deadline)
        self._wait(
            lambda: self._client("sacctmgr", "-n", "-P", "show", "cluster").returncode == 0,
            "slurmdbd to answer sacctmgr",
            "slurmdbd",
            deadline,
        )
        self._start_daemon("slurmctld", [_sbin("slurmctld")], deadline)
        self._start_daemon("slurmd", [_sbin("slurmd")], deadline)
        self._wait(
            lambda: "idle" in [s.rstrip("*~#") for s in self.node_states()],
            "the node to become idle in sinfo",
            "slurmd",
            deadline,
        )
        self._link_etc()
        return True

    def _write_files(self) -> None:
        p = self.paths
        for directory in (p.etc, p.run, p.log, p.ctld_state, p.slurmd_spool):
            directory.mkdir(parents=True, exist_ok=True)
        p.root.chmod(0o755)
        p.slurm_conf.write_text(slurm_conf_text(p, node_line(), max_array_size=self.max_array_size))
        p.slurm_conf.chmod(0o644)
        p.slurmdbd_conf.write_text(slurmdbd_conf_text(p))
        p.slurmdbd_conf.chmod(0o600)  # slurmdbd refuses a config others can read
        if not p.munge_key.is_file():
            p.munge_key.write_bytes(os.urandom(128))
        p.munge_key.chmod(0o600)

    def _start_mariadb(self, deadline: float) -> None:
        p = self.paths
        if not (p.mysql_data / "mysql").is_dir():
            done = subprocess.run(
                [shutil.which("mariadb-install-db") or "mariadb-install-db", "--no-defaults", "--user=root",
                 f"--datadir={p.mysql_data}", "--auth-root-authentication-method=socket", "--skip-test-db"],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                raise ClusterUnavailableError(f"mariadb-install-db failed:\n{done.stderr.strip()[-1500:]}")
        # mariadbd does not daemonize: run it in its own session, detached from our stdio; it writes its pid file.
        with open(p.log_file("mariadb"), "ab") as log:
            subprocess.Popen(
                [_sbin("mariadbd"), "--no-defaults", "--user=root", f"--datadir={p.mysql_data}",
                 f"--socket={p.mysql_socket}", f"--pid-file={p.pid_file('mariadb')}", "--skip-networking",
                 "--skip-log-bin", "--innodb-buffer-pool-size=64M", f"--log-error={p.log_file('mariadb')}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            )  # fmt: skip
        ping = [shutil.which("mariadb-admin") or "mariadb-admin", "--no-defaults", f"--socket={p.mysql_socket}",
                "--user=root", "ping"]  # fmt: skip
        self._wait(
            lambda: subprocess.run(ping, capture_output=True, check=False).returncode == 0,
            "MariaDB to answer on its socket",
            "mariadb",
            deadline,
        )

    def _start_munged(self, deadline: float) -> None:
        p = self.paths
        command = [_sbin("munged"), "--force", f"--socket={p.munge_socket}", f"--key-file={p.munge_key}",
                   f"--pid-file={p.pid_file('munged')}", f"--log-file={p.log_file('munged')}",
                   f"--seed-file={p.run / 'munged.seed'}"]  # fmt: skip
        self._start_daemon("munged", command, deadline)
        self._wait(p.munge_socket.exists, "the munge socket", "munged", deadline)

    def _start_daemon(self, daemon: str, command: list[str], deadline: float) -> None:
        """Run a daemon that forks into the background; wait until its pid file names a live process."""
        done = subprocess.run(command, env=self._daemon_env(), capture_output=True, text=True, check=False,
                              stdin=subprocess.DEVNULL)  # fmt: skip
        if done.returncode != 0:
            raise ClusterUnavailableError(
                f"{daemon} did not start (exit {done.returncode}): {done.stderr.strip()[-800:]}\n"
                + self._log_tail(daemon)
            )

        def alive() -> bool:
            pid = read_pid(self.paths.pid_file(daemon))
            return pid is not None and pid_alive(pid)

        self._wait(alive, f"{daemon}'s pid file", daemon, deadline)

    def _wait(self, ready: Callable[[], bool], what: str, daemon: str, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                if ready():
                    return
            except subprocess.TimeoutExpired:  # a client that hangs is not ready yet
                pass
            time.sleep(0.5)
        raise ClusterUnavailableError(f"timed out waiting for {what}\n{self._log_tail(daemon)}")

    def _log_tail(self, daemon: str, lines: int = 15) -> str:
        try:
            text = self.paths.log_file(daemon).read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return f"(no log at {self.paths.log_file(daemon)})"
        return f"last lines of {self.paths.log_file(daemon)}:\n" + "\n".join(text)

    def _link_etc(self) -> None:
        if not ETC_SLURM_CONF.exists() and not ETC_SLURM_CONF.is_symlink():
            with contextlib.suppress(OSError):
                ETC_SLURM_CONF.parent.mkdir(parents=True, exist_ok=True)
                ETC_SLURM_CONF.symlink_to(self.paths.slurm_conf)

    # -- stop ----------------------------------------------------------------------------------------------------
    def stop(self, timeout: float = 20) -> None:
        """Stop every daemon by its pid file (SIGTERM, then SIGKILL after ``timeout`` s), in reverse start order."""
        for daemon in reversed(DAEMONS):
            pid = read_pid(self.paths.pid_file(daemon))
            if pid is None or not pid_alive(pid) or not self._is_our_daemon(pid):
                self.paths.pid_file(daemon).unlink(missing_ok=True)
                continue
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while pid_alive(pid) and time.monotonic() < deadline:
                _reap(pid)
                time.sleep(0.2)
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
                _reap(pid)
            self.paths.pid_file(daemon).unlink(missing_ok=True)
        if ETC_SLURM_CONF.is_symlink() and Path(os.readlink(ETC_SLURM_CONF)) == self.paths.slurm_conf:
            ETC_SLURM_CONF.unlink()

    def _is_our_daemon(self, pid: int) -> bool:
        """Guard against a stale pid file whose pid now belongs to an unrelated process."""
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return False
        return any(name in command for name in ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd"))


def _reap(pid: int) -> None:
    """Collect the exit status if the daemon is our own child (mariadbd is), so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="slurm/local_cluster.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("start", "stop", "status", "env"))
    parser.add_argument("--state", type=Path, default=None, help="state directory (default $KDGRID_SLURM_STATE "
                        f"or {DEFAULT_STATE_DIR})")  # fmt: skip
    parser.add_argument("--no-install", action="store_true", help="never call apt-get")
    parser.add_argument("--max-array-size", type=int, default=1001)
    args = parser.parse_args(argv)
    cluster = LocalCluster(args.state, max_array_size=args.max_array_size)
    try:
        if args.action == "start":
            started = cluster.start(install=not args.no_install)
            print(
                ("started" if started else "already running")
                + f"; export SLURM_CONF={cluster.paths.slurm_conf}"
            )
        elif args.action == "stop":
            cluster.stop()
            print("stopped")
        elif args.action == "status":
            status = cluster.status()
            print(json.dumps(status, indent=1))
            return 0 if status["running"] else 1
        else:
            for key, value in cluster.env().items():
                print(f"export {key}={value}")
    except KdgridError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
