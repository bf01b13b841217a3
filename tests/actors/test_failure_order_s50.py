"""A behavior's failure is journaled before the dead letter it leads to (helper h13, session 50).

``AgentFailed`` is the cause of the ``handler error`` letter: the journal holds the
message's changes, then its ``AgentFailed``, then the letter, so that no prefix of it (a
crash, or a journal that fails between two group commits) holds a letter that no failure
explains, and ``replay`` and ``trace`` read the cause first. The requester hears of the
failure all the same when the journal refuses the failure, or the clock fails as it is made.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import AgentContext, Config, FakeClock, IpcHandlerError, JournalConfig, Runtime
from cogfabric.actors._bus import IpcBus
from cogfabric.events import AgentFailed, IpcDeadLettered, IpcDelivered, IpcMessage, PrivateSet
from cogfabric.store import Journal, JournalError, JournalUnavailableError

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.store import Record


class _Raises:
    """Notes the message, then raises on it."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        ctx.set_private("seen", message.topic)
        msg = "boom"
        raise ValueError(msg)


def _config(mode: str) -> Config:
    return Config(journal=JournalConfig(durability=mode))  # type: ignore[arg-type]


def _records(path: Path) -> list[Record]:
    with Journal.open(path, readonly=True) as journal:
        return list(journal.read())


def _seq(records: list[Record], kind: type, message_id: str) -> list[int]:
    """The seqs of the records of type ``kind`` that the message ``message_id`` caused."""
    return [r.seq for r in records if isinstance(r.event, kind) and r.event.cause == message_id]


def _unexplained(records: list[Record]) -> list[int]:
    """The seqs of ``handler error`` letters with no ``AgentFailed`` for their message before them."""
    failed: set[str] = set()
    odd: list[int] = []
    for record in records:
        event = record.event
        if isinstance(event, AgentFailed) and event.cause is not None:
            failed.add(event.cause)
        elif (
            isinstance(event, IpcDeadLettered)
            and event.reason == "handler error"
            and event.message_id not in failed
        ):
            odd.append(record.seq)
    return odd


@pytest.mark.parametrize("mode", ["sync", "batch"])
def test_the_failure_is_journaled_after_the_messages_changes_and_before_its_dead_letter(
    tmp_path: Path, mode: str
) -> None:
    path = tmp_path / "j"
    with Runtime.open(path, config=_config(mode), clock=FakeClock(), behaviors={"raises": _Raises}) as rt:
        rt.spawn("a", behavior="raises")
        with pytest.raises(IpcHandlerError) as raised:
            rt.bus.request("x", "a", "ask", None, timeout=10)
        message_id = raised.value.message_id
        assert message_id is not None
        sent = rt.bus.send("x", "a", "tell")
        assert rt.agent("a").private("seen") == "tell"  # behind both: restarted from the journal each time
    records = _records(path)

    for mid in (message_id, sent.id):
        delivered = [
            r.seq for r in records if isinstance(r.event, IpcDelivered) and r.event.message_id == mid
        ]
        (changed,) = _seq(records, PrivateSet, mid)
        (failed,) = _seq(records, AgentFailed, mid)
        (letter,) = _seq(records, IpcDeadLettered, mid)
        assert delivered[0] < changed < failed < letter, (mid, delivered, changed, failed, letter)
    assert _unexplained(records) == []


@pytest.mark.parametrize("mode", ["sync", "batch"])
def test_a_journal_that_refuses_the_failure_stores_no_letter_it_would_explain_and_the_requester_is_told(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each dead letter is committed before the bus returns (as a group commit that split the
    # two hand-overs would), and the journal refuses any commit that holds an AgentFailed (a
    # failing disk, say): the cause and its effect must not be stored the wrong way round.
    path = tmp_path / "j"
    dead_letter = IpcBus.dead_letter

    def committed_at_once(bus: IpcBus, *args: Any, **kwargs: Any) -> None:
        dead_letter(bus, *args, **kwargs)
        writer = bus._core.writer
        assert writer is not None
        writer.flush()

    told: list[BaseException] = []
    with Runtime.open(path, config=_config(mode), clock=FakeClock(), behaviors={"raises": _Raises}) as rt:
        rt.spawn("a", behavior="raises")
        rt.flush()
        journal = rt._journal
        assert journal is not None
        append = journal.append

        def refuse_failures(events: list[Any], **kwargs: Any) -> list[int]:
            if any(isinstance(e, AgentFailed) for e in events):
                error = JournalUnavailableError("the disk failed (the test broke it)")
                # fail-stop, as the journal makes itself after an I/O error
                journal._failed = error  # type: ignore[attr-defined]
                raise error
            result: list[int] = append(events, **kwargs)
            return result

        monkeypatch.setattr(journal, "append", refuse_failures)
        monkeypatch.setattr(IpcBus, "dead_letter", committed_at_once)
        done = threading.Event()

        def ask() -> None:
            try:
                rt.bus.request("x", "a", "ask", None, timeout=10)
            except BaseException as exc:  # noqa: BLE001 - what the requester was told
                told.append(exc)
            finally:
                done.set()

        requester = threading.Thread(target=ask)
        requester.start()
        assert done.wait(10)  # told, not left to its timeout
        requester.join(10)
        with pytest.raises(JournalError):
            rt.flush()
        monkeypatch.undo()

    assert len(told) == 1
    assert isinstance(told[0], IpcHandlerError)
    assert isinstance(told[0].__cause__, ValueError)
    assert _unexplained(_records(path)) == []


class _FailingClock(FakeClock):
    """A fake clock whose ``now()`` fails once, when armed."""

    armed = False

    def now(self) -> float:
        if _FailingClock.armed:
            _FailingClock.armed = False
            msg = "clock gone"
            raise OSError(msg)
        return super().now()


class _RaisesWithTheClockArmed:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        ctx.set_private("seen", message.topic)
        _FailingClock.armed = True  # the next reading is the failure's
        msg = "boom"
        raise ValueError(msg)


def test_a_clock_that_fails_as_the_failure_is_made_still_leaves_the_messages_changes_then_its_letter(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j"
    _FailingClock.armed = False
    clock = _FailingClock()
    behaviors = {"raises": _RaisesWithTheClockArmed}
    with Runtime.open(path, clock=clock, behaviors=behaviors) as rt:
        rt.spawn("a", behavior="raises")
        with pytest.raises(IpcHandlerError) as raised:
            rt.bus.request("x", "a", "ask", None, timeout=10)
        assert rt.agent("a").private("seen") == "ask"  # restarted from the journal, which holds it
    message_id = raised.value.message_id
    assert message_id is not None
    records = _records(path)

    (changed,) = _seq(records, PrivateSet, message_id)
    assert _seq(records, AgentFailed, message_id) == []  # it had no time to be journaled with
    (letter,) = _seq(records, IpcDeadLettered, message_id)  # the bus's own reading worked
    assert changed < letter
