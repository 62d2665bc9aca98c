"""The multiprocess directory of :mod:`pipetel.multiprocess` under the rules of pipetel's rows
store: the directory checked (private, this user's, not a link), worker files written 0600,
exclusively and atomically without following links, and read without following links or
blocking, capped in size. No text is read or written here: the files are envelopes, and the page
is the core's (see :mod:`pipetel.multiprocess`)."""

import logging
import os
import secrets
import stat
from typing import Optional, Set

#: A worker file larger than this is not read (skipped, and logged once): no worker's page is
#: anywhere near it, and a scrape must not read a planted giant.
MAX_FILE_BYTES = 64 << 20
# The module's messages are pipetel.multiprocess's.
_log = logging.getLogger("pipetel.multiprocess")
_warned: Set[str] = set()


def _refuse(directory: str, why: str) -> PermissionError:
    return PermissionError(f"{directory}: {why}")


def open_directory(directory: str, create: bool = False) -> int:
    """The multiprocess directory, checked and opened (a descriptor the caller closes): created
    0700 (with its missing parents) when ``create``; refused when it is a symbolic link, belongs
    to another user, or is writable by group or other users (any of them could plant or replace
    files the merged page is made of), with a :class:`PermissionError` naming the directory and
    the rule. The rules of pipetel's rows store."""
    if create:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    if os.path.islink(directory):
        raise _refuse(directory, "the multiprocess directory is a symbolic link; refusing it (name the directory itself)")
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(directory, flags)
    except OSError as e:
        raise OSError(e.errno, f"{directory}: cannot open the multiprocess directory: {e.strerror}") from e
    try:
        st = os.fstat(fd)
        me = os.geteuid()
        if st.st_uid != me:
            raise _refuse(
                directory,
                f"the multiprocess directory belongs to uid {st.st_uid}, not to this user (uid {me}); refusing it",
            )
        if st.st_mode & 0o022:
            raise _refuse(
                directory,
                f"the multiprocess directory is writable by group or other users (mode {stat.S_IMODE(st.st_mode):o});"
                " refusing it (chmod go-w, or pick a private directory)",
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        _log.warning("%s", message)


def _read_file(dir_fd: int, directory: str, name: str) -> Optional[bytes]:
    """The bytes of a worker file, or ``None`` (logged once) when it is not a regular file of
    this user, is larger than :data:`MAX_FILE_BYTES`, or vanished. Never follows a link and never
    blocks on a FIFO."""
    path = os.path.join(directory, name)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        return None  # replaced between the listing and the open
    except OSError as e:
        _warn_once(f"open:{path}", f"{path}: not read ({e.strerror}; a worker file is never a symbolic link)")
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            _warn_once(f"type:{path}", f"{path}: not read (not a regular file)")
            return None
        if st.st_uid != os.geteuid():
            _warn_once(f"uid:{path}", f"{path}: not read (belongs to uid {st.st_uid}, not to this user)")
            return None
        if st.st_size > MAX_FILE_BYTES:
            _warn_once(f"size:{path}", f"{path}: not read ({st.st_size} bytes, more than {MAX_FILE_BYTES})")
            return None
        chunks = []
        left = MAX_FILE_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:  # grew past the cap while read
            _warn_once(f"size:{path}", f"{path}: not read (more than {MAX_FILE_BYTES} bytes)")
            return None
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _write_file(dir_fd: int, name: str, data: bytes) -> None:
    """Writes ``data`` to the entry ``name`` atomically: a new 0600 file with a random name,
    created exclusively without following links, then renamed over ``name``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    tmp = f".{name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except BaseException:
        os.close(fd)
        os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.close(fd)
    try:
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        os.unlink(tmp, dir_fd=dir_fd)
        raise
