"""Saving a folder atomically when several processes save to, or load from, the same path.

A save writes its files into a hidden staging folder beside the target, ``.NAME.saving-<token>``,
and then, holding the target's lock, renames the previous folder aside (``.NAME.old-<token>``),
renames the staging folder into place and deletes the previous one. Readers hold the same lock
(shared) while they read, so they see the previous folder or the new one, whole, never a missing
or a half-written one.

The lock is an advisory ``fcntl.flock`` on ``.NAME.lock`` beside the target (Linux, macOS). The
file is removed by the last holder, so nothing is left behind: a process that acquires a lock
file that has meanwhile been removed (or replaced) gives it up and locks the current one.

Leftovers of saves that crashed are removed by the next save, under the lock: every
``.NAME.old-<token>`` (a save creates and removes its own inside the lock, so any found there is
left over), and every ``.NAME.saving-<token>`` whose owner is gone (a live save holds a lock on
its staging folder from its creation, which happens under the target's lock, until it is renamed
into place or removed; the kernel releases it when the process dies).

Without ``fcntl`` (Windows), or on a file system without ``flock``, the folder is still renamed
into place, but saves are not serialised, readers are not protected and leftovers are not removed.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no advisory locks (see the module docstring)
    fcntl = None  # type: ignore[assignment]

__all__ = ["ConcurrentSaveError", "LOCK_TIMEOUT", "folder_lock", "move_into_place", "staging_folder"]

#: Seconds a save or a load waits for another process's save (or load) of the same path.
LOCK_TIMEOUT = 10.0
_POLL_SECONDS = (0.002, 0.05)  # first and longest wait between two attempts to lock
_STAGING, _OLD = "saving", "old"
# mkdtemp's 8 characters are the tokens of tsrec 0.1's saves, whose leftovers are removed too.
_TOKEN = r"(?:[0-9a-f]{12}|[a-z0-9_]{8})"
# flock's errors on a file system that does not support it: such folders are used without locks.
_NO_FLOCK = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL})


class ConcurrentSaveError(TimeoutError):
    """Another process held a saved folder's lock for longer than :data:`LOCK_TIMEOUT`."""


@contextmanager
def folder_lock(path: Path, *, exclusive: bool) -> Iterator[bool]:
    """Hold the advisory lock of the folder ``path``: exclusive to change it, shared to read it.
    Yields whether the lock is held: not without ``fcntl``, on a file system without ``flock``
    (some network mounts), nor for a reader that cannot create the lock file (a read-only
    folder, where nobody saves).

    Raises :class:`ConcurrentSaveError` after :data:`LOCK_TIMEOUT` seconds.
    """
    fd = None if fcntl is None else _acquire(_lock_file(path), path, exclusive)
    try:
        yield fd is not None
    finally:
        if fd is not None:
            _release(fd, _lock_file(path))


@contextmanager
def staging_folder(path: Path) -> Iterator[Path]:
    """A new hidden folder beside ``path`` to write a save into, locked as its owner's for as
    long as the context lasts; removed at exit unless :func:`move_into_place` moved it."""
    path = _absolute(path)
    with folder_lock(path, exclusive=True):  # so that a cleanup never sees it unlocked
        staging = _new_folder(path, _STAGING)
        owner = _lock_staging(staging)
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if owner is not None:
            os.close(owner)


def move_into_place(staging: Path, path: Path, check: Callable[[Path], None]) -> None:
    """Replace the folder ``path`` by the complete folder ``staging`` (from :func:`staging_folder`),
    holding ``path``'s lock: removes the leftovers of crashed saves, calls ``check(path)`` (which
    raises when ``path`` must not be replaced), then swaps the folders."""
    target = _absolute(path)
    with folder_lock(path, exclusive=True) as locked:
        if locked:  # else another save may be using what looks left over
            _remove_leftovers(target)
        check(path)
        if not os.path.lexists(target):
            os.replace(staging, target)
            return
        old = _new_folder(target, _OLD)
        try:
            os.replace(target, old / target.name)
        except OSError:
            old.rmdir()
            raise
        try:
            os.replace(staging, target)
        except OSError:
            os.replace(old / target.name, target)  # put the previous model back
            old.rmdir()
            raise
        shutil.rmtree(old, ignore_errors=True)


