"""A runtime dropped without ``close()`` is not closed by the garbage collector.

README, "Embedding the runtime": it keeps its journal until it is closed (at exit, or by
whoever still reaches it), so a host running job after job opens each in a ``with``.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

import pytest

from cogfabric import Runtime
from cogfabric.actors import _runtime
from cogfabric.store import JournalLockedError

if TYPE_CHECKING:
    from pathlib import Path


def _job(path: Path) -> None:
    runtime = Runtime.open(path)
    runtime.spawn("researcher-001").set_private("result", 42)
    msg = "the job fails before close()"
    raise ValueError(msg)


def test_a_runtime_dropped_unclosed_keeps_its_journal_until_closed(tmp_path: Path) -> None:
    before = set(_runtime._OPEN)
    with pytest.raises(ValueError, match="before close"):
        _job(tmp_path / "j")
    gc.collect()
    (dropped,) = set(_runtime._OPEN) - before  # not collected: its actors hold it
    try:
        assert dropped.agent("researcher-001").private("result") == 42  # and still running
        with pytest.raises(JournalLockedError):
            Runtime.open(tmp_path / "j")
    finally:
        dropped.close()
    with Runtime.open(tmp_path / "j") as reopened:  # once closed, the path opens again
        assert reopened.agent("researcher-001").private("result") == 42
