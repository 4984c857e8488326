"""The e2e folder's failure evidence: its conftest keeps each phase's report where a test
module's fixture finds it (``tests.e2e.reports``), so a failed cluster test's teardown attaches
the cluster's logs to its report. Before, the key lived in the conftest, which pytest and the
test modules import under two names: the teardowns never saw a failure, and no log was shown."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.reports import REPORTS, attach, failed


@pytest.fixture
def seen_in_teardown(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    kept = request.node.stash.get(REPORTS, {})
    assert set(kept) == {"setup", "call"} and kept["call"].passed, kept
    assert not failed(request.node)
    attach(request.node, "evidence", "only failed phases carry it")
    assert all(title != "evidence" for report in kept.values() for title, _text in report.sections)


def test_a_teardown_sees_the_reports_of_its_tests_phases(seen_in_teardown: None) -> None:
    """The assertions are the fixture's teardown's: what it finds of this passing test."""
