"""A commit the map at max_map_size cannot hold: its error says how big; a reopen alone does not help."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from cogfabric.actors import Runtime
from cogfabric.events import PrivateSet
from cogfabric.store import Journal, JournalFullError

if TYPE_CHECKING:
    from pathlib import Path

_LIMIT = 1024 * 1024


def test_an_oversized_value_is_named_by_its_size_not_only_as_a_full_journal(tmp_path: Path) -> None:
    with Journal.open(tmp_path / "j", max_map_size=_LIMIT) as journal:
        journal.append([PrivateSet(at=0.0, agent="a", key="small", value=1)])
        huge = PrivateSet(at=1.0, agent="a", key="huge", value="x" * (2 * _LIMIT))

        with pytest.raises(JournalFullError) as info:
            journal.append([huge])

    message = str(info.value)
    assert f"reached max_map_size ({_LIMIT} bytes)" in message
    size = re.search(r"a commit of 1 record \(([\d,]+) bytes\) did not fit", message)
    assert size is not None, message
    assert int(size.group(1).replace(",", "")) > 2 * _LIMIT
    assert "fail-stop until reopened" in message
    assert "has no more room than before" in message


def test_a_runtime_at_its_limit_says_a_reopen_needs_a_larger_max_map_size(tmp_path: Path) -> None:
    config = {"journal": {"max_map_size": _LIMIT}}
    path = tmp_path / "j"
    with Runtime.open(path, config=config) as rt:
        _fill(rt, "k", 10_000)
    with Runtime.open(path, config=config) as rt:  # reopened as it was: full again at once
        _fill(rt, "again", 100)


def _fill(rt: Runtime, prefix: str, most: int) -> None:
    agent = rt.spawn("a") if "a" not in rt.agents() else rt.agent("a")
    with pytest.raises(JournalFullError, match="has no more room than before"):  # noqa: PT012 - until full
        for n in range(most):
            agent.set_private(f"{prefix}{n}", "x" * 2_000)
