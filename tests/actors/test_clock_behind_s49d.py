"""The clock check at open reads the journal as the last run left it (helper h14, session 49).

Recovery journals what it expires at the new clock's time: read after it, that expiry
is the last record, and a clock behind the journal's time went unwarned. An interruption
during the check leaves no runtime open behind it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

import pytest

from cogfabric.actors import FakeClock, Runtime, _runtime
from cogfabric.events import SessionExpired
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path

_LOGGER = "cogfabric.actors._runtime"


def test_a_session_recovery_expires_does_not_hide_a_clock_behind_the_journal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(start=1_600_000_000.0)
    with Runtime.open(tmp_path / "j", clock=clock) as rt:
        rt.memory.create_session("u")  # its TTL has passed by a fresh FakeClock's time
        clock.advance(110_000_000)  # past a fresh FakeClock's start
        rt.spawn("a")
        last = clock.now()

    with caplog.at_level("WARNING", logger=_LOGGER), Runtime.open(tmp_path / "j", clock=FakeClock()):
        pass

    assert f"earlier than the journal's last record (seq 2, at {last!r})" in caplog.text
    with Journal.open(tmp_path / "j") as journal:  # the expiry was journaled, after the check
        assert isinstance(next(iter(journal.read(after=2))).event, SessionExpired)


def test_an_interruption_during_the_clock_check_leaves_nothing_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
        rt.spawn("a")

    def interrupted(*_args: object) -> NoReturn:
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(_runtime, "_warn_if_clock_behind", interrupted)
        with pytest.raises(KeyboardInterrupt):
            Runtime.open(tmp_path / "j", clock=FakeClock())

    with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:  # not locked by a runtime left open
        assert rt.agents() == ["a"]
