"""What a path is before a reader opens it: a regular file, a folder, or something no reader should touch.

A named pipe blocks the reader that opens it until something writes to it, and a device such as
/dev/zero never ends; neither is a metric log, and each is said to be what it is instead of "no metric
logs found".  A file that cannot be opened is said to be unreadable (permission denied), not "not a
metric log", which is what a reader that cannot sniff it would conclude.
"""

from __future__ import annotations

import os
import stat

_SPECIAL = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
            (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def special_kind(mode: int) -> str | None:
    """What a non-regular, non-directory file is ("a named pipe (FIFO)", ...); None for files and folders."""
    for test, name in _SPECIAL:
        if test(mode):
            return name
    return None


def why_not_readable(path: str) -> str | None:
    """Why a path cannot be read as a file or folder (missing, a pipe or device, permission denied), or None."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a broken symbolic link" if os.path.islink(path) else "no such file or directory"
    except PermissionError:
        return "permission denied (a folder above it cannot be searched)"
    except OSError as exc:
        return f"cannot look it up ({exc.strerror or exc})"
    kind = special_kind(mode)
    if kind is not None:
        return f"{kind}, not a regular file; stabdiag reads metric log files and directories of them"
    if stat.S_ISDIR(mode):
        return None if os.access(path, os.R_OK | os.X_OK) else "permission denied (cannot list this folder)"
    return cannot_open(path)


def cannot_open(path: str) -> str | None:
    """Why a regular file cannot be opened for reading, or None when it can."""
    try:
        with open(path, "rb"):
            return None
    except PermissionError:
        return "permission denied (cannot open the file for reading)"
    except IsADirectoryError:
        return None
    except OSError as exc:
        return f"cannot open the file ({exc.strerror or exc})"


def overwritten_input(output: str, inputs: list[str]) -> str | None:
    """The input that writing `output` would overwrite, or None.  Paths are compared resolved (symbolic
    links followed): `output` may not be an input file, nor an existing file inside an input folder,
    nor a hard link to one (the data being judged is read-only)."""
    target = os.path.realpath(output)
    try:
        target_stat = os.stat(target)
    except OSError:
        target_stat = None
    for given in inputs:
        if "://" in given:
            continue
        real = os.path.realpath(given)
        if target == real:
            return given
        if os.path.isdir(real):
            if target_stat is not None and target.startswith(real.rstrip(os.sep) + os.sep):
                return os.path.join(given, os.path.relpath(target, real))
            if target_stat is not None and target_stat.st_nlink > 1:
                found = _hard_link_in(real, target_stat)
                if found is not None:
                    return os.path.join(given, os.path.relpath(found, real))
        elif target_stat is not None:
            try:
                if os.path.samefile(real, target):
                    return given
            except OSError:
                pass
    return None


def _hard_link_in(folder: str, target: os.stat_result) -> str | None:
    for dirpath, _, filenames in os.walk(folder):
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            if (st.st_ino, st.st_dev) == (target.st_ino, target.st_dev):
                return path
    return None


def inside(path: str, folder: str) -> bool:
    """`path` is `folder` or lies below it (both as given: resolve links first where they matter)."""
    path, folder = os.path.normpath(path), os.path.normpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
