"""Writing a file so that a reader sees the old one or the new one, never half of one.

The one home of atomic file writing (calibrations, datasets, a fleet's
results, the host cache, fused modules). It imports nothing of the package,
so that every layer may use it (`devices`, the lowest, as well).

The new content goes to a temporary file in the target's folder (a rename
is atomic only within one file system), is flushed to disk, given the old
file's permissions (a new file gets the usual ones: `mkstemp` makes it
private), and renamed over the target; the folder is then synced, so that
the rename survives a crash. A failure leaves the target as it was and
removes the temporary file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["replacing", "write_atomically"]


@contextmanager
def replacing(path, suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary path next to `path` to write the new content to; on leaving, it replaces `path`.

    **Arguments:** `path`: the file to replace (its folder is created);
    `suffix`: the temporary name's ending (keep the target's extension when
    the writer picks its format by it, e.g. `".tmp.parquet"`).

    **Yields:** the temporary path (an empty file exists there). When the
    block raises, the target is untouched and the temporary file removed.
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=folder)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, _file_mode(path))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_dir(folder)


def write_atomically(path, data: str | bytes) -> Path:
    """Write `data` (text is UTF-8) to `path` atomically (see `replacing`). **Returns:** `path` as a `Path`."""
    path = Path(path)
    with replacing(path) as tmp:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def _file_mode(path: Path) -> int:
    """The existing file's permissions, or the usual ones of a new file (0666 less the umask)."""
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - a folder that cannot be opened (Windows)
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems refuse
        pass
    finally:
        os.close(fd)
