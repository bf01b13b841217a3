"""The full-map error's size of a commit with snapshots (session 50's message, reviewed).

The map can fill with a commit's records before its snapshots are checked. The size
the message gives summed ``len(snapshot.data)``: a snapshot whose data is no buffer
turned the ``JournalFullError`` (the journal fail-stop all the same) into a bare
``TypeError``, and a memoryview of wider items counted items, not bytes.
"""

from __future__ import annotations

import array
import re
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.events import PrivateSet
from cogfabric.store import Journal, JournalFullError, JournalStillFullError, Snapshot

if TYPE_CHECKING:
    from pathlib import Path

_LIMIT = 1024 * 1024
_VALUE = 2 * _LIMIT  # one record the map at _LIMIT cannot hold


def _full(tmp_path: Path, data: Any) -> tuple[str, int]:
    """The full-map error of one oversized record and a snapshot of ``data``, and the size it gives."""
    with Journal.open(tmp_path / "j", max_map_size=_LIMIT) as journal:
        journal.append([PrivateSet(at=0.0, agent="a", key="small", value=1)])
        with pytest.raises(JournalFullError) as info:
            journal.append(
                [PrivateSet(at=1.0, agent="a", key="big", value="x" * _VALUE)],
                snapshots=[Snapshot(stream="agent/a", seq=1, data=data)],
            )
        with pytest.raises(JournalStillFullError):  # fail-stop, as for any full map
            journal.append([PrivateSet(at=2.0, agent="a", key="k", value=1)])
    message = str(info.value)
    size = re.search(r"a commit of 1 record and 1 snapshot \(([\d,]+) bytes\) did not fit", message)
    assert size is not None, message
    return message, int(size.group(1).replace(",", ""))


def test_a_snapshot_of_wide_items_is_counted_in_bytes(tmp_path: Path) -> None:
    data = memoryview(array.array("q", [0]) * 200_000)  # 200,000 items, 1,600,000 bytes

    _message, size = _full(tmp_path, data)

    assert size > _VALUE + data.nbytes


def test_a_snapshot_that_is_no_buffer_still_gives_the_full_map_error(tmp_path: Path) -> None:
    message, size = _full(tmp_path, 5)

    assert _VALUE < size < _VALUE + 1000
    assert "has no more room than before" in message
