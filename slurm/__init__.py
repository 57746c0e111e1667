"""Developer infrastructure for the SLURM executor: a single-node cluster for tests (`slurm.local_cluster`).

Not part of the installed kdgrid package; run it from a checkout with ``slurm/local_cluster.sh``.
"""
