"""Writes that never leave a half-written file, and never replace a file by accident.

Every file is written to a hidden temporary file in the same folder, flushed
and ``fsync``'d, then put in place in one step: a hard link where it must be
new (:func:`new_file`, :func:`write_new`: ``FileExistsError`` if the name
exists, even if it appeared meanwhile; on a file system without hard links a
rename after checking the name is free), ``os.replace`` where a file is
replaced on purpose (:func:`replaced_file`, :func:`write_replacing`).  The
folder is fsync'd after.  On any error (a full disk, an interrupt) the
temporary file is removed and the destination is as it was: absent, or its
previous content.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import BinaryIO, Union

#: The prefix of temporary files (hidden, so no reader takes them for outputs).
TMP_PREFIX = '.tmp-'

#: What a writer takes: the bytes or text of the file, or a function that
#: writes it into the binary file object it is given.
Content = Union[bytes, str, Callable[[BinaryIO], None]]

#: os.link's errors where the file system has no hard links.
_NO_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS)


@contextlib.contextmanager
def _staged(path: str) -> Iterator[tuple[BinaryIO, str]]:
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
            yield fp, tmp
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _sync(fp: BinaryIO) -> None:
    fp.flush()
    os.fsync(fp.fileno())


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
    except FileExistsError:
        raise
    except OSError as err:
        if err.errno not in _NO_LINKS:
            raise
        if os.path.lexists(path):   # no hard links here: rename, if the name is free
            raise FileExistsError(errno.EEXIST, 'will not overwrite', path) from None
        os.replace(tmp, path)


@contextlib.contextmanager
def new_file(path: str) -> Iterator[BinaryIO]:
    """A binary file to write `path` through; it appears, whole, when the
    block ends without error.  FileExistsError if `path` exists."""
    if os.path.lexists(path):
        raise FileExistsError(errno.EEXIST, 'will not overwrite', path)
    with _staged(path) as (fp, tmp):
        yield fp
        _sync(fp)
        try:
            _link_new(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    _sync_dir(path)


@contextlib.contextmanager
def replaced_file(path: str) -> Iterator[BinaryIO]:
    """A binary file to write `path` through; it replaces `path`, whole, when
    the block ends without error (the old content stays otherwise)."""
    with _staged(path) as (fp, tmp):
        yield fp
        _sync(fp)
        os.replace(tmp, path)
    _sync_dir(path)


def _fill(fp: BinaryIO, data: Content) -> None:
    if callable(data):
        data(fp)
    else:
        fp.write(data.encode('utf-8') if isinstance(data, str) else data)


def write_new(path: str, data: Content) -> str:
    """`data` as the new file `path` (FileExistsError if it exists); `path`."""
    with new_file(path) as fp:
        _fill(fp, data)
    return path


def write_text(path: str, text: str) -> str:
    """A new UTF-8 text file (see ``write_new``)."""
    return write_new(path, text)


def write_replacing(path: str, data: Content) -> None:
    """`data` as `path`, replacing it whole or not at all."""
    with replaced_file(path) as fp:
        _fill(fp, data)


__all__ = ['Content', 'new_file', 'replaced_file', 'write_new', 'write_replacing',
           'write_text']
