"""Where the checkout's parts are (the package is installed editable from it)."""

from __future__ import annotations

import hashlib
import os
import shlex

REPO_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC_DIR = os.path.join(REPO_DIR, 'src')
#: Where the systems' references files live unless ReFrame's reference prefix
#: (``RFM_REFERENCE_PREFIX``; ReFrame 4.10.4's configuration schema does not
#: accept ``general/reference_prefix`` yet) says otherwise.
REFERENCES_DIR = os.path.join(REPO_DIR, 'config', 'references')


def var_dir(cwd: str | None = None) -> str:
    """``HARNESS_VAR_DIR``, else the checkout's ``var/``: where ``./harness`` and
    ReFrame's configuration put perflogs, stage and reports, so that the report
    tools read what the runs wrote from whichever directory they are run.
    The one reading of the knob: a blank value is the default, any other is
    read as ``user_path`` reads it (from `cwd`)."""
    text = os.environ.get('HARNESS_VAR_DIR', '')
    if not text.strip():
        return os.path.join(REPO_DIR, 'var')
    return user_path(text, cwd)


def user_path(text: str, cwd: str | None = None) -> str:
    """A path a knob names, as ``./harness`` resolves it (its ``absolute``): ``~``
    is the home, and a relative path is taken from `cwd` (default: this process's
    directory; ReFrame's configuration passes the one the user ran ReFrame from)."""
    return os.path.normpath(os.path.join(cwd or os.getcwd(), os.path.expanduser(text)))


def references_dir() -> str:
    """``RFM_REFERENCE_PREFIX``, else the checkout's references (as the checks read them);
    a leading ``~`` is the home, as ``user_path`` reads it (hybridverdict-baseline wrote
    ``~/refs`` into a folder ``~`` of the current directory, where no check reads it)."""
    text = os.environ.get('RFM_REFERENCE_PREFIX', '').strip()
    return os.path.expanduser(text) if text else REFERENCES_DIR


def reframe_path(path: str) -> str:
    """`path` as ReFrame (and CMake, and a shell) can take it.

    ReFrame expands ``$VAR``, ``$(command)`` and backquotes in its
    configuration's paths and in options such as ``--report-junit``
    (``osext.expandvars``: it *runs* the command), and its local scheduler
    splits a job script's path at spaces.  A folder whose name has any
    character that the shell would need quoted is therefore given to ReFrame
    as a link to it, ``<checkout>/.var-links/<hash>``: the files still land in
    the folder itself, and no text of it reaches a shell.  ValueError where
    the link cannot be made.
    """
    if shlex.quote(path) == path:
        return path
    links = os.path.join(REPO_DIR, '.var-links')
    if shlex.quote(links) != links:
        raise ValueError(f'the checkout {REPO_DIR!r} has a character ReFrame cannot take '
                         f'in a path (a space, $, quotes...): move it')
    link = os.path.join(links, hashlib.sha1(os.fsencode(path)).hexdigest()[:16])
    try:
        os.makedirs(links, exist_ok=True)
        if not (os.path.islink(link) and os.readlink(link) == path):
            tmp = f'{link}.tmp-{os.getpid()}'
            os.symlink(path, tmp)
            os.replace(tmp, link)
    except OSError as err:
        raise ValueError(f'cannot link {link} to {path!r}: {err.strerror}') from None
    return link
