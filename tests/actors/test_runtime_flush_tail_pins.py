"""Pins from a mutation test of Runtime.flush, _await_reloads and the tail check of Runtime.open.

Each test names the mutant of ``actors/_runtime.py`` it kills.
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric import Config, Runtime
from cogfabric.actors import ActorTimeoutError, AgentContext, FakeClock, RuntimeConfig
from cogfabric.actors._agent import AgentActor
from cogfabric.config import JournalConfig
from cogfabric.events import IpcMessage
from cogfabric.store import Journal, JournalError, JournalIntegrityError, JournalRecordError

from .test_runtime import _tamper
from .test_supervision import _open, _short_call_timeout, _stall, _stall_then_fail

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    import pykka

    from cogfabric.events import Event

SNAPSHOTS = Config(journal=JournalConfig(snapshot_interval=5))


class TestTailCheck:
    def test_the_last_record_is_checked_also_when_a_snapshot_covers_it(self, tmp_path: Path) -> None:
        # README: the tail check takes "always at least the last record". Here the only
        # agent's snapshot is at the last record, so no replay starts before it.
        # Mutant: the floor min(*starts, last - 1) as min(*starts, last).
        with Runtime.open(tmp_path / "j", config=SNAPSHOTS) as runtime:
            agent = runtime.spawn("a")
            for i in range(3):
                agent.set_private(f"k{i}", i)
            agent.set_private("last", "abcdef")  # the agent's fifth record: snapshotted
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            snapshot = journal.load_snapshot("agent/a")
            last = journal.last_seq
        assert snapshot is not None
        assert snapshot.seq == last
        assert _tamper(tmp_path / "j", b"events", b"abcdef", b"abcdeX") == 1

        with pytest.raises(JournalIntegrityError, match=f"seq {last}"):
            Runtime.open(tmp_path / "j", config=SNAPSHOTS, verify="tail")

    def test_a_live_sessions_first_record_is_checked(self, tmp_path: Path) -> None:
        # README: a live session's stream is replayed whole, so the tail check covers it
        # from its first record, the creation with its seed message.
        # Mutant: a session's start as stream_start(stream), not stream_start(stream) - 1.
        with Runtime.open(tmp_path / "j", config=SNAPSHOTS) as runtime:
            session = runtime.memory.create_session("u")  # seq 1
            agent = runtime.spawn("a")
            for i in range(12):
                agent.set_private(f"k{i}", i)  # a's snapshot is past the session's creation
            runtime.memory.add_message(session, "user", "later")
        assert _tamper(tmp_path / "j", b"events", b"New session started", b"New session stormed") == 1

        with pytest.raises(JournalIntegrityError, match="seq 1"):
            Runtime.open(tmp_path / "j", config=SNAPSHOTS, verify="tail")

    def test_a_damaged_snapshot_is_refused_naming_its_seq(self, tmp_path: Path) -> None:
        # README: with verify="tail" a damaged snapshot fails as a JournalRecordError
        # naming the snapshot's seq. Mutant: its JournalRecordError at load swallowed
        # without allow_unverified (the whole stream checked instead, which names none).
        with Runtime.open(tmp_path / "j", config=SNAPSHOTS) as runtime:
            agent = runtime.spawn("a")
            agent.set_private("kept", "abcdef")
            for i in range(12):
                agent.set_private(f"k{i}", i)
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            snapshot = journal.load_snapshot("agent/a")
        assert snapshot is not None
        assert _tamper(tmp_path / "j", b"snapshots", b"abcdef", b"abcdeX") == 1

        with pytest.raises(JournalRecordError) as raised:
            Runtime.open(tmp_path / "j", config=SNAPSHOTS, verify="tail")
        assert raised.value.seq == snapshot.seq


class _Relay:
    """Sends what it handles on to "s"; in sync durability that send waits for the message's end."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        ctx.send("s", "relayed", message.payload)


def _sent_by(sender: str) -> Callable[[Sequence[Event]], bool]:
    """For ``_stall``: the appends of messages ``sender`` sent."""

    def picks(events: Sequence[Event]) -> bool:
        return any(isinstance(e, IpcMessage) and e.sender == sender for e in events)

    return picks