def _absolute(path: Path) -> Path:
    """``path`` made absolute without following links, so that ``.`` and ``..`` have a name and a
    parent."""
    return Path(os.path.abspath(path))


def _lock_file(path: Path) -> Path:
    path = _absolute(path)
    return path.parent / f".{path.name}.lock"


def _new_folder(path: Path, kind: str) -> Path:
    """A new empty hidden folder ``.NAME.<kind>-<token>`` beside ``path`` (owner-only access)."""
    while True:
        folder = path.parent / f".{path.name}.{kind}-{secrets.token_hex(6)}"
        try:
            folder.mkdir(mode=0o700)
            return folder
        except FileExistsError:
            continue


def _open_lock_file(lock_file: Path, exclusive: bool) -> int | None:
    """A descriptor of ``lock_file``, created when missing; None for a reader that can neither
    create nor open it."""
    try:
        return os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as err:
        if exclusive or err.errno not in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT):
            raise
    try:  # a read-only folder or another user's lock file: a shared lock needs no write access
        return os.open(lock_file, os.O_RDONLY)
    except FileNotFoundError:
        return None


def _acquire(lock_file: Path, path: Path, exclusive: bool) -> int | None:
    """Lock ``lock_file`` (the lock of ``path``); returns its descriptor (see :func:`folder_lock`)."""
    deadline = time.monotonic() + LOCK_TIMEOUT
    while True:
        fd = _open_lock_file(lock_file, exclusive)
        if fd is None:
            return None
        try:
            locked = _flock_until(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, deadline)
        except OSError as err:
            os.close(fd)
            if err.errno not in _NO_FLOCK:
                raise
            with suppress(OSError):  # useless here: leave nothing behind
                lock_file.unlink()
            return None
        if not locked:
            os.close(fd)
            who = "saving to" if not exclusive else "saving to or loading"
            raise ConcurrentSaveError(f"another process is {who} {path} (it held {lock_file} for more than "
                                      f"{LOCK_TIMEOUT:g} s); try again when it has finished")
        if _is_current(fd, lock_file):
            return fd
        os.close(fd)  # its last holder removed it: lock the file that is there now


def _flock_until(fd: int, operation: int, deadline: float) -> bool:
    """Whether ``fd`` could be locked before ``deadline`` (polling, so that the wait is bounded)."""
    pause = _POLL_SECONDS[0]
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(2 * pause, _POLL_SECONDS[1])


def _is_current(fd: int, lock_file: Path) -> bool:
    """Whether ``fd`` is the file now at ``lock_file``."""
    try:
        now = os.stat(lock_file)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino)


def _release(fd: int, lock_file: Path) -> None:
    """Unlock ``fd``, removing ``lock_file`` when nobody else holds or waits on it. Only an
    exclusive holder of the file now at ``lock_file`` removes it, so a lock file is never removed
    under another holder."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if _is_current(fd, lock_file):
            os.unlink(lock_file)
    except OSError:  # another holder (BlockingIOError), or a folder where we may not remove files
        pass
    finally:
        os.close(fd)


def _lock_staging(staging: Path) -> int | None:
    """Lock the folder ``staging`` for this process (None without ``fcntl``)."""
    if fcntl is None:
        return None
    fd = os.open(staging, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        os.close(fd)
        if err.errno in _NO_FLOCK:
            return None
        raise
    return fd


def _remove_leftovers(path: Path) -> None:
    """Remove the folders that crashed saves of ``path`` left beside it (holding ``path``'s lock;
    see the module docstring): every old folder, and the staging folders nobody holds."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.({_STAGING}|{_OLD})-{_TOKEN}")
    for entry in os.scandir(path.parent):
        found = pattern.fullmatch(entry.name)
        if found is None or not entry.is_dir(follow_symlinks=False):
            continue
        if found.group(1) == _OLD:
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            _remove_if_abandoned(Path(entry.path))


def _remove_if_abandoned(staging: Path) -> None:
    """Remove the staging folder ``staging`` unless a live save holds its lock."""
    try:
        fd = os.open(staging, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return  # a live save's
    else:
        shutil.rmtree(staging, ignore_errors=True)
    finally:
        os.close(fd)
