"""The single-node SLURM set-up without starting it: its configuration, pid handling and the reasons it gives."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurm import local_cluster
from slurm.local_cluster import (
    ClusterPaths,
    ClusterUnavailableError,
    LocalCluster,
    cannot_start_reason,
    pid_alive,
    read_pid,
    slurm_conf_text,
    slurmdbd_conf_text,
)

NODE = "NodeName=box NodeAddr=127.0.0.1 CPUs=2 RealMemory=900 State=UNKNOWN"


def conf_settings(text: str) -> dict[str, str]:
    """KEY=VALUE lines of a SLURM config (comments skipped; node/partition lines keyed by their first word)."""
    settings = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            settings[key] = value
    return settings


def test_slurm_conf_has_the_container_settings_the_cluster_relies_on(tmp_path: Path) -> None:
    paths = ClusterPaths(tmp_path)
    conf = conf_settings(slurm_conf_text(paths, NODE, max_array_size=7))
    assert conf["ProctrackType"] == "proctrack/linuxproc" and conf["TaskPlugin"] == "task/none"
    assert conf["SlurmctldHost"].endswith("(127.0.0.1)")
    assert conf["SelectType"] == "select/cons_tres" and conf["SelectTypeParameters"] == "CR_Core"
    assert f"socket={paths.munge_socket}" in conf["AuthInfo"] and "cred_expire=10" in conf["AuthInfo"]
    assert conf["SchedulerParameters"] == "sched_interval=5,bf_interval=5"
    assert conf["AccountingStorageType"] == "accounting_storage/slurmdbd"  # so that sacct works
    assert conf["MaxArraySize"] == "7"
    assert conf["SlurmctldPidFile"] == str(paths.pid_file("slurmctld"))
    assert conf["NodeName"].startswith("box NodeAddr=127.0.0.1")
    assert conf["PartitionName"].startswith(f"{local_cluster.PARTITION} Nodes=ALL Default=YES")


def test_slurmdbd_conf_uses_mariadb_and_the_clusters_own_munge_socket(tmp_path: Path) -> None:
    paths = ClusterPaths(tmp_path)
    conf = conf_settings(slurmdbd_conf_text(paths))
    assert (
        conf["StorageType"] == "accounting_storage/mysql"
        and conf["AuthInfo"] == f"socket={paths.munge_socket}"
    )
    assert conf["PidFile"] == str(paths.pid_file("slurmdbd"))


def test_node_line_keeps_ninety_percent_of_the_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    reply = "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105\nUpTime=1\n"
    monkeypatch.setattr(local_cluster, "_sbin", lambda name: name)
    monkeypatch.setattr(
        local_cluster.subprocess,
        "run",
        lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=reply, stderr=""),
    )
    line = local_cluster.node_line()
    assert line.startswith("NodeName=vm NodeAddr=127.0.0.1 CPUs=2 ")
    assert "RealMemory=21694" in line and line.endswith("State=UNKNOWN") and "UpTime" not in line


def test_a_zombie_or_missing_process_is_not_alive() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    assert pid_alive(os.getpid())
    deadline = time.monotonic() + 10
    while pid_alive(child.pid):  # exited but not reaped: a zombie, which must count as stopped
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child.wait()
    assert not pid_alive(child.pid)


def test_pid_files_that_are_missing_or_garbled_read_as_none(tmp_path: Path) -> None:
    assert read_pid(tmp_path / "none.pid") is None
    (tmp_path / "bad.pid").write_text("not a pid\n")
    assert read_pid(tmp_path / "bad.pid") is None
    (tmp_path / "ok.pid").write_text("1234\n")
    assert read_pid(tmp_path / "ok.pid") == 1234


def test_a_cluster_that_never_started_reports_not_running_and_stops_quietly(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "state")
    assert not cluster.is_running()
    assert set(cluster.daemon_pids().values()) == {None}
    cluster.stop()  # nothing to stop: no error, nothing killed
    assert cluster.env() == {"SLURM_CONF": str(tmp_path / "state" / "etc" / "slurm.conf")}


def test_a_stale_pid_file_naming_an_unrelated_process_is_never_signalled(tmp_path: Path) -> None:
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        cluster = LocalCluster(tmp_path / "state")
        cluster.paths.run.mkdir(parents=True)
        cluster.paths.pid_file("slurmctld").write_text(f"{bystander.pid}\n")
        cluster.stop()
        assert bystander.poll() is None  # still running: it is not a SLURM daemon
        assert not cluster.paths.pid_file("slurmctld").exists()
    finally:
        bystander.kill()
        bystander.wait()


def test_without_root_the_reason_says_so_and_start_refuses(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(local_cluster.os, "geteuid", lambda: 1000)
    reason = cannot_start_reason()
    assert reason is not None and "root" in reason
    with pytest.raises(ClusterUnavailableError, match="root"):
        LocalCluster(tmp_path).start()


def test_the_command_line_reports_status_as_json_and_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert local_cluster.main(["status", "--state", str(tmp_path)]) == 1  # not running
    assert '"running": false' in capsys.readouterr().out
    assert local_cluster.main(["env", "--state", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == f"export SLURM_CONF={tmp_path / 'etc' / 'slurm.conf'}"
