"""What a person reviews before approving an upstream tool: the definition served now beside the one proposed."""

from __future__ import annotations

import difflib
import json
from typing import Any


def pretty(definition: Any) -> str:
    # ASCII only: any character beyond it shows as its \\u escape, so nothing can hide in what a person reviews.
    return json.dumps(definition, indent=2, sort_keys=True, ensure_ascii=True) if definition is not None else ""


SERVED_NOW = "approved (served now)"


def approved_label(served: bool, status: str) -> str:
    """What the approved side of a diff is called: served now, or why not (a blocked tool's approval is kept,
    but nothing of it reaches clients, and the label must not say otherwise)."""
    return SERVED_NOW if served else f"approved (not served: {status})"


def definition_diff(approved: Any, proposed: Any, label: str = SERVED_NOW) -> str:
    """A unified diff, line by line, of the approved definition and the proposed one (all of it when nothing is
    approved yet). Descriptions are split at their line breaks, so a changed sentence shows as itself."""
    before = _lines(approved)
    after = _lines(proposed)
    return "\n".join(difflib.unified_diff(before, after, label, "proposed", lineterm="", n=3))


def _lines(definition: Any) -> list[str]:
    if definition is None:
        return []
    shown = dict(definition)
    description = shown.pop("description", "") or ""
    shown_description = json.dumps(description, ensure_ascii=True)[1:-1].replace("\\n", "\n")
    return ["description:", *(f"  {line}" for line in shown_description.split("\n")), *pretty(shown).split("\n")]
