"""Stamps kept in Django's file cache, re-read only when their file was replaced.

Every request compares two stamps. With the file cache that meant opening, reading and unpickling two
files per request (a fifth of a small call's time). Django's file cache writes a value by renaming a new file
over the old one (copying into it only when a rename fails), and `delete`, `clear`, culling and expiry
unlink it. So this process keeps each stamp's file open and remembers its identity (device, inode and change
time): while the path still names that same, unchanged file, the value read from it is current. Holding
the file open keeps its inode from being reused by a new file, so no change can look like "unchanged";
checking the path (not only the held file) also catches a cache directory moved aside or reached through a
symlink that was swapped, and overlay filesystems, where a replaced lower-layer file still looks linked.

Only for filesystems where a path's identity is current the moment another process changes it (local ones,
listed below). On NFS, SMB or a FUSE mount attributes may be cached, so there every read opens the file,
as Django does.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from django.core.cache.backends.filebased import FileBasedCache

# Filesystems where a path names the new file as soon as another process has replaced the old one.
LOCAL_FILESYSTEMS = frozenset(
    {
        "ext2",
        "ext3",
        "ext4",
        "xfs",
        "btrfs",
        "tmpfs",
        "ramfs",
        "overlay",
        "zfs",
        "f2fs",
        "bcachefs",
        "jfs",
    }
)
MOUNTINFO = "/proc/self/mountinfo"


@dataclass(frozen=True)
class HeldStamp:
    fd: int
    identity: tuple[int, int, int]  # (st_dev, st_ino, st_ctime_ns) of the file read
    value: str


class HeldStampFiles:
    """The stamp files this process holds open, by path, and the values read from them.

    The filesystem type of a cache directory is looked up once per process; a stamp past its timeout
    (`REVISION_TIMEOUT`) is served until some process reads through and replaces it, which every process
    then sees.
    """

    def __init__(self) -> None:
        self._held: dict[str, HeldStamp] = {}
        # One lock for checks and re-reads (a miss reads the cache under it, rarely: a first read, a moved stamp).
        self._lock = threading.Lock()

    def read(self, path: str, read_through: Callable[[], str]) -> str:
        """The stamp in the file at `path`: the held value while `path` still names the held file, else
        `read_through()` (which reads the cache, creating a missing stamp), held for next time if the file
        could be opened first."""
        with self._lock:
            held = self._held.get(path)
            if held is not None:
                if self._unchanged(path, held):
                    return held.value
                self._drop(path)
            try:
                # Opened before reading: if the path still names it afterwards, it is the file that was read.
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except FileNotFoundError:
                return read_through()
            try:
                identity = _identity(os.fstat(fd))
                value = read_through()
                try:
                    named = _identity(os.stat(path)) == identity
                except OSError:  # gone, or the directory changing under us: read again next time
                    named = False
            except BaseException:
                os.close(fd)
                raise
            if named:
                self._held[path] = HeldStamp(fd, identity, value)
            else:
                os.close(fd)
            return value

    @staticmethod
    def _unchanged(path: str, held: HeldStamp) -> bool:
        """The held descriptor is still the file read (nothing closed it behind our back), and the path still
        names it. Any error (the file gone, the descriptor closed) counts as changed."""
        try:
            return _identity(os.fstat(held.fd)) == held.identity == _identity(os.stat(path))
        except OSError:
            return False

    def _drop(self, path: str) -> None:
        held = self._held.pop(path)
        try:
            # The same inode (its change time moved when it was replaced), else the number is someone else's now.
            if _identity(os.fstat(held.fd))[:2] == held.identity[:2]:
                os.close(held.fd)
        except OSError:
            pass  # closed behind our back: nothing of ours to release

    def release(self) -> None:
        """Close every held file (the next read opens them again)."""
        with self._lock:
            for path in list(self._held):
                self._drop(path)

    def _after_fork(self) -> None:
        """A child inherits the held files (still valid) but not a lock another thread may have held."""
        self._lock = threading.Lock()


def _identity(status: os.stat_result) -> tuple[int, int, int]:
    """Which file, and which version of it: the change time moves when Django copies into an existing file
    (its fallback when a rename fails) and tells apart inode numbers a filesystem hands out again."""
    return status.st_dev, status.st_ino, status.st_ctime_ns


held_stamp_files = HeldStampFiles()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=held_stamp_files._after_fork)


def holds_stamps(cache: object) -> bool:
    """Whether stamps in `cache` are read through `read_held`: a file cache on a local filesystem."""
    return isinstance(cache, FileBasedCache) and is_local_filesystem(_cache_dir(cache))


def read_held(cache: FileBasedCache, key: str, read_through: Callable[[], str]) -> str:
    """The stamp under `key` in a cache `holds_stamps` accepts, through `held_stamp_files`."""
    return held_stamp_files.read(_stamp_path(cache, key), read_through)


def _stamp_path(cache: FileBasedCache, key: str) -> str:
    """The file of `key` (Django's `_key_to_file`), worked out once per cache configuration and key, not per
    instance: requests share `process_cache()`'s, but a caller may pass its own, and every instance with the
    same location, prefix, version and key function names the same file."""
    configuration = (_cache_dir(cache), cache.key_prefix, cache.version, cache.key_func, key)
    path = _paths.get(configuration)
    if path is None:
        path = _paths[configuration] = str(getattr(cache, "_key_to_file")(key))  # noqa: B009  (private: not in the stubs)
    return path


def _cache_dir(cache: FileBasedCache) -> str:
    """The file cache's directory (Django keeps it as `_dir`, which the stubs do not declare)."""
    return str(getattr(cache, "_dir"))  # noqa: B009


_paths: dict[tuple[object, ...], str] = {}


@lru_cache(maxsize=32)
def is_local_filesystem(directory: str) -> bool:
    """Whether `directory` is on a filesystem in LOCAL_FILESYSTEMS, per the kernel's mount table (False
    where there is none to read: other systems keep reading the files each time)."""
    return filesystem_type(os.path.realpath(directory)) in LOCAL_FILESYSTEMS


def filesystem_type(path: str, mountinfo: str = MOUNTINFO) -> str | None:
    """The type of the filesystem mounted deepest above `path`, from a `/proc/<pid>/mountinfo` table."""
    try:
        with open(mountinfo, encoding="utf-8", errors="surrogateescape") as table:
            lines = table.read().splitlines()
    except OSError:
        return None
    best, best_type = "", None
    for line in lines:
        fields, _, rest = line.partition(" - ")
        parts = fields.split()
        if len(parts) < 5 or not rest:
            continue
        mount_point = _unescape(parts[4])
        inside = path == mount_point or path.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, best_type = mount_point, rest.split()[0]
    return best_type


def _unescape(field: str) -> str:
    """Mount points escape space, tab, newline and backslash as octal (`\\040`)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field
