"""A journal reopened with a max_map_size below its data file's size: the full error names the file's size."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from cogfabric.events import PrivateSet
from cogfabric.store import Journal, JournalFullError

if TYPE_CHECKING:
    from pathlib import Path

_LIMIT = 256 * 1024


def _batch(n: int) -> list[PrivateSet]:
    return [PrivateSet(at=float(n), agent="a", key=f"k{n}-{i}", value="v" * 300) for i in range(20)]


def _fill(journal: Journal, start: int) -> JournalFullError:
    """Append until the journal is full; its error."""
    for n in range(start, start + 10_000):
        try:
            journal.append(_batch(n))
        except JournalFullError as exc:
            return exc
    pytest.fail("the journal never filled")


def test_a_limit_below_the_file_names_the_file_size_to_raise_past(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        for n in range(100):  # about 1 MB: well past the limit below
            journal.append(_batch(n))
    size = (path / "data.mdb").stat().st_size
    assert size > 2 * _LIMIT

    with Journal.open(path, max_map_size=_LIMIT) as journal:  # not refused: its free pages fill first
        message = str(_fill(journal, 100))

    assert f"reached max_map_size ({_LIMIT} bytes)" in message
    named = re.search(r"its data file is ([\d,]+) bytes already, more than that limit", message)
    assert named is not None, message
    assert int(named.group(1).replace(",", "")) >= size
    assert "raise max_map_size above it" in message


def test_a_journal_that_grew_to_its_limit_says_nothing_of_a_larger_file(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j", max_map_size=_LIMIT) as journal:
        message = str(_fill(journal, 0))
    assert f"reached max_map_size ({_LIMIT} bytes)" in message
    assert "its data file is" not in message
