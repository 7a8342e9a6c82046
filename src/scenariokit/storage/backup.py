"""Backups of the embedded SQLite store that restore (docs/deployment.md, "Backups").

A copy of a live SQLite file in WAL mode may not open: the newest pages can still be in the ``-wal``
file. :func:`backup_sqlite` uses SQLite's online backup API instead, in one step: it reads the
database inside one read transaction, so the copy is the store as it was at one moment, while the
server goes on writing (WAL readers do not block writers). The copy is written under a temporary
name and linked into place, so ``PATH`` is never overwritten and never half written.

Secrets in the copy are encrypted with the server's key, which the backup does not hold: it says
where the key is, to be kept apart from the copy and restored with it.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import attrs

from scenariokit.domain.errors import ScenarioKitError
from scenariokit.storage.sqlalchemy.store import sqlite_path


class BackupError(ScenarioKitError):
    """A backup or restore that cannot be made (a PostgreSQL URL, a target that exists …)."""


@attrs.frozen
class BackupMade:
    """What a backup wrote, and where the key that decrypts its secrets is."""

    path: Path
    artifacts: Path | None
    #: the key file beside the database, or None when the key comes from ``SCENARIOKIT_SECRET_KEY``
    key_file: Path | None
    bytes: int


def artifacts_copy(path: Path) -> Path:
    """Where a backup at ``path`` keeps its copy of the artifacts folder: ``<path>.artifacts``."""
    return path.with_name(path.name + ".artifacts")


def database_file(url: str) -> Path:
    """The SQLite file of ``url``; BackupError for any other store."""
    path = sqlite_path(url)
    if path is None:
        scheme = url.split(":", 1)[0]
        raise BackupError(
            f"`scenariokit db backup` copies the embedded SQLite store; a {scheme} store is backed up with "
            'its own tools (PostgreSQL: pg_dump; see docs/deployment.md, "Backups")'
        )
    return path


def key_file_of(database: Path) -> Path:
    """The key file the embedded default keeps beside a SQLite database."""
    return database.with_suffix(".key")


def _refuse_existing(*paths: Path) -> None:
    for path in paths:
        if path.exists() or path.is_symlink():
            raise BackupError(f"{path} exists; a backup never overwrites: choose a new path")


def _copy_database(source: Path, target: Path) -> int:
    """Copy ``source`` into the new file ``target`` with the online backup API; the bytes written."""
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    partial.unlink(missing_ok=True)
    reader = sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=60)
    try:
        writer = sqlite3.connect(partial)
        try:
            reader.backup(writer)  # one step: one read transaction, one consistent moment
            check = writer.execute("PRAGMA integrity_check").fetchone()
            if check is None or check[0] != "ok":
                raise BackupError(f"the copy of {source} fails SQLite's integrity check: {check}")
            # one self-contained file: no -wal beside it to lose on the way to the backup shelf
            writer.execute("PRAGMA journal_mode=DELETE")
        finally:
            writer.close()
        os.chmod(partial, 0o600)
        try:
            os.link(partial, target)  # fails if target appeared meanwhile: never overwrite
        except FileExistsError:
            raise BackupError(f"{target} exists; a backup never overwrites: choose a new path") from None
    finally:
        reader.close()
        partial.unlink(missing_ok=True)
    return target.stat().st_size


def backup_sqlite(url: str, target: Path, *, artifacts_dir: Path | None = None) -> BackupMade:
    """Back up the SQLite store of ``url`` to ``target`` (a new file), and ``artifacts_dir`` beside it.

    The database must exist; ``target`` (and its ``.artifacts`` folder, when asked) must not.
    """
    source = database_file(url)
    if not source.is_file():
        raise BackupError(f"no database at {source}")
    artifacts_target = artifacts_copy(target) if artifacts_dir is not None else None
    _refuse_existing(target, *([artifacts_target] if artifacts_target else []))
    target.parent.mkdir(parents=True, exist_ok=True)
    size = _copy_database(source, target)
    if artifacts_dir is not None and artifacts_target is not None:
        if artifacts_dir.is_dir():
            shutil.copytree(artifacts_dir, artifacts_target)
        else:
            artifacts_target.mkdir()
    key = key_file_of(source)
    return BackupMade(target, artifacts_target, key if key.is_file() else None, size)


@attrs.frozen
class Restored:
    """What a restore wrote."""

    database: Path
    artifacts: Path | None
    key_file: Path | None


def restore_sqlite(
    backup: Path,
    url: str,
    *,
    artifacts_dir: Path | None = None,
    key_file: Path | None = None,
) -> Restored:
    """Bring the backup ``backup`` back as the SQLite store of ``url``, which must not exist yet.

    With ``artifacts_dir`` the backup's artifacts folder is copied there; with ``key_file`` that key is
    copied where the embedded default looks for it (beside the database, mode 0600).
    """
    target = database_file(url)
    if not backup.is_file():
        raise BackupError(f"no backup at {backup}")
    saved_artifacts = artifacts_copy(backup)
    if artifacts_dir is not None and not saved_artifacts.is_dir():
        raise BackupError(f"the backup has no artifacts folder ({saved_artifacts})")
    key_target = key_file_of(target) if key_file is not None else None
    if key_file is not None and not key_file.is_file():
        raise BackupError(f"no key file at {key_file}")
    existing = [target, *([key_target] if key_target else [])]
    if artifacts_dir is not None and artifacts_dir.is_dir() and any(artifacts_dir.iterdir()):
        existing.append(artifacts_dir)  # an empty folder (made by a server started once) is fine
    _refuse_existing(*existing)
    target.parent.mkdir(parents=True, exist_ok=True)
    _copy_database(backup, target)
    if artifacts_dir is not None:
        shutil.copytree(saved_artifacts, artifacts_dir, dirs_exist_ok=True)
    if key_file is not None and key_target is not None:
        shutil.copyfile(key_file, key_target)
        os.chmod(key_target, 0o600)
    return Restored(target, artifacts_dir, key_target)
