"""What the kernel says about a server process: CPU time, resident memory, and the load on each core.

All from /proc, so the numbers cover every thread of the process (our worker threads included).
"""

from __future__ import annotations

import os

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (all threads), in seconds."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def memory_kb(pid: int, field: str) -> int:
    """A `VmRSS`/`VmHWM`-style line of /proc/<pid>/status, in kB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise LookupError(f"{field} not in /proc/{pid}/status")


def reset_peak_rss(pid: int) -> bool:
    """Reset VmHWM to the current RSS (Linux ≥ 4.0), so each run reports its own peak. False if not allowed."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        return False
    return True


def core_jiffies() -> dict[int, tuple[int, int]]:
    """Per core: (busy, total) jiffies since boot."""
    cores: dict[int, tuple[int, int]] = {}
    with open("/proc/stat") as stat:
        for line in stat:
            name, *values = line.split()
            if name.startswith("cpu") and name[3:].isdigit():
                numbers = [int(value) for value in values[:8]]
                idle = numbers[3] + numbers[4]
                cores[int(name[3:])] = (sum(numbers) - idle, sum(numbers))
    return cores


def busy_percent(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]], core: int) -> float:
    busy = after[core][0] - before[core][0]
    total = after[core][1] - before[core][1]
    return 100.0 * busy / total if total else 0.0
