"""How an npm lock file written by `npm install` differs from the pinned one, leaving out only optional packages
for other platforms: npm adds or drops those depending on what the registry serves that day, and never installs
them here. Any other difference (a version, an integrity, a dependency, a package added or dropped) is drift.

    python3 scripts/lock_drift.py PINNED INSTALLED PLATFORM ARCH   # PLATFORM, ARCH as Node's process.platform/arch

Prints each drifted entry and exits 1 when there is any, 0 otherwise.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def allows(constraint: list[str] | None, value: str) -> bool:
    """npm's rule for `os` and `cpu`: a "!name" excludes, and any plain names list the only ones allowed."""
    if not constraint:
        return True
    if f"!{value}" in constraint:
        return False
    allowed = [name for name in constraint if not name.startswith("!")]
    return not allowed or value in allowed


def foreign_optional(entry: dict[str, Any], platform: str, arch: str) -> bool:
    """An optional package whose `os` or `cpu` rules out this machine: npm never installs it here."""
    return bool(entry.get("optional")) and not (allows(entry.get("os"), platform) and allows(entry.get("cpu"), arch))


def drift(pinned: dict[str, Any], installed: dict[str, Any], platform: str, arch: str) -> list[str]:
    """The differences that matter, one line each (empty: the install is what the pinned lock describes)."""
    problems = [
        f"{key}: {pinned.get(key)!r} -> {installed.get(key)!r}"
        for key in sorted((set(pinned) | set(installed)) - {"packages"})
        if pinned.get(key) != installed.get(key)
    ]
    before, after = pinned.get("packages", {}), installed.get("packages", {})
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        if old is None or new is None:
            entry = old if new is None else new
            if foreign_optional(entry, platform, arch):
                continue
            problems.append(f"{path}: {'dropped' if new is None else 'added'} {entry.get('version')}")
        else:
            changed = sorted(key for key in set(old) | set(new) if old.get(key) != new.get(key))
            problems.append(f"{path}: changed {', '.join(changed)}")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    pinned_path, installed_path, platform, arch = argv
    with open(pinned_path) as pinned, open(installed_path) as installed:
        problems = drift(json.load(pinned), json.load(installed), platform, arch)
    for problem in problems:
        print(f"  {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
