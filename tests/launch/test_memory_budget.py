"""The memory budget of one job (``--memory-budget-gb auto``): the machine readers and each executor's derivation,
with the machine faked (RAM, cgroup limits, GPUs)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kdgrid.launch import memory
from kdgrid.launch.local import LocalExecutor
from kdgrid.launch.ray import RayExecutor
from kdgrid.launch.slurm import SlurmExecutor

GIB = 2**30


def fake_machine(monkeypatch: pytest.MonkeyPatch, *, ram_gb: float, gpus_gb: list[float]) -> None:
    monkeypatch.setattr(memory, "ram_gb", lambda: ram_gb)
    monkeypatch.setattr(memory, "gpu_memory_gb", lambda: list(gpus_gb))


def test_per_job_takes_the_safety_fraction_and_divides_and_says_how() -> None:
    budget = memory.per_job(20.0, "of RAM", 2, "2 local workers")
    assert budget.gb == pytest.approx(0.9 * 20.0 / 2)
    assert budget.basis == "auto: 9.0 GB = 0.9 x 20.0 GB of RAM / 2 local workers"


# -- readers --------------------------------------------------------------------------------------------------------
def test_cgroup_limits_v2_and_v1_are_read_and_no_limit_reads_as_none(tmp_path: Path) -> None:
    assert memory.cgroup_limit_bytes(tmp_path) is None  # no cgroup files at all
    (tmp_path / "memory.max").write_text("max\n")  # cgroup v2 without a limit
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1 without a limit
    assert memory.cgroup_limit_bytes(tmp_path) is None
    (tmp_path / "memory.max").write_text(f"{8 * GIB}\n")
    assert memory.cgroup_limit_bytes(tmp_path) == 8 * GIB
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text(f"{6 * GIB}\n")
    assert memory.cgroup_limit_bytes(tmp_path) == 6 * GIB  # the smallest limit wins


def test_ram_is_the_physical_memory_capped_by_the_cgroup_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "physical_ram_bytes", lambda: 64 * GIB)
    monkeypatch.setattr(memory, "cgroup_limit_bytes", lambda: None)
    assert memory.ram_gb() == 64.0
    monkeypatch.setattr(memory, "cgroup_limit_bytes", lambda: 12 * GIB)
    assert memory.ram_gb() == 12.0
    # a limit above the RAM changes nothing
    monkeypatch.setattr(memory, "cgroup_limit_bytes", lambda: 128 * GIB)
    assert memory.ram_gb() == 64.0


def test_this_machines_ram_is_read_without_dependencies() -> None:
    meminfo = Path("/proc/meminfo")
    if not meminfo.exists():
        pytest.skip("no /proc/meminfo")
    total_line = next(line for line in meminfo.read_text().splitlines() if line.startswith("MemTotal"))
    total_kib = int(total_line.split()[1])
    assert memory.physical_ram_bytes() == pytest.approx(total_kib * 1024, rel=0.05)
    assert 0 < memory.ram_gb() <= memory.physical_ram_bytes() / GIB


@pytest.fixture
def fake_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An ``nvidia-smi`` on PATH answering for two GPUs (80 GiB and 40 GiB, in MiB as the real one prints)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "nvidia-smi"
    script.write_text("#!/bin/sh\nprintf '0, GPU-aaaa-1111, 81920\\n1, GPU-bbbb-2222, 40960\\n'\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(memory, "gpu_device_present", lambda: True)
    monkeypatch.setattr(memory, "_gpu_memory_gb_from_torch", lambda: pytest.fail("torch must not be asked"))
    return script


@pytest.mark.parametrize(
    ("visible", "expected"),
    [(None, [80.0, 40.0]), ("1", [40.0]), ("GPU-aaaa", [80.0]), ("0,1", [80.0, 40.0]), ("", [])],
)
def test_gpus_are_read_with_nvidia_smi_and_cuda_visible_devices_is_respected(
    fake_nvidia_smi: Path, monkeypatch: pytest.MonkeyPatch, visible: str | None, expected: list[float]
) -> None:
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert memory.gpu_memory_gb() == expected


def test_a_machine_without_a_gpu_driver_has_no_gpus_without_asking_torch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(memory, "gpu_device_present", lambda: False)
    monkeypatch.setattr(memory, "_gpu_memory_gb_from_torch", lambda: pytest.fail("torch must not be asked"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert memory.gpu_memory_gb() == []


# -- executors ------------------------------------------------------------------------------------------------------
def test_local_budget_is_the_ram_shared_by_the_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, ram_gb=32.0, gpus_gb=[])
    alone = LocalExecutor(local_progress=False).memory_budget()
    assert alone.gb == pytest.approx(28.8)
    assert alone.basis == "auto: 28.8 GB = 0.9 x 32.0 GB of RAM / 1 job at a time"
    four = LocalExecutor(local_workers=4, local_progress=False).memory_budget()
    assert four.gb == pytest.approx(7.2) and four.basis.endswith("of RAM / 4 local workers")


def test_local_budget_on_a_gpu_machine_is_the_smallest_gpu_shared_by_the_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_machine(monkeypatch, ram_gb=512.0, gpus_gb=[80.0, 40.0])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # four workers spread round robin over two GPUs: two jobs share each GPU
    budget = LocalExecutor(local_workers=4, local_progress=False).memory_budget()
    assert budget.gb == pytest.approx(0.9 * 40.0 / 2)
    assert "40.0 GB of GPU memory" in budget.basis and "2 jobs per GPU (4 local workers over 2 GPUs)" in budget.basis
    # two workers: a GPU each, the smallest GPU's memory each
    alone = LocalExecutor(local_workers=2, local_progress=False).memory_budget()
    assert alone.gb == pytest.approx(0.9 * 40.0) and "1 job per GPU (2 local workers over 2 GPUs)" in alone.basis
    # local_jobs_per_gpu=3: six workers, three per GPU
    packed = LocalExecutor(local_jobs_per_gpu=3, local_progress=False)
    assert packed.workers() == 6 and packed.memory_budget().gb == pytest.approx(0.9 * 40.0 / 3)
    # in this process (no workers): one job at a time on the default GPU
    assert LocalExecutor(local_progress=False).memory_budget().gb == pytest.approx(0.9 * 40.0)


def test_slurm_budget_is_the_tasks_memory_and_none_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, ram_gb=4.0, gpus_gb=[16.0])  # the login node's memory must not matter
    with_mem = SlurmExecutor(slurm_mem_gb=32).memory_budget()
    assert with_mem.gb == pytest.approx(28.8)
    assert (
        with_mem.basis
        == "auto: 28.8 GB = 0.9 x 32.0 GB of RAM per task (slurm_mem_gb) / 1 job at a time per task"
    )
    none = SlurmExecutor().memory_budget()
    assert none.gb is None and "slurm_mem_gb is not set" in none.basis
    # jobs packed into one task run one after another: each has the task's whole memory
    assert SlurmExecutor(slurm_mem_gb=32, slurm_jobs_per_task=4).memory_budget().gb == pytest.approx(28.8)


def test_slurm_budget_of_gpu_tasks_is_the_ram_unless_the_gpus_memory_is_given() -> None:
    ram_only = SlurmExecutor(slurm_mem_gb=64, slurm_gpus=1).memory_budget()
    assert ram_only.gb == pytest.approx(57.6)
    assert (
        "GPU memory is unknown before submission" in ram_only.basis and "slurm_gpu_mem_gb" in ram_only.basis
    )
    gpu = SlurmExecutor(slurm_mem_gb=64, slurm_gpus=1, slurm_gpu_mem_gb=40).memory_budget()
    assert gpu.gb == pytest.approx(36.0) and "of GPU memory (slurm_gpu_mem_gb)" in gpu.basis
    # without GPUs slurm_gpu_mem_gb is ignored: the students train in RAM
    assert SlurmExecutor(slurm_mem_gb=64, slurm_gpu_mem_gb=40).memory_budget().gb == pytest.approx(57.6)


def test_ray_budget_is_a_gpu_fraction_or_the_ram_over_concurrent_jobs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_machine(monkeypatch, ram_gb=64.0, gpus_gb=[80.0])
    quarter = RayExecutor(ray_gpus_per_job=0.25).memory_budget()
    assert quarter.gb == pytest.approx(0.9 * 80.0 * 0.25)
    assert "4 jobs per GPU (ray_gpus_per_job 0.25)" in quarter.basis
    assert RayExecutor(ray_gpus_per_job=2).memory_budget().gb == pytest.approx(72.0)  # a job uses one GPU
    cpu = RayExecutor(ray_num_cpus=8, ray_cpus_per_job=2).memory_budget()
    assert cpu.gb == pytest.approx(0.9 * 64.0 / 4) and "8 CPUs / 2 per job" in cpu.basis
    capped = RayExecutor(ray_num_cpus=8, ray_cpus_per_job=1, ray_max_concurrent=2).memory_budget()
    assert capped.gb == pytest.approx(0.9 * 64.0 / 2) and "ray_max_concurrent" in capped.basis


def test_ray_gpu_jobs_on_a_machine_without_gpus_are_sized_to_the_ram(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_machine(monkeypatch, ram_gb=64.0, gpus_gb=[])
    budget = RayExecutor(ray_num_cpus=4, ray_num_gpus=1, ray_gpus_per_job=0.5).memory_budget()
    assert budget.gb == pytest.approx(0.9 * 64.0 / 2)  # 1 logical GPU / 0.5 per job = 2 at once
    assert "no GPU visible here" in budget.basis
