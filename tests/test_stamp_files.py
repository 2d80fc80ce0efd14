"""Stamps in the file cache: held open and re-read exactly when their file is replaced or removed."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from django.core.cache.backends.filebased import FileBasedCache

from mcp_expose.catalog import stamp_files
from mcp_expose.catalog.revision import REVISION_TIMEOUT, read_stamps

KEY = "mcp_expose:test-stamp"


@pytest.fixture
def file_cache(tmp_path: Path) -> FileBasedCache:
    cache = FileBasedCache(str(tmp_path / "cache"), {})
    assert stamp_files.holds_stamps(cache), "the test's temporary directory should be on a local filesystem"
    yield cache
    stamp_files.held_stamp_files.release()


def rewrite_in_place(cache: FileBasedCache, key: str, value: str) -> None:
    """Change the stamp's bytes without replacing its file, as Django's `file_move_safe` does when a rename
    fails."""
    with open(cache._key_to_file(key), "r+b") as file:
        cache._write_content(file, REVISION_TIMEOUT, value)
        file.truncate()


def held(cache: FileBasedCache, key: str = KEY) -> str:
    """Read the stamp until this process holds its file (the read that makes a stamp cannot hold it: its file
    did not exist when the read began), and return it."""
    value = read_stamps(key, cache=cache)[key]
    value = read_stamps(key, cache=cache)[key]
    assert cache._key_to_file(key) in stamp_files.held_stamp_files._held
    return value


def test_an_unchanged_stamp_is_served_from_the_held_file_without_reading_the_cache(file_cache: FileBasedCache) -> None:
    first = held(file_cache)
    reads: list[str] = []

    def read_through() -> str:
        reads.append("read")
        return "read through"

    assert stamp_files.held_stamp_files.read(file_cache._key_to_file(KEY), read_through) == first
    assert reads == []


def test_a_stamp_rewritten_in_place_is_read_again(file_cache: FileBasedCache) -> None:
    """Django's `file_move_safe` copies into the existing file when a rename fails (a bind-mounted file, some
    sticky directories): the same inode, new bytes."""
    held(file_cache)
    time.sleep(0.05)  # past the filesystem's timestamp granularity, so the change time moves
    rewrite_in_place(file_cache, KEY, "written-in-place")
    assert read_stamps(KEY, cache=file_cache)[KEY] == "written-in-place"


def test_the_file_is_opened_before_it_is_read(file_cache: FileBasedCache) -> None:
    """A stamp moved between reading the value and holding the file must not be held with the old value."""
    read_stamps(KEY, cache=file_cache)
    stamp_files.held_stamp_files.release()

    def racing_read() -> str:
        value = file_cache.get(KEY)
        FileBasedCache(file_cache._dir, {}).set(KEY, "written-after-the-read", REVISION_TIMEOUT)
        return value

    stamp_files.held_stamp_files.read(file_cache._key_to_file(KEY), racing_read)
    assert read_stamps(KEY, cache=file_cache)[KEY] == "written-after-the-read"


def test_a_moved_stamp_is_read_on_the_next_request(file_cache: FileBasedCache) -> None:
    before = held(file_cache)
    other = FileBasedCache(file_cache._dir, {})  # another instance: what another thread or process writes
    other.set(KEY, "moved", REVISION_TIMEOUT)
    assert read_stamps(KEY, cache=file_cache)[KEY] == "moved" != before


def test_a_stamp_moved_by_another_process_is_read_on_the_next_request(file_cache: FileBasedCache) -> None:
    held(file_cache)
    script = (
        "import sys\n"
        "from django.conf import settings\n"
        "settings.configure()\n"
        "from django.core.cache.backends.filebased import FileBasedCache\n"
        "FileBasedCache(sys.argv[1], {}).set(sys.argv[2], sys.argv[3], 600)\n"
    )
    moved = uuid.uuid4().hex
    subprocess.run([sys.executable, "-c", script, file_cache._dir, KEY, moved], check=True, timeout=60)
    assert read_stamps(KEY, cache=file_cache)[KEY] == moved


@pytest.mark.parametrize("lose", ["delete", "clear"])
def test_a_lost_stamp_is_made_again_and_held_again(file_cache: FileBasedCache, lose: str) -> None:
    before = held(file_cache)
    file_cache.delete(KEY) if lose == "delete" else file_cache.clear()
    again = read_stamps(KEY, cache=file_cache)[KEY]
    assert again != before and file_cache.get(KEY) == again  # a new stamp, and the one every process will read
    assert held(file_cache) == again


def test_a_cache_directory_moved_aside_or_swapped_behind_a_symlink_is_read_again(tmp_path: Path) -> None:
    """The held file still exists (still linked) after these, but the cache's path no longer names it."""
    (tmp_path / "release-1").mkdir()
    (tmp_path / "current").symlink_to(tmp_path / "release-1")
    cache = FileBasedCache(str(tmp_path / "current"), {})
    try:
        before = held(cache)
        (tmp_path / "release-2").mkdir()
        FileBasedCache(str(tmp_path / "release-2"), {}).set(KEY, "after-the-swap", REVISION_TIMEOUT)
        (tmp_path / "next").symlink_to(tmp_path / "release-2")
        os.replace(tmp_path / "next", tmp_path / "current")  # what a release deploy does
        assert read_stamps(KEY, cache=cache)[KEY] == "after-the-swap" != before

        held(cache)
        os.rename(tmp_path / "release-2", tmp_path / "release-2.old")
        (tmp_path / "release-2").mkdir()  # an empty cache where the old one was: the stamp is made again
        again = read_stamps(KEY, cache=cache)[KEY]
        assert again not in ("after-the-swap", before) and cache.get(KEY) == again
    finally:
        stamp_files.held_stamp_files.release()


