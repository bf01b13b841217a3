"""A closed journal's collection runs no code of cogfabric's (session 60).

The weakref finalizer that lets go of the writer lock of a journal collected unclosed ran
for every journal, closed or not. Collection runs where the garbage collector happens
to run, any line of any thread: a Ctrl-C (or a SIGTERM whose handler raises) landing in
that finalizer is raised inside it, and Python reports it as "Exception ignored in" and
drops it. The slow SIGTERM sweep of close() lost one so (a landing in
``_WriterLock.release`` called by the finalizer of an earlier landing's journal). A close
now detaches the finalizer: it is left only for a journal collected unclosed.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING, Any

from cogfabric import store
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path
    from types import FrameType


_STORE = (os.path.dirname(str(store.__file__)), os.path.realpath(os.path.dirname(str(store.__file__))))  # noqa: PTH120


def _calls_while_collected(journal: object) -> list[str]:
    """The cogfabric functions called while ``journal``'s last reference goes and gc runs."""
    called: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:  # noqa: ARG001
        if (
            event == "call"
            and "cogfabric" in frame.f_code.co_filename.replace("\\", "/").split("/site-packages/")[-1]
        ):
            called.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        del journal
        gc.collect()
    finally:
        sys.setprofile(None)
    return called


def test_a_closed_journals_collection_runs_no_code_of_cogfabrics(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "j")
    journal.close()
    holder = [journal]
    del journal
    called = _calls_while_collected(holder.pop())  # not in the assert: its rewriting keeps the argument
    assert called == []


def test_a_journal_collected_unclosed_still_lets_go_of_its_writer_lock(tmp_path: Path) -> None:
    path = tmp_path / "j"
    journal = Journal.open(path)
    lock = journal._writer_lock  # type: ignore[attr-defined]
    assert lock is not None
    assert lock.fd is not None
    holder = [journal]
    del journal
    called = _calls_while_collected(holder.pop())
    assert "release" in called
    assert lock.fd is None


def test_a_second_close_finds_nothing_left_to_detach(tmp_path: Path) -> None:
    journal = Journal.open(tmp_path / "j", sync=False)
    journal.close()
    journal.close()  # idempotent: nothing left to detach
    assert journal._unclosed is None  # type: ignore[attr-defined]
