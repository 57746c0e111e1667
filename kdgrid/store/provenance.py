"""Facts about the machine and code a row was written by: host, git commit, package versions. Computed once per
process; none of them imports a heavy library (versions come from package metadata)."""

from __future__ import annotations

import functools
import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path

PACKAGES = ("kdgrid", "torch", "transformers", "datasets", "pyarrow", "pandas", "ray", "submitit")


@functools.cache
def package_versions() -> dict[str, str]:
    """Installed versions of the packages that shape a result, plus Python's."""
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


@functools.cache
def git_commit() -> str | None:
    """The commit of the checkout this package runs from (``+dirty`` when it has changes), or None."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


@functools.cache
def host_name() -> str:
    return socket.gethostname()