def test_a_held_file_closed_behind_our_back_is_opened_again(file_cache: FileBasedCache) -> None:
    first = held(file_cache)
    lost = stamp_files.held_stamp_files._held[file_cache._key_to_file(KEY)].fd
    os.close(lost)
    with open(os.devnull) as unrelated:  # takes the freed descriptor number
        assert unrelated.fileno() == lost
        FileBasedCache(file_cache._dir, {}).set(KEY, "moved", REVISION_TIMEOUT)
        assert read_stamps(KEY, cache=file_cache)[KEY] == "moved" != first
        # and whoever got the number keeps their file open
        assert os.fstat(unrelated.fileno())[:3] == os.stat(os.devnull)[:3]


def test_a_reused_inode_number_is_not_mistaken_for_the_held_file(file_cache: FileBasedCache) -> None:
    """If the held descriptor is closed behind our back, the old inode is freed and a new stamp file can get its
    number: the held value must not be served for it."""
    first = held(file_cache)
    entry = stamp_files.held_stamp_files._held[file_cache._key_to_file(KEY)]
    os.close(entry.fd)
    for _ in range(200):
        value = uuid.uuid4().hex
        FileBasedCache(file_cache._dir, {}).set(KEY, value, REVISION_TIMEOUT)
        if os.stat(file_cache._key_to_file(KEY)).st_ino == entry.identity[1]:
            break
    else:
        raise AssertionError("the filesystem never reused the inode number; this test needs one that does (ext4)")
    assert read_stamps(KEY, cache=file_cache)[KEY] == value != first


def test_on_a_filesystem_that_is_not_known_to_be_local_every_read_opens_the_file(
    file_cache: FileBasedCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stamp_files, "is_local_filesystem", lambda directory: False)
    read_stamps(KEY, cache=file_cache)
    read_stamps(KEY, cache=file_cache)
    assert file_cache._key_to_file(KEY) not in stamp_files.held_stamp_files._held
    rewrite_in_place(file_cache, KEY, "written-in-place")
    assert read_stamps(KEY, cache=file_cache)[KEY] == "written-in-place"


def test_threads_reading_while_the_stamp_moves_never_see_an_old_stamp_after_the_move(
    file_cache: FileBasedCache,
) -> None:
    held(file_cache)
    moved = threading.Event()
    wrong: list[str] = []

    def reader() -> None:
        for _ in range(300):
            seen_after_move = moved.is_set()
            value = read_stamps(KEY, cache=file_cache)[KEY]
            if seen_after_move and value != "final":
                wrong.append(value)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for thread in threads:
        thread.start()
    for index in range(20):
        FileBasedCache(file_cache._dir, {}).set(KEY, f"interim-{index}", REVISION_TIMEOUT)
    FileBasedCache(file_cache._dir, {}).set(KEY, "final", REVISION_TIMEOUT)
    moved.set()
    for thread in threads:
        thread.join()
    assert wrong == []
    assert read_stamps(KEY, cache=file_cache)[KEY] == "final"


def open_cache_files(cache: FileBasedCache) -> int:
    """Descriptors this process has open on files of `cache` (whatever other threads have open elsewhere)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += target.startswith(cache._dir + os.sep)
    return count


def test_held_files_are_few_and_closed_on_release(file_cache: FileBasedCache) -> None:
    for _ in range(50):
        read_stamps(KEY, "mcp_expose:other-stamp", cache=file_cache)
        FileBasedCache(file_cache._dir, {}).set(KEY, uuid.uuid4().hex, REVISION_TIMEOUT)
    assert open_cache_files(file_cache) == 2  # one per stamp, the replaced ones closed
    stamp_files.held_stamp_files.release()
    assert open_cache_files(file_cache) == 0


MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
25 22 0:21 / /proc rw,nosuid - proc proc rw
30 22 0:25 / /srv/shared\\040cache rw,relatime shared:7 - nfs4 server:/export rw,vers=4.2
31 30 0:26 / /srv/shared\\040cache/local rw - tmpfs tmpfs rw
40 22 0:27 / /mnt rw - ext4 /dev/sdb1 rw
41 22 0:28 / /mnt rw - fuse.sshfs host:/ rw
"""


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/var/cache/app", "ext4"),
        ("/srv/shared cache", "nfs4"),
        ("/srv/shared cache/app", "nfs4"),
        ("/srv/shared cache/local/app", "tmpfs"),
        ("/srv/shared cachex", "ext4"),  # a longer name beside a mount point is not inside it
        ("/mnt/data", "fuse.sshfs"),  # mounted over: the later mount is the one seen
    ],
)
def test_the_filesystem_of_a_path_is_the_deepest_mount_above_it(tmp_path: Path, path: str, expected: str) -> None:
    table = tmp_path / "mountinfo"
    table.write_text(MOUNTINFO)
    assert stamp_files.filesystem_type(path, str(table)) == expected


def test_without_a_mount_table_nothing_is_held(tmp_path: Path) -> None:
    assert stamp_files.filesystem_type("/var/cache", str(tmp_path / "missing")) is None
    assert None not in stamp_files.LOCAL_FILESYSTEMS
