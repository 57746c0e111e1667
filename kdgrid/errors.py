"""Errors a user can act on. The CLI prints their message alone (no traceback) and exits with status 2."""

from __future__ import annotations

# The exit status of a refusal a user can act on (a `KdgridError`, a filesystem error): the CLI's, and that of
# a `kdgrid pretrain` process whose starting process prints the refusal.
EXIT_USER_ERROR = 2


class KdgridError(Exception):
    """Base of every error whose message tells the user what to do."""


class AssetMissingError(KdgridError):
    """An offline asset (teacher weights, a text corpus) is not on this machine; the message names the fetch command."""


class AssetFetchError(KdgridError):
    """Fetching an offline asset failed (no registry, checksum mismatch)."""


class ConfigError(KdgridError):
    """A sweep, trial or profile is invalid; the message names the file, the key and the allowed values."""


class LaunchError(KdgridError):
    """Jobs handed to an executor (SLURM, Ray) did not all finish: the message names the jobs and their states."""
