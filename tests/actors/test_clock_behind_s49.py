"""A runtime reopened on a clock earlier than its journal's last record says so (session 49).

A simulation that reopens its journal on a fresh ``FakeClock`` would journal times
that go back, and its sessions, last accessed "later", would outlive their TTL. The
runtime logs a warning naming the last record's time to start the clock from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cogfabric.actors import FakeClock, Runtime

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

_LOGGER = "cogfabric.actors._runtime"


def _journal_up_to(path: Path, seconds: float) -> float:
    """A journal whose last record is ``seconds`` past FakeClock's default start; that time."""
    clock = FakeClock()
    with Runtime.open(path, clock=clock) as rt:
        rt.spawn("a")
        clock.advance(seconds)
        rt.memory.create_session("u")
        return clock.now()


def test_a_fresh_fake_clock_behind_the_journal_is_warned_of(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    last = _journal_up_to(tmp_path / "j", 100_000)

    with caplog.at_level("WARNING", logger=_LOGGER), Runtime.open(tmp_path / "j", clock=FakeClock()):
        pass

    assert f"earlier than the journal's last record (seq 2, at {last!r})" in caplog.text
    assert f"open with FakeClock(start={last!r})" in caplog.text


def test_a_clock_going_on_from_the_journal_says_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    last = _journal_up_to(tmp_path / "j", 100_000)

    with caplog.at_level("WARNING", logger=_LOGGER):
        with Runtime.open(tmp_path / "j", clock=FakeClock(start=last)):
            pass
        with Runtime.open(tmp_path / "j"):  # the system clock: long past 2023
            pass

    assert "earlier than the journal's last record" not in caplog.text
