"""Facts about the machine and code a row was written by: host, git commit, package versions (with the plugins this
process loaded, `kdgrid.plugins`). Computed once per process (the plugins' entries at each call: a worker loads
its plugins when it starts); none of them imports a heavy library (versions come from package metadata)."""

from __future__ import annotations

import functools
import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path

from kdgrid.plugins import plugin_versions

PACKAGES = ("kdgrid", "torch", "transformers", "datasets", "pyarrow", "pandas", "ray", "submitit")


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that shape a result, plus Python's, plus ``plugin:<module>`` -> version
    for each plugin loaded (`kdgrid.plugins.plugin_versions`)."""
    return {**_installed_versions(), **plugin_versions()}


@functools.cache
def _installed_versions() -> dict[str, str]:
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
