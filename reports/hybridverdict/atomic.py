"""New files written whole or not at all, never over an existing one.

``write_new(path, fill)`` writes through a temporary file in the same folder
(``fill`` gets its binary file object), flushes and fsyncs it, then gives it its
name with ``os.link``, which fails if the name exists (a file that appeared
meanwhile is never replaced; ``os.replace`` would), and fsyncs the folder.  On a
file system without hard links the temporary file is renamed with
``os.replace`` after checking the name is free.  On any error the temporary
file is removed and nothing appears under `path`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable
from typing import BinaryIO

#: the prefix of temporary files (hidden, so no reader takes them for outputs)
TMP_PREFIX = '.tmp-'


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_new(path: str, fill: Callable[[BinaryIO], None]) -> str:
    """Write a new file `path` with `fill(fp)`; FileExistsError if it exists."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.lexists(path):
        raise FileExistsError(errno.EEXIST, 'will not overwrite', path)
    fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX + os.path.basename(path) + '.',
                               dir=directory)
    try:
        with os.fdopen(fd, 'wb') as fp:
            fill(fp)
            fp.flush()
            os.fsync(fp.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise
        except OSError as err:          # no hard links here: rename, the name was free
            if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK,
                                 errno.ENOSYS):
                raise
            if os.path.lexists(path):
                raise FileExistsError(errno.EEXIST, 'will not overwrite', path) from None
            os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    _fsync_dir(directory)
    return path


def write_text(path: str, text: str) -> str:
    """A new UTF-8 text file (see ``write_new``)."""
    data = text.encode('utf-8')

    def fill(fp: BinaryIO) -> None:
        fp.write(data)
    return write_new(path, fill)
