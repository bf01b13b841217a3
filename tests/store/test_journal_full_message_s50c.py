"""The full-map error's size and counts of a commit of several records and snapshots (mutation round).

The tests before had one record (and at most one snapshot): the size must add every
record's bytes and every snapshot's, and the counts be plural.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from cogfabric.events import PrivateSet
from cogfabric.store import Journal, JournalFullError, Snapshot

if TYPE_CHECKING:
    from pathlib import Path

_LIMIT = 1024 * 1024
_VALUE = 3 * _LIMIT // 4  # each record fits the map alone, two of them do not
_DATA = 200_000


def test_a_commit_of_two_records_and_two_snapshots_counts_all_their_bytes(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j", max_map_size=_LIMIT) as journal:
        journal.append(
            [PrivateSet(at=0.0, agent="a", key="k", value=1), PrivateSet(at=0.0, agent="b", key="k", value=1)]
        )
        with pytest.raises(JournalFullError) as info:
            journal.append(
                [
                    PrivateSet(at=1.0, agent="a", key="big", value="x" * _VALUE),
                    PrivateSet(at=1.0, agent="b", key="big", value="y" * _VALUE),
                ],
                snapshots=[
                    Snapshot(stream="agent/a", seq=1, data=b"a" * _DATA),
                    Snapshot(stream="agent/b", seq=2, data=b"b" * _DATA),
                ],
            )

    message = str(info.value)
    size = re.search(r"a commit of 2 records and 2 snapshots \(([\d,]+) bytes\) did not fit", message)
    assert size is not None, message
    assert 2 * _VALUE + 2 * _DATA < int(size.group(1).replace(",", "")) < 2 * _VALUE + 2 * _DATA + 1000
