"""Each phase's report kept on its test, so a fixture's teardown can tell whether the test failed.

A module of its own, not the conftest: pytest imports ``tests/e2e/conftest.py`` as ``conftest``
(the test folders are not packages), while test modules import it as ``tests.e2e.conftest`` — two
module objects with two ``StashKey``s, so a key defined there and read from a test module never
found what the conftest's hook had kept. Both import this module by one name.
"""

from __future__ import annotations

import pytest

REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


def keep(item: pytest.Item, report: pytest.TestReport) -> None:
    item.stash.setdefault(REPORTS, {})[report.when] = report


def failed(item: pytest.Item) -> bool:
    return any(report.failed for report in item.stash.get(REPORTS, {}).values())


def attach(item: pytest.Item, title: str, text: str) -> None:
    """Add ``text`` to the report of each failed phase: the failure summary prints it at the
    session's end (output printed in a teardown goes to the teardown's report, never shown
    when the teardown passes)."""
    for report in item.stash.get(REPORTS, {}).values():
        if report.failed:
            report.sections.append((title, text))
