"""Where the audit log lives (`default_log_path`: the user's state directory) and opening its path
safely, to write it (`ActionLog`) or to read it (at every start); the errors that say why it cannot
be: `AuditError`, and `UnsafeLog` for a path that is not safe to use at all (a usage error: pass
--log PATH).

The path is opened the same way to read as to write (`open_log`), or refused with `UnsafeLog`: the
last component is never a symlink and must be a regular file (a FIFO, a device or a directory is
refused before it is opened) with one link, owned by root or the user running gputui (root: by
root). The path is walked from / one directory at a time (openat): a directory that another user
controls (owned by another uid, or writable by others and not sticky) holds no component, and a
symlink on the way is followed only when no other user could have placed it.

Apart from the writer and the reader because these checks are the same for both and are most of
what makes the log safe to trust; nothing here knows what a record is.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

MAX_SYMLINKS = 40  # as the kernel's own limit on a path lookup


class AuditError(OSError):
    """The audit log cannot be written (or opened safely): the message says what and where."""


class UnsafeLog(AuditError):
    """The log's path is not safe to open, to read or to write: not a regular file, a symlink, another
    user's file, or a path another user could point elsewhere. A usage error: pass --log PATH."""


def default_log_path() -> Path:
    from platformdirs import user_state_dir

    return Path(user_state_dir("gputui")) / "actions.jsonl"


def open_log(path: Path, *, write: bool) -> int | None:
    """A descriptor on the log: for appending (read-write, created 0600 with its missing directories
    0700) or for reading (None when there is no log). Raises UnsafeLog when the path is not safe to
    use (the module's docstring says what that is), AuditError when it cannot be opened.

    The walk holds each directory open and looks up the next name in it (openat), so nothing another
    user does between a check and the use can redirect it; the checks are those of OpenSSH's
    StrictModes, applied to every directory on the way: root and the user running gputui are trusted,
    and no one else may be able to change an entry the walk goes through."""
    try:
        where, dir_fd, name = _walk(path, create=write)
    except FileNotFoundError:
        if write:
            raise audit_error(path, OSError(errno.ENOENT, "No such file or directory"), "open it") from None
        return None
    try:
        info = _lstat(name, dir_fd)
        _check_entry(path, where, os.fstat(dir_fd), name, info)
        if info is not None:
            _check_file(path, info)  # before opening: opening a FIFO or a device is an act in itself
        elif not write:
            return None
        flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
        flags |= (os.O_RDWR | os.O_APPEND | os.O_CREAT) if write else os.O_RDONLY
        try:
            fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafeLog(exc.errno, f"audit log {path} is a symbolic link: refused") from None
            if exc.errno == errno.ENOENT and not write:
                return None
            raise audit_error(path, exc, "open it") from None
        try:
            _check_file(path, os.fstat(fd))  # what was opened, whatever happened since the lstat
            if info is None:
                _fsync(dir_fd)  # the new file's name must survive a crash too
        except BaseException:
            os.close(fd)
            raise
        return fd
    finally:
        os.close(dir_fd)