class TestFlush:
    def test_what_a_send_stored_during_a_flush_led_to_is_durable_when_it_returns(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # The send timed out on a stalled disk and is stored after flush asked the
        # agents: flush asks its recipient in turn, and (docstring: "wait until every
        # change handed over so far is durable") waits for the journal again for what
        # that message led to, here the recipient's own send, handed over at its end.
        # Mutant: the second hand-over without the writer.flush after it (or skipped).
        with _open(tmp_path / "j", behaviors={"relay": _Relay}) as runtime:
            runtime.spawn("s")
            runtime.spawn("r", behavior="relay")
            disk = _stall(runtime, _sent_by("x"))
            with _short_call_timeout(runtime, 0.3), pytest.raises(ActorTimeoutError):
                runtime.bus.send("x", "r", "go", 1)
            relayed = _stall(runtime, _sent_by("r"))  # r's send is held until flush waits for it
            hand_over_all = runtime._hand_over_all

            def then_store(deadline: float) -> Exception | None:
                problem = hand_over_all(deadline)
                disk.set()  # the disk recovers just after flush asked the agents
                return problem

            writer = runtime._core.writer
            assert writer is not None
            real_flush, waits = writer.flush, []

            def flush_writer(timeout: float | None = None) -> None:
                waits.append(timeout)
                if len(waits) > 1:  # flush waits for the journal again: r's send may go in
                    relayed.set()
                real_flush(timeout)

            monkeypatch.setattr(runtime, "_hand_over_all", then_store)
            monkeypatch.setattr(writer, "flush", flush_writer)
            journal = runtime._journal
            assert journal is not None
            try:
                runtime.flush()
                stored = [r.event.topic for r in journal.read() if isinstance(r.event, IpcMessage)]
            finally:
                relayed.set()

        assert stored == ["go", "relayed"]

    def test_a_behaviors_flush_on_a_failed_journal_waits_for_no_agent(self, tmp_path: Path) -> None:
        # Docstring: called from a behavior, flush waits for the journal, not for other
        # agents; on fail-stop it raises without waiting for every agent to reload (one
        # busy, and the caller itself, which cannot answer while it flushes).
        # Mutant: the fail-stop wait for the reloads also from a behavior (own is not None).
        outcome: list[str] = []
        done, blocked, release = threading.Event(), threading.Event(), threading.Event()

        class Flusher:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
                if message.topic == "block":
                    blocked.set()
                    assert release.wait(30)
                    return
                ctx.set_private("mine", 1)
                try:
                    runtimes[0].flush()
                except JournalError as exc:
                    outcome.append(type(exc).__name__)
                finally:
                    done.set()

        config = Config(journal=JournalConfig(durability="batch"), runtime=RuntimeConfig(call_timeout=30.0))
        rt = Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors={"f": Flusher})
        runtimes = [rt]
        try:
            rt.spawn("me", behavior="f")
            rt.spawn("busy", behavior="f")
            rt.flush()
            rt.bus.send("x", "busy", "block")
            assert blocked.wait(10)
            _stall_then_fail(rt, OSError("disk gone")).set()
            try:
                rt.bus.send("x", "me", "flush")
                returned = done.wait(10)  # well short of call_timeout, which the mutant waits out
            finally:
                release.set()
                assert done.wait(60)
        finally:
            with contextlib.suppress(JournalError):  # the failure, unless a flush reported it
                rt.close()

        assert returned
        assert outcome == ["JournalFailedError"]

    def test_a_failed_flush_waits_for_every_agent_to_take_the_journals_word(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # README: the failed flush() raises after every agent has dropped what the
        # journal does not hold. "newbie", spawned in the refused commit, leaves agents()
        # once it reloads, which here waits until flush waits for it.
        # Mutant: _await_reloads waits for the first agent's reload only.
        config = Config(journal=JournalConfig(durability="batch"))
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as runtime:
            runtime.spawn("a")
            runtime.flush()
            disk = _stall_then_fail(runtime, OSError("disk gone"))
            runtime.spawn("newbie")  # applied at once (batch), refused below
            may_reload = threading.Event()
            reload = AgentActor._reload_from_journal

            def held_reload(actor: AgentActor) -> None:
                if actor.agent_id == "newbie":
                    assert may_reload.wait(10)
                reload(actor)

            noops = runtime._noops

            def awaited(**kwargs: Any) -> list[tuple[str, pykka.Future[Any]]]:
                asked = noops(**kwargs)
                for agent_id, future in asked:
                    if agent_id == "newbie":
                        get = future.get

                        def get_released(timeout: float | None = None, get: Any = get) -> Any:
                            may_reload.set()  # flush waits for newbie's reload: it may go on
                            return get(timeout=timeout)

                        future.get = get_released  # type: ignore[method-assign]
                return asked

            hand_over_all = runtime._hand_over_all

            def then_fail(deadline: float) -> Exception | None:
                problem = hand_over_all(deadline)
                disk.set()  # the commit of newbie's spawn fails once flush asked the agents
                return problem

            monkeypatch.setattr(AgentActor, "_reload_from_journal", held_reload)
            monkeypatch.setattr(runtime, "_noops", awaited)
            monkeypatch.setattr(runtime, "_hand_over_all", then_fail)
            try:
                with pytest.raises(JournalError):
                    runtime.flush()
                live = runtime.agents()
            finally:
                may_reload.set()

        assert live == ["a"]
