#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine (Debian/Ubuntu, root): MariaDB + munge + slurmdbd +
# slurmctld + slurmd, configured under a state directory ($KDGRID_SLURM_STATE, default /tmp/kdgrid-slurm).
#   slurm/local_cluster.sh start    # installs the packages if missing (apt-get), starts, waits for an idle node
#   slurm/local_cluster.sh status   # JSON; exit 0 when the cluster is up
#   slurm/local_cluster.sh env      # `export SLURM_CONF=...` for this shell: eval "$(slurm/local_cluster.sh env)"
#   slurm/local_cluster.sh stop     # stops every daemon by its pid file
# Extra flags: --state DIR, --no-install, --max-array-size N. The logic lives in slurm/local_cluster.py.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${KDGRID_PYTHON:-$root/.venv/bin/python}"
[ -x "$python" ] || python="$(command -v python3)"
# The checkout first on the path: `slurm.local_cluster` is not part of the installed package.
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
exec "$python" -m slurm.local_cluster "$@"
