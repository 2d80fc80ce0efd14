"""Print the slowest tests of a pytest run from its JUnit XML report: scripts/test shows them at the end of every
run, so that a test that grows slow is seen before the suite's budget is spent.

    python scripts/slowest_tests.py REPORT.xml [COUNT]
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree


def slowest(report: str, count: int) -> list[tuple[float, str]]:
    """The `count` longest test cases (setup, call and teardown together), longest first."""
    cases = ElementTree.parse(report).getroot().iter("testcase")
    timed = [(float(case.get("time", 0)), f"{case.get('classname')}::{case.get('name')}") for case in cases]
    return sorted(timed, reverse=True)[:count]


def main() -> None:
    report, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 15
    for seconds, test in slowest(report, count):
        print(f"   {seconds:7.1f} s  {test}")


if __name__ == "__main__":
    main()
