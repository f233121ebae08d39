"""Writes that never leave a half-written file, and never replace a file by accident.

Every file is written to a hidden temporary file in the same folder, flushed
and ``fsync``'d, then put in place in one step: a hard link where it must be
new (:func:`write_new`: ``FileExistsError`` if the name exists, even if it
appeared meanwhile; on a file system without hard links a rename after
checking the name is free), ``os.replace`` where a file is replaced on
purpose (:func:`write_replacing`).  The
folder is fsync'd after.  On any error (a full disk, an interrupt) the
temporary file is removed and the destination is as it was: absent, or its
previous content.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

#: The prefix of temporary files (hidden, so no reader takes them for outputs).
TMP_PREFIX = '.tmp-'

#: What a writer takes: the bytes or text of the file, or a function that
#: writes it into the binary file object it is given.
Content = bytes | str | Callable[[BinaryIO], None]

#: os.link's errors where the file system has no hard links.
_NO_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS)


@contextlib.contextmanager
def _staged(path: str, data: Content) -> Iterator[str]:
    """A temporary file beside `path` that holds `data`, flushed and fsync'd, to be
    put in place; removed on any error."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f'{TMP_PREFIX}{os.path.basename(path)}.',
                               suffix='.tmp')
    try:
        # mkstemp makes the file private (0600): give it the mode open() would
        # (0666 less the umask), so reports stay as readable as they were.
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, 'w+b') as fp:
            if callable(data):
                data(fp)
            else:
                fp.write(data.encode('utf-8') if isinstance(data, str) else data)
            fp.flush()
            os.fsync(fp.fileno())
            yield tmp
    except BaseException:
        remove_files([tmp])
        raise


def remove_files(paths: Iterable[str]) -> None:
    """Remove the files `paths` (a caller's own), those already gone aside."""
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _sync_dir(path: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _link_new(tmp: str, path: str) -> None:
    """Give `tmp` the name `path`, which must be free."""
    try:
        os.link(tmp, path)
    except OSError as err:
        if err.errno not in _NO_LINKS:      # FileExistsError too (EEXIST)
            raise
        if os.path.lexists(path):   # no hard links here: rename, if the name is free
            raise FileExistsError(errno.EEXIST, 'will not overwrite', path) from None
        os.replace(tmp, path)


def write_new(path: str, data: Content) -> str:
    """`data` (text is written as UTF-8) as the new file `path`, which appears whole
    (FileExistsError if it exists); `path`."""
    if os.path.lexists(path):
        raise FileExistsError(errno.EEXIST, 'will not overwrite', path)
    with _staged(path, data) as tmp:
        try:
            _link_new(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    _sync_dir(path)
    return path


def write_replacing(path: str, data: Content) -> None:
    """`data` as `path`, replacing it whole or not at all (the old content stays)."""
    with _staged(path, data) as tmp:
        os.replace(tmp, path)
    _sync_dir(path)


def unique_stem(directory: str, stem: str, suffixes: Iterable[str]) -> str:
    """`directory`/`stem`[-n], the first such that no file stem + suffix exists yet."""
    suffixes = tuple(suffixes)
    n = 0
    while True:
        base = os.path.join(directory, stem if n == 0 else f'{stem}-{n}')
        # a link to nothing is a name taken too (write_new will not replace it)
        if not any(os.path.lexists(base + s) for s in suffixes):
            return base
        n += 1


@contextlib.contextmanager
def locked(directory: str, name: str,
           refused: Callable[[str, OSError], Exception]) -> Iterator[None]:
    """An exclusive lock on the folder `directory` (the file `name` in it, made with
    the folder if need be) until the block ends: another holder waits for it.  A
    lock file that cannot be opened for writing is locked read-only (``flock``
    needs no write access); where none can be opened or made at all (a read-only
    folder without one), the block runs without it: nothing can be written there,
    and a write fails with its own error.  NFS refuses an exclusive lock on a
    read-only descriptor: that too runs without; any other refusal raises
    ``refused(path, error)``."""
    path = os.path.join(directory, name)
    fd = _open_lock(directory, path)
    if fd is None:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as err:
            if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY:
                raise refused(path, err) from err
        yield
    finally:
        os.close(fd)        # releases the lock


def _open_lock(directory: str, path: str) -> int | None:
    """A descriptor of the lock file `path` in `directory`: opened for writing
    (made, with the folder, if need be), else read-only; None where neither can be."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        return None
    for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
        with contextlib.suppress(OSError):
            return os.open(path, flags, 0o666)
    return None


__all__ = ['Content', 'locked', 'remove_files', 'unique_stem', 'write_new', 'write_replacing']