def _walk(path: Path, create: bool) -> tuple[Path, int, str]:
    """(the directory holding the log, a descriptor on it, the log's name in it): `path` walked from /
    (a relative one from the working directory), one component at a time, following only symlinks that
    no other user could have placed. FileNotFoundError for a missing directory unless `create`."""
    todo = [p for p in os.path.join(os.getcwd(), os.fspath(path)).split("/") if p not in ("", ".")]
    if not todo:
        raise UnsafeLog(errno.EISDIR, f"audit log {path} is not a regular file")
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    where = Path("/")
    links = 0
    try:
        while True:
            name = todo.pop(0)
            if not todo and name != "..":
                return where, fd, name
            if name == "..":  # an entry nobody can replace: up, physically (not by the text)
                step = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd, where = step, where.parent
                if not todo:
                    raise UnsafeLog(errno.EISDIR, f"audit log {path} is not a regular file")
                continue
            info = _lstat(name, fd)
            _check_entry(path, where, os.fstat(fd), name, info)
            if info is None:
                if not create:
                    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(where / name))
                try:
                    os.mkdir(name, 0o700, dir_fd=fd)
                except FileExistsError:
                    pass
                info = _lstat(name, fd)
                _check_entry(path, where, os.fstat(fd), name, info)
            if info is not None and stat.S_ISLNK(info.st_mode):
                links += 1
                if links > MAX_SYMLINKS:
                    raise UnsafeLog(errno.ELOOP, f"audit log {path}: too many symbolic links on the way")
                target = os.readlink(name, dir_fd=fd)
                if target.startswith("/"):
                    step = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                    os.close(fd)
                    fd, where = step, Path("/")
                todo[:0] = [p for p in target.split("/") if p not in ("", ".")]
                continue
            try:
                step = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except NotADirectoryError:
                raise UnsafeLog(
                    errno.ENOTDIR, f"audit log {path}: {where / name} is not a directory"
                ) from None
            os.close(fd)
            fd, where = step, where / name
    except OSError as exc:
        os.close(fd)
        if isinstance(exc, (AuditError, FileNotFoundError)):
            raise
        raise audit_error(path, exc, "open it") from None


def _trusted(uid: int) -> bool:
    """Root and the user running gputui: the only ones whose files and directories the log may use."""
    return uid in (0, os.geteuid())


def _check_entry(
    path: Path, where: Path, holder: os.stat_result, name: str, info: os.stat_result | None
) -> None:
    """`name` (lstat `info`, None if missing) in the directory `where` (fstat `holder`): refused when
    another user could have put it there or could replace it."""
    if not _trusted(holder.st_uid):
        raise UnsafeLog(
            errno.EPERM,
            f"audit log {path}: the directory {where} belongs to uid {holder.st_uid}, who could replace "
            f"{name} there: refused (pass --log PATH)",
        )
    others = holder.st_mode & stat.S_IWOTH or (
        holder.st_mode & stat.S_IWGRP and holder.st_gid != os.getegid()
    )
    if not others:
        return
    if not holder.st_mode & stat.S_ISVTX:
        raise UnsafeLog(
            errno.EPERM,
            f"audit log {path}: the directory {where} is writable by other users "
            f"(mode {stat.S_IMODE(holder.st_mode):04o}, no sticky bit), who could replace {name} there: "
            "refused (pass --log PATH)",
        )
    if info is not None and not _trusted(info.st_uid):  # like /tmp: an entry is its owner's to change
        what = "symbolic link" if stat.S_ISLNK(info.st_mode) else "entry"
        raise UnsafeLog(
            errno.EPERM,
            f"audit log {path}: {where / name} is a {what} of uid {info.st_uid} in the shared directory "
            f"{where}: refused (pass --log PATH)",
        )


def _check_file(path: Path, info: os.stat_result) -> None:
    """A regular file with one link, of a trusted owner (root's own when root uses it)."""
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeLog(errno.ELOOP, f"audit log {path} is a symbolic link: refused")
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeLog(errno.EINVAL, f"audit log {path} is not a regular file: refused")
    if info.st_nlink != 1:
        raise UnsafeLog(errno.EINVAL, f"audit log {path} has {info.st_nlink} links: refused")
    if not _trusted(info.st_uid):
        me = "root" if os.geteuid() == 0 else f"you (uid {os.geteuid()})"
        raise UnsafeLog(
            errno.EPERM,
            f"audit log {path} belongs to uid {info.st_uid}, not {me}: refused (gputui uses only a log of "
            "its own user's or root's; pass --log PATH)",
        )


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def audit_error(path: Path, exc: OSError, doing: str) -> AuditError:
    """`audit log PATH: cannot DOING: WHY`, the one way every failure to use the log is said."""
    return AuditError(exc.errno or errno.EIO, f"audit log {path}: cannot {doing}: {exc.strerror or exc}")


def _fsync(fd: int) -> None:
    try:
        os.fsync(fd)
    except OSError:
        pass
