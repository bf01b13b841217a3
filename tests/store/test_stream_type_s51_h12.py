"""A stream name of another type than str is a ``TypeError``, as ``Journal``'s docstring says (helper h12).

The class docstring said any stream name but a 1-to-255-byte str without NUL raised
``InvalidStreamError`` (a ``ValueError``); a name of another type raises ``TypeError``,
as ``read`` documents, in every method that takes one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.store import InvalidStreamError, Journal, Snapshot
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def test_a_stream_name_that_is_no_str_is_a_type_error_in_every_method(tmp_path: Path) -> None:
    doc = Journal.__doc__ or ""
    assert "TypeError" in doc
    assert "InvalidStreamError" in doc

    with Journal.open(tmp_path / "j") as journal:
        journal.append(make_events(2))
        calls: list[Callable[[Any], object]] = [
            lambda s: list(journal.read(stream=s)),
            lambda s: list(journal.read_back(s)),
            journal.load_snapshot,
            journal.stream_start,
            journal.stream_head,
            lambda s: journal.save_snapshot(Snapshot(stream=s, seq=1, data=b"x")),
        ]
        for call in calls:
            with pytest.raises(TypeError) as caught:
                call(3)
            assert not isinstance(caught.value, InvalidStreamError)
            with pytest.raises(InvalidStreamError):
                call("")
        assert journal.last_seq == 2
