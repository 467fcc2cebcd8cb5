"""Who may write a file gputui trusts with what to run: OpenSSH's rule ("Bad owner or
permissions") for the file and every directory above it. The config (gputui/config/file.py) and what a
local host's entry names to run (its python, its wrap command) are trusted only under it.
"""

from __future__ import annotations

import os
import stat

UNTRUSTED = (
    "gputui trusts a config, and what it names to run, only where you or root own it and nobody else "
    "can write it or a directory above it (as OpenSSH does): chown or chmod it, or pass your own with "
    "--config"
)


def ownership_problem(path: str, st: os.stat_result | None = None) -> str | None:
    """Why the file at `path` (a real path: no symlink in it) is not to be trusted by this process,
    or None. OpenSSH's rule ("Bad owner or permissions"), for the file and every directory above it
    up to /: owned by the running user or root; not writable by others; writable by its group only
    when that group has no member but its owner (a user private group). A directory others or its
    group may write is fine with the sticky bit (/tmp): nobody may then replace what is not theirs.
    `st`: the file's stat, when it is open already."""
    uid = os.geteuid()
    try:
        st = os.stat(path) if st is None else st
    except OSError as exc:
        return f"cannot check {path}: {exc.strerror or exc}"
    problem = _stat_problem(st, uid, sticky_ok=False)
    if problem:
        return problem
    parent = os.path.dirname(path)
    while True:
        try:
            dst = os.lstat(parent)
        except OSError as exc:
            return f"cannot check the directory {parent}: {exc.strerror or exc}"
        problem = _stat_problem(dst, uid, sticky_ok=True)
        if problem:
            return f"the directory {parent} {problem.removeprefix('it ')}"
        up = os.path.dirname(parent)
        if up == parent:
            return None
        parent = up


def _stat_problem(st: os.stat_result, uid: int, sticky_ok: bool) -> str | None:
    if st.st_uid not in (uid, 0):
        you = "root (you)" if uid == 0 else f"you ({_user(uid)}) or root"
        return f"it is owned by {_user(st.st_uid)}, not by {you}"
    sticky = sticky_ok and bool(st.st_mode & stat.S_ISVTX)
    if st.st_mode & stat.S_IWOTH and not sticky:
        return "it is writable by others"
    if st.st_mode & stat.S_IWGRP and not sticky and not _private_group(st.st_gid, st.st_uid):
        return f"it is writable by its group {_group(st.st_gid)}"
    return None


def _user(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (KeyError, ImportError):
        return f"uid {uid}"


def _group(gid: int) -> str:
    try:
        import grp

        return f"gid {gid} ({grp.getgrgid(gid).gr_name})"
    except (KeyError, ImportError):
        return f"gid {gid}"


def _private_group(gid: int, owner: int) -> bool:
    """The group has no member but the owner: none listed, and no other user has it as primary."""
    try:
        import grp
        import pwd

        name = pwd.getpwuid(owner).pw_name
        members = set(grp.getgrgid(gid).gr_mem)
        if members - {name}:
            return False
        return all(p.pw_uid == owner for p in pwd.getpwall() if p.pw_gid == gid)
    except (KeyError, ImportError):
        return False
