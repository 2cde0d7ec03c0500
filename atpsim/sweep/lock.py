"""One run per output folder: an exclusive lock on ``<folder>/.atpsim.lock`` for as long as a
run (or a report rebuild) writes there.

The lock is an ``flock`` on the file, so the kernel releases it when its holder exits, however
it exits (a killed run leaves no stale lock). The holder writes its pid into the file, so a
second run is refused with one line naming the first. The file is removed on release; a run
that opened it just before checks after locking that it still holds the file at that path.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from atpsim.errors import OutputLockedError, param

LOCK_FILE = ".atpsim.lock"

try:
    import fcntl
except ImportError:  # not POSIX: runs are not guarded
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def folder_lock(folder: Path | str) -> Iterator[Path]:
    """Hold the lock of *folder* (created if missing) while the block runs; raise
    :class:`OutputLockedError` naming the holder's pid when another process holds it."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_FILE
    if fcntl is None:
        yield path
        return
    fd = _acquire(path, out)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(fd)


def _acquire(path: Path, out: Path) -> int:
    """The open, locked descriptor of *path*, with this process's pid written in it."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"pid {holder}" if holder else "another process"
            raise OutputLockedError(
                f"another atpsim run ({who}) is writing this folder; wait for it to finish or "
                f"choose another {param('out_dir')}",
                source=str(out),
            ) from None
        if _same_file(fd, path):
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)  # the holder released and removed it between our open and lock


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except OSError:
        return False


def _read_pid(fd: int) -> str:
    try:
        return os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
