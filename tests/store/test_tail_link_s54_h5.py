"""A tail check holds the first record of each stream it sees to its stream, before the tail.

Helper h5, session 54: ``verify(after=N)`` took any link from before the tail for a
stream's first record there. A record re-chained to link to another stream's record
before the tail passed (a read of the stream then fails at that record), and one linked
to no record (0) passed too, though the stream has records before it: a read of the
stream stopped there, silently leaving them out. ``verify()`` refused both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cogfabric.store import Journal
from cogfabric.store.testing import make_events

from .test_tail_link_s54 import _links, _relink

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(
    ("link", "why"),
    [
        (2, "points to seq 2, not to a record of its stream"),  # a1's, before the tail
        (3, "points to seq 3, not to a record of its stream"),  # a2's
        (0, "links to no earlier record, but the stream index has 'agent/a0' start before it"),
    ],
)
def test_a_tail_record_linked_before_the_tail_but_not_to_its_stream_fails(
    tmp_path: Path, link: int, why: str
) -> None:
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        journal.append(make_events(7, agents=3))  # a0: 1, 4, 7; a1: 2, 5; a2: 3, 6
    assert _links(path)[7] == ("agent/a0", 4)

    _relink(path, 7, link)  # a0's 7, the first of a0 in a tail after 5, links elsewhere before it

    with Journal.open(path, readonly=True) as journal:
        report = journal.verify(after=5)
        full = journal.verify()
    assert (report.ok, report.first_bad_seq) == (False, 7), report
    assert why in report.reason
    assert (full.ok, full.first_bad_seq) == (False, 7)


def test_a_stream_that_starts_in_the_tail_and_one_that_goes_on_in_it_pass(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        journal.append(make_events(7, agents=3))
        journal.append(make_events(3, agents=5, start=3))  # a3 at 8 (new), a4 at 9 (new), a0 at 10
        assert journal.verify(after=5).ok  # a0's 7 links to 4, a1 and a2's to 2 and 3; a3, a4 start
        assert journal.verify(after=7).ok  # a0's 10 links to 7
        assert journal.verify(after=10).ok  # an empty tail
    assert _links(path)[8] == ("agent/a3", 0)
