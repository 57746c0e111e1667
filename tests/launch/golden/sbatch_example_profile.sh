#!/bin/bash

# Parameters
#SBATCH --account=my-lab
#SBATCH --array=0-4%5
#SBATCH --constraint=a100
#SBATCH --cpus-per-task=8
#SBATCH --error=/shared/results/_slurm/demo/%A_%a/%A_%a_0_log.err
#SBATCH --gpus-per-node=1
#SBATCH --job-name=kdgrid
#SBATCH --mem=32GB
#SBATCH --nodes=1
#SBATCH --open-mode=append
#SBATCH --output=/shared/results/_slurm/demo/%A_%a/%A_%a_0_log.out
#SBATCH --partition=gpu
#SBATCH --qos=normal
#SBATCH --signal=USR2@180
#SBATCH --time=240
#SBATCH --wckey=submitit

# setup
module load cuda/12.1
source "$HOME/venvs/kdgrid/bin/activate"

# command
export SUBMITIT_EXECUTOR=slurm
srun --unbuffered --output /shared/results/_slurm/demo/%A_%a/%A_%a_%t_log.out --error /shared/results/_slurm/demo/%A_%a/%A_%a_%t_log.err python -u -m submitit.core._submit /shared/results/_slurm/demo/%j
