"""scripts/lock_drift.py: which changes `npm install` makes to the pinned lock are refused (all but optional
packages for other platforms, which npm adds or drops depending on what the registry serves)."""

from __future__ import annotations

import copy
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "lock_drift.py"
_spec = importlib.util.spec_from_file_location("lock_drift", SCRIPT)
assert _spec is not None and _spec.loader is not None
lock_drift = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lock_drift)

PINNED: dict[str, Any] = {
    "name": "clients",
    "lockfileVersion": 3,
    "requires": True,
    "packages": {
        "": {"dependencies": {"vite": "^8.0.0"}},
        "node_modules/vite": {
            "version": "8.0.1",
            "integrity": "sha512-vite",
            "optionalDependencies": {"fsevents": "~2.3.3", "napi-windows-process-start-time": "^0.1.0"},
        },
        "node_modules/fsevents": {"version": "2.3.3", "optional": True, "os": ["darwin"]},
    },
}
WINDOWS_ONLY = {
    "version": "0.1.0",
    "integrity": "sha512-win",
    "optional": True,
    "os": ["win32"],
    "cpu": ["x64", "arm64"],
}


def installed(**packages: dict[str, Any] | None) -> dict[str, Any]:
    """The pinned lock with `packages` added, replaced, or (given None) dropped."""
    lock = copy.deepcopy(PINNED)
    for path, entry in packages.items():
        if entry is None:
            del lock["packages"][f"node_modules/{path}"]
        else:
            lock["packages"][f"node_modules/{path}"] = entry
    return lock


def test_the_same_lock_has_no_drift() -> None:
    assert lock_drift.drift(PINNED, copy.deepcopy(PINNED), "linux", "x64") == []


@pytest.mark.parametrize(
    "change",
    [
        {"napi-windows-process-start-time": WINDOWS_ONLY},  # added: Windows only
        {"fsevents": None},  # dropped: macOS only
        {"arm-only": {"version": "1.0.0", "optional": True, "cpu": ["arm64"]}},
        {"not-linux": {"version": "1.0.0", "optional": True, "os": ["!linux"]}},
    ],
)
def test_an_optional_package_for_another_platform_is_not_drift(change: dict[str, Any]) -> None:
    assert lock_drift.drift(PINNED, installed(**change), "linux", "x64") == []


@pytest.mark.parametrize(
    "change, problem",
    [
        (
            {"vite": {**PINNED["packages"]["node_modules/vite"], "version": "8.0.2"}},
            "node_modules/vite: changed version",
        ),
        (
            {"vite": {**PINNED["packages"]["node_modules/vite"], "integrity": "sha512-other"}},
            "node_modules/vite: changed integrity",
        ),
        ({"left-pad": {"version": "1.3.0"}}, "node_modules/left-pad: added 1.3.0"),
        (
            {"linux-binary": {"version": "1.0.0", "optional": True, "os": ["linux"], "cpu": ["x64"]}},
            "node_modules/linux-binary: added 1.0.0",
        ),
        ({"anywhere": {"version": "2.0.0", "optional": True}}, "node_modules/anywhere: added 2.0.0"),
        (
            {"windows-but-required": {**WINDOWS_ONLY, "optional": False}},
            "node_modules/windows-but-required: added 0.1.0",
        ),
        ({"vite": None}, "node_modules/vite: dropped 8.0.1"),
    ],
)
def test_any_other_change_is_drift(change: dict[str, Any], problem: str) -> None:
    assert lock_drift.drift(PINNED, installed(**change), "linux", "x64") == [problem]


def test_a_windows_only_package_is_drift_on_windows() -> None:
    assert lock_drift.drift(PINNED, installed(**{"napi-windows-process-start-time": WINDOWS_ONLY}), "win32", "x64") == [
        "node_modules/napi-windows-process-start-time: added 0.1.0"
    ]


def test_a_change_outside_the_packages_is_drift() -> None:
    assert lock_drift.drift(PINNED, {**PINNED, "lockfileVersion": 2}, "linux", "x64") == ["lockfileVersion: 3 -> 2"]


def test_the_command_exits_non_zero_and_names_the_drift(tmp_path: Path) -> None:
    pinned, after = tmp_path / "pinned.json", tmp_path / "after.json"
    pinned.write_text(json.dumps(PINNED))
    after.write_text(json.dumps(installed(**{"napi-windows-process-start-time": WINDOWS_ONLY})))
    run = [sys.executable, str(SCRIPT), str(pinned), str(after)]
    assert subprocess.run([*run, "linux", "x64"], capture_output=True, text=True).returncode == 0
    refused = subprocess.run([*run, "win32", "x64"], capture_output=True, text=True)
    assert refused.returncode == 1 and "napi-windows-process-start-time: added" in refused.stdout
