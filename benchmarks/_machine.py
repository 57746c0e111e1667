"""What a benchmark's figures were measured on: date, commit, CPUs and how busy they were. Imports nothing heavy
(no torch), so an analysis-only benchmark can record it without paying for torch; `_common.machine` adds torch's
version and the GPU."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def machine() -> dict[str, Any]:
    """The date (UTC), the commit checked out, the CPU count and the 1-minute load average when called."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    return {
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "commit": commit or None,
        "cpus": os.cpu_count(),
        "load_1min": round(os.getloadavg()[0], 2),
    }
