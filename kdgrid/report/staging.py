"""One report update's files, put in place together or not at all: `StagedFiles`.

Each file of an update is first written whole under a hidden temporary name beside its final path (figures are
drawn into a hidden folder of the report); only when every one of them is written are they renamed into place,
one rename each, and the pages of trials no longer in the store removed. A write that fails (a full disk, a
folder that became read-only) removes this update's temporary files and leaves the folder exactly as the last
update left it: never half old, half new. Renames need no free space, so the one way left to mix two updates is
the process dying during the renames themselves (a fraction of a second); the next update rewrites every page
that changed (the manifest, renamed last, still names the old fingerprints).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path

from kdgrid.errors import KdgridError
from kdgrid.store.write import free_space

# The hidden prefix of an update's temporary files and figure folder (a browser never links to them).
STAGING_PREFIX = ".staged-"


class ReportWriteError(KdgridError):
    """A report file could not be written (a full disk, a folder gone): the message names the file, the error and
    the free space; the store is never touched."""


class StagedFiles:
    """The files of one update of the report folder ``out``: `write` and `adopt` stage them, `commit` puts every
    one in place, `abort` removes what was staged."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self._staged: list[tuple[Path, Path]] = []  # (temporary, final)
        self._folders: list[Path] = []
        self._removals: list[Path] = []

    def write(self, path: Path, text: str) -> Path:
        """Stage ``text`` for ``path``; returns ``path`` (where it will be once committed).

        Raises:
            ReportWriteError: the temporary file could not be written, naming it and the free space.
        """
        temporary = path.with_name(f"{STAGING_PREFIX}{uuid.uuid4().hex[:8]}-{path.name}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_text(text, encoding="utf-8")
        except OSError as error:
            temporary.unlink(missing_ok=True)
            raise ReportWriteError(
                f"cannot write the report file {path}: {error.strerror or error} ({free_space(path.parent)} free)"
            ) from error
        self._staged.append((temporary, path))
        return path

    def folder(self) -> Path:
        """A new hidden folder of the report to draw files into (then `adopt` them)."""
        folder = self.out / f"{STAGING_PREFIX}{uuid.uuid4().hex[:8]}"
        try:
            folder.mkdir(parents=True)
        except OSError as error:
            raise ReportWriteError(
                f"cannot write the report into {self.out}: {error.strerror or error} ({free_space(self.out)} free)"
            ) from error
        self._folders.append(folder)
        return folder

    def adopt(self, drawn: list[Path], drawn_in: Path, final_folder: Path) -> list[Path]:
        """Stage files already written in ``drawn_in`` (a `folder`) for the same relative paths in
        ``final_folder``; returns their final paths."""
        finals = []
        for path in drawn:
            final = final_folder / path.relative_to(drawn_in)
            self._staged.append((path, final))
            finals.append(final)
        return finals

    def remove(self, path: Path) -> None:
        """Remove ``path`` at `commit` (a page no longer in the report)."""
        self._removals.append(path)

    def commit(self) -> None:
        """Rename every staged file into place (in staging order: the manifest, staged last, lands last), then
        remove what was to be removed and the staging folders."""
        try:
            for temporary, final in self._staged:
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(temporary, final)
        except OSError as error:
            self.abort()
            raise ReportWriteError(
                f"cannot put the report's files in place in {self.out}: {error.strerror or error}"
            ) from error
        for path in self._removals:
            path.unlink(missing_ok=True)
        self._staged = []
        self._cleanup()

    def abort(self) -> None:
        """Remove every staged file that is not yet in place, and the staging folders."""
        for temporary, _ in self._staged:
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)
        self._staged = []
        self._cleanup()

    def _cleanup(self) -> None:
        for folder in self._folders:
            shutil.rmtree(folder, ignore_errors=True)
        self._folders = []
