"""Which process this is: torchrun's environment, SLURM tasks, or one process."""

from __future__ import annotations

import pytest

from kdgrid.errors import ConfigError
from kdgrid.pretrain.processes import DEFAULT_MASTER_PORT, ProcessPlace, process_place


def test_one_process_without_a_launcher() -> None:
    assert process_place({}) == ProcessPlace(1, 0, 0, {})
    assert process_place({"SLURM_NTASKS": "1", "SLURM_PROCID": "0"}) == ProcessPlace(1, 0, 0, {})


def test_torchrun_wins_even_inside_a_slurm_job() -> None:
    env = {"WORLD_SIZE": "8", "RANK": "5", "LOCAL_RANK": "1", "SLURM_NTASKS": "2", "SLURM_PROCID": "1"}
    assert process_place(env) == ProcessPlace(8, 5, 1, {})


def test_slurm_tasks_become_torch_distributed_processes() -> None:
    env = {"SLURM_NTASKS": "8", "SLURM_PROCID": "6", "SLURM_LOCALID": "2", "MASTER_ADDR": "node-a"}
    place = process_place(env)
    assert (place.world_size, place.rank, place.local_rank) == (8, 6, 2)
    assert place.environment == {
        "WORLD_SIZE": "8",
        "RANK": "6",
        "LOCAL_RANK": "2",
        "MASTER_ADDR": "node-a",
        "MASTER_PORT": DEFAULT_MASTER_PORT,
    }
    assert process_place({**env, "MASTER_PORT": "1234"}).environment["MASTER_PORT"] == "1234"


def test_slurm_tasks_without_master_addr_are_refused() -> None:
    with pytest.raises(ConfigError, match="export MASTER_ADDR"):
        process_place({"SLURM_NTASKS": "4", "SLURM_PROCID": "0"})
