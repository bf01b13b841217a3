"""Session memory: spec §4.3, §5.5 and §10, with DESIGN.md's overrides."""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from typing import TYPE_CHECKING

import lmdb
import msgspec
import pytest

from cogfabric.actors import (
    ActorTimeoutError,
    AgentCheckpointNotSupportedError,
    CleanOptions,
    ClockError,
    Config,
    FakeClock,
    InvalidConfigError,
    JournalConfig,
    MemoryConfig,
    Runtime,
    RuntimeConfig,
    SessionData,
    SessionNotFoundError,
    Snippet,
    default_memory_config,
)
from cogfabric.actors._cleaner import clean_with_turns, extract_gist, with_ellipsis
from cogfabric.actors._clock import MAX_WAIT
from cogfabric.events import (
    InvalidEventError,
    Message,
    SessionCreated,
    SessionEvicted,
    SessionExpired,
    SessionMessageAdded,
    SessionTouched,
    ToolCall,
    ToolCallFunction,
)
from cogfabric.store import Journal, JournalRecordError

from .test_supervision import _short_call_timeout

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

TTL = 100.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def _config(**memory: object) -> Config:
    settings: dict[str, object] = {"session_ttl": TTL, **memory}
    return Config(memory=msgspec.convert(settings, MemoryConfig))


def _read(rt: Runtime, read: str, session_id: str) -> object:
    """Read a session with one of the memory's reads (build_context takes an input first)."""
    if read == "build_context":
        return rt.memory.build_context("next", session_id)
    return getattr(rt.memory, read)(session_id)


@pytest.fixture
def runtime(tmp_path: Path, clock: FakeClock) -> Iterator[Runtime]:
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        yield rt


class TestConfig:
    def test_default_memory_config(self) -> None:
        config = default_memory_config()

        assert (config.max_history, config.max_sessions, config.session_ttl) == (10, 100, 86400.0)
        assert config.clean == CleanOptions(
            max_user_len=200,
            max_assistant_len=150,
            max_tool_len=50,
            max_system_len=500,
            max_summarized_turns=0,
        )
        assert (config.rag_top_k, config.rag_min_score) == (5, 0.4)

    @pytest.mark.parametrize("field", ["max_history", "max_sessions", "session_ttl"])
    def test_each_limit_must_be_positive_and_the_error_names_it(self, field: str) -> None:
        with pytest.raises(
            InvalidConfigError, match=rf"{field} must be positive, got 0.*\$\.memory\.{field}"
        ):
            MemoryConfig(**{field: 0})  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        ("field", "value"), [("max_history", "3"), ("session_ttl", None), ("rag_top_k", True)]
    )
    def test_a_limit_that_is_no_number_is_an_invalid_config_naming_it(
        self, field: str, value: object
    ) -> None:
        with pytest.raises(InvalidConfigError, match=rf"{field} must be a number, got .*\$\.memory\.{field}"):
            MemoryConfig(**{field: value})  # type: ignore[arg-type]

    def test_a_cleaner_limit_must_be_positive(self) -> None:
        with pytest.raises(InvalidConfigError, match=r"clean\.max_user_len must be positive, got -1"):
            MemoryConfig(clean=CleanOptions(max_user_len=-1))

    def test_another_sections_range_is_an_invalid_config_naming_it(self) -> None:
        config = Config(journal=JournalConfig(snapshot_interval=0))  # msgspec checks ranges on decode

        with pytest.raises(InvalidConfigError, match=r"\$\.journal\.snapshot_interval"):
            Runtime.open(config=config)

    @pytest.mark.parametrize("value", [math.inf, 2e9])
    def test_a_call_timeout_longer_than_a_thread_can_wait_is_an_invalid_config(self, value: float) -> None:
        config = Config(runtime=RuntimeConfig(call_timeout=value))

        with pytest.raises(InvalidConfigError, match=r"<= 1000000000.0 - at `\$\.runtime\.call_timeout`"):
            Runtime.open(config=config)

    @pytest.mark.parametrize(
        ("ttl", "interval"),
        [(math.inf, MAX_WAIT), (1e12, MAX_WAIT), (1e-6, 0.1), (0.2, 0.1), (1.0, 0.5)],
    )
    def test_the_ticker_sweeps_every_half_ttl_at_least_a_tenth_of_a_second_apart_at_most_max_wait(
        self, ttl: float, interval: float
    ) -> None:
        # ttl / 2 past MAX_WAIT would overflow the thread's wait and kill the ticker; ttl / 2
        # of a TTL of microseconds kept a core sweeping without a pause
        waited: list[float] = []
        done = threading.Event()

        def sleep(seconds: float) -> bool:  # the ticker's wait; True stops it
            waited.append(seconds)
            done.set()
            return True

        with Runtime.open(config=_config(session_ttl=ttl), clock=FakeClock()) as rt:  # no ticker of its own
            rt.memory.start_ticker(sleep=sleep)
            assert done.wait(5)
            with pytest.raises(RuntimeError, match="the session ticker runs already"):
                rt.memory.start_ticker(sleep=sleep)  # one ticker per runtime

        assert waited == [interval]
        assert 5 * MAX_WAIT <= threading.TIMEOUT_MAX  # close waits five call_timeouts at most

    def test_a_sweep_the_busy_session_actor_did_not_run_is_a_warning_and_the_ticker_goes_on(
        self, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # the ticker's sweep timed out (the session actor was busy, or behind the
        # journal): a warning, not an ERROR with a traceback, and the next tick sweeps
        ticks = iter([False, False, True])  # two sweeps, then the ticker stops
        stopped = threading.Event()

        def sleep(_seconds: float) -> bool:
            tick = next(ticks)
            if tick:
                stopped.set()
            return tick

        with Runtime.open(config=_config(), clock=FakeClock()) as rt:
            sweeps: list[str] = []

            def sweep() -> int:
                sweeps.append("busy" if not sweeps else "ran")
                if len(sweeps) == 1:
                    msg = "the session actor did not answer sweep within 5.0 s"
                    raise ActorTimeoutError(msg)
                return 0

            monkeypatch.setattr(rt.memory, "sweep", sweep)
            with caplog.at_level(logging.WARNING):
                rt.memory.start_ticker(sleep=sleep)
                assert stopped.wait(5)
                rt.memory._ticker.join(5)  # type: ignore[union-attr]

        assert sweeps == ["busy", "ran"]
        [record] = [r for r in caplog.records if "sweep" in r.getMessage()]
        assert record.levelno == logging.WARNING
        assert "a session sweep did not run" in record.getMessage()
        assert record.exc_info is None

    def test_a_timed_out_turns_answer_left_queued_when_close_gives_up_is_logged(
        self, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # close() stops the session actor call_timeout at most: what is still queued
        # behind a busy actor then never runs, and an answer nobody waits for is
        # logged as not added (README), not dropped without a word
        config = Config(runtime=RuntimeConfig(call_timeout=0.3), memory=MemoryConfig(session_ttl=TTL))
        release = threading.Event()
        busy = threading.Event()
        rt = Runtime.open(config=config, clock=FakeClock())
        try:
            session = rt.memory.create_session("u")
            real = rt.memory._op_sweep

            def stuck_sweep() -> int:
                busy.set()
                assert release.wait(30)
                return real()

            monkeypatch.setattr(rt.memory, "_op_sweep", stuck_sweep)
            with pytest.raises(ActorTimeoutError):
                rt.memory.sweep()  # the session actor is held in it
            assert busy.wait(5)
            rt.memory._add_later(session, Message(role="assistant", content="the answer"))
            with caplog.at_level(logging.WARNING):
                rt.close()
        finally:
            release.set()
            rt.close()
        assert "the session actor did not stop in time" in caplog.text
        [record] = [r for r in caplog.records if "was not added" in r.getMessage()]
        assert "RuntimeClosedError" in record.getMessage()


class TestSessions:
    def test_create_session_returns_an_id_and_seeds_the_system_message(self, runtime: Runtime) -> None:
        session = runtime.memory.create_session("u1")

        assert session
        assert [(m.role, m.content) for m in runtime.memory.get_messages(session)] == [
            ("system", "New session started")
        ]

    def test_add_and_get_messages(self, runtime: Runtime, clock: FakeClock) -> None:
        session = runtime.memory.create_session("u1")
        clock.advance(1)

        runtime.memory.add_message(session, "user", "hello")

        messages = runtime.memory.get_messages(session)
        assert len(messages) >= 2
        assert (messages[-1].role, messages[-1].content, messages[-1].time) == ("user", "hello", clock.now())

    def test_add_turn_message_tags_a_new_turn_only_where_the_window_uses_turn_ids(
        self, tmp_path: Path
    ) -> None:
        with Runtime.open(tmp_path / "j", config=_config(max_history=3), clock=FakeClock()) as rt:
            plain = rt.memory.create_session("u1")
            tagged = rt.memory.create_session("u2")
            rt.memory.add_structured_message(tagged, Message(role="user", content="a", turn_id="t1"))

            untagged = rt.memory.add_turn_message(plain, "user", "hello")
            first = rt.memory.add_turn_message(tagged, "user", "b")
            second = rt.memory.add_turn_message(tagged, "user", "c")
            rt.memory.add_message(tagged, "assistant", "d")  # t1 is out of the window of 3 now
            third = rt.memory.add_turn_message(tagged, "user", "e")  # b and c hold turn ids still
            with pytest.raises(SessionNotFoundError):
                rt.memory.add_turn_message("session_nobody", "user", "x")
            stored = [m.turn_id for m in rt.memory.get_messages(tagged)]

        assert untagged == ""
        assert first.startswith("turn-")
        assert len({first, second, third}) == 3
        assert stored == ["", "t1", first, second, "", third]

    def test_add_turn_message_looks_at_the_messages_the_window_keeps_beside_it(self, tmp_path: Path) -> None:
        # The one tagged message leaves the window of 3 as the new one enters: tagged,
        # the new one would be the window's only turn id, and everything before it
        # would join its turn, kept whole; untagged, the user message splits as usual.
        with Runtime.open(tmp_path / "j", config=_config(max_history=3), clock=FakeClock()) as rt:
            session = rt.memory.create_session("u1")
            rt.memory.add_structured_message(session, Message(role="user", content="a", turn_id="t0"))
            rt.memory.add_message(session, "assistant", "b")
            rt.memory.add_message(session, "tool_result", "c")

            added = rt.memory.add_turn_message(session, "user", "d")

        assert added == ""

    def test_get_session_returns_the_user_agent_messages_and_times(
        self, runtime: Runtime, clock: FakeClock
    ) -> None:
        # The original's SessionMemory test: "set+get (UserID round-trips)".
        created = clock.now()
        session = runtime.memory.create_session("u1", agent_id="a1")
        clock.advance(2)
        runtime.memory.add_message(session, "user", "hello")
        clock.advance(3)

        data = runtime.memory.get_session(session)

        assert isinstance(data, SessionData)
        assert (data.session_id, data.user_id, data.agent_id) == (session, "u1", "a1")
        assert [(m.role, m.content) for m in data.messages] == [
            ("system", "New session started"),
            ("user", "hello"),
        ]
        assert (data.created_at, data.accessed_at) == (created, clock.now())
        assert runtime.memory.get_session(runtime.memory.create_session("u2")).agent_id is None

    def test_get_session_refreshes_the_last_access_and_is_not_a_live_view(
        self, runtime: Runtime, clock: FakeClock
    ) -> None:
        # The original's TestSessionMemory_GetUpdatesAccessedAt.
        session = runtime.memory.create_session("u")
        first = runtime.memory.get_session(session)
        clock.advance(TTL * 0.9)
        second = runtime.memory.get_session(session)
        clock.advance(TTL * 0.9)

        assert second.accessed_at > first.accessed_at
        assert runtime.memory.sweep() == 0  # the read kept it alive
        runtime.memory.add_message(session, "user", "later")
        assert len(second.messages) == 1  # a copy: later messages are not in it
        with pytest.raises(AttributeError):
            second.user_id = "other"  # type: ignore[misc]

    def test_get_session_of_an_unknown_or_expired_session_raises(
        self, runtime: Runtime, clock: FakeClock
    ) -> None:
        session = runtime.memory.create_session("u")
        with pytest.raises(SessionNotFoundError, match="session not found"):
            runtime.memory.get_session("session_nobody_0")
        clock.advance(TTL + 1)
        with pytest.raises(SessionNotFoundError):
            runtime.memory.get_session(session)

    def test_sessions_lists_the_live_ones_least_recently_used_first_without_refreshing(
        self, runtime: Runtime, clock: FakeClock
    ) -> None:
        old = runtime.memory.create_session("u")
        clock.advance(TTL * 0.6)
        a, b = runtime.memory.create_session("u"), runtime.memory.create_session("u")
        runtime.memory.get_messages(a)
        assert runtime.memory.sessions() == [old, b, a]

        clock.advance(TTL * 0.5)  # old expires; listing it refreshes none of them
        assert runtime.memory.sessions() == [b, a]
        clock.advance(TTL * 0.6)
        assert runtime.memory.sessions() == []
        runtime.memory.delete_session(a)
        assert runtime.memory.sessions() == []

    def test_get_session_after_reopening_is_the_same(self, tmp_path: Path, clock: FakeClock) -> None:
        with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
            session = rt.memory.create_session("u9", agent_id="a9")
            rt.memory.add_message(session, "assistant", "kept")
            before = rt.memory.get_session(session)
        with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
            after = rt.memory.get_session(session)
            assert rt.memory.sessions() == [session]

        assert after == before

    def test_multiple_sessions_do_not_mix(self, runtime: Runtime) -> None:
        a, b = runtime.memory.create_session("u"), runtime.memory.create_session("u")
        runtime.memory.add_message(a, "user", "only in a")

        assert a != b
        assert all(m.content != "only in a" for m in runtime.memory.get_messages(b))

    def test_structured_messages_round_trip_and_get_their_time_filled(
        self, runtime: Runtime, clock: FakeClock
    ) -> None:
        session = runtime.memory.create_session("u")
        user = Message(role="user", content="q", turn_id="t1")
        assistant = Message(role="assistant", content="a", turn_id="t1", time=5.0)

        runtime.memory.add_structured_message(session, user)
        runtime.memory.add_structured_message(session, assistant)

        *_, got_user, got_assistant = runtime.memory.build_prompt_messages(session)
        assert got_user == msgspec.structs.replace(user, time=clock.now())
        assert got_assistant == assistant

    def test_a_message_built_with_lists_reads_back_equal_and_its_lists_are_the_callers(
        self, runtime: Runtime
    ) -> None:
        session = runtime.memory.create_session("u")
        call = ToolCall(id="c1", function=ToolCallFunction(name="f", arguments="{}"))
        sent = Message(
            role="assistant", content="a", turn_id="t1", time=5.0, tool_calls=[call], artifact_refs=["r"]
        )
        runtime.memory.add_structured_message(session, sent)
        sent.artifact_refs.append("changed after it was added")  # the caller's own list

        for got in (
            runtime.memory.get_messages(session)[-1],
            runtime.memory.get_session(session).messages[-1],
            runtime.memory.build_prompt_messages(session)[-1],
        ):
            assert got.tool_calls == [call]
            assert got.artifact_refs in (["r"], [])  # the prompt window drops artifact refs
            got.tool_calls.clear()
            got.artifact_refs.append("changed by a reader")
        assert runtime.memory.get_messages(session)[-1] == msgspec.structs.replace(sent, artifact_refs=["r"])

    def test_build_prompt_messages_keeps_the_last_max_history_messages(self, tmp_path: Path) -> None:
        with Runtime.open(tmp_path / "j", config=_config(max_history=2), clock=FakeClock()) as rt:
            session = rt.memory.create_session("u")
            for i in range(5):
                rt.memory.add_message(session, "user", f"msg-{i}")

            assert [m.content for m in rt.memory.build_prompt_messages(session)] == ["msg-3", "msg-4"]

    def test_the_seed_falls_out_of_the_window(self, tmp_path: Path) -> None:
        with Runtime.open(tmp_path / "j", config=_config(max_history=3), clock=FakeClock()) as rt:
            session = rt.memory.create_session("u")
            for i in range(3):
                rt.memory.add_message(session, "user", f"m{i}")

            assert [m.content for m in rt.memory.build_prompt_messages(session)] == ["m0", "m1", "m2"]

    def test_a_long_user_message_is_cut_to_197_code_points_and_an_ellipsis(self, runtime: Runtime) -> None:
        session = runtime.memory.create_session("u")
        runtime.memory.add_message(session, "user", "é" * 300)

        last = runtime.memory.build_prompt_messages(session)[-1]

        assert last.content == "é" * 197 + "..."

    def test_build_context_names_the_history_and_the_input(self, runtime: Runtime) -> None:
        session = runtime.memory.create_session("u")
        runtime.memory.add_message(session, "user", "hi")

        text = runtime.memory.build_context("what now?", session)

        assert "Previous conversation history" in text
        assert "User: hi" in text
        assert text.endswith("Current request:\nwhat now?")

    def test_build_context_keeps_at_most_max_history_messages(self, tmp_path: Path) -> None:
        with Runtime.open(tmp_path / "j", config=_config(max_history=5), clock=FakeClock()) as rt:
            session = rt.memory.create_session("u")
            for i in range(20):
                rt.memory.add_message(session, "user", f"Message {i}")

            assert rt.memory.build_context("x", session).count("Message") <= 5

    def test_build_context_cleans_with_the_default_options_as_the_original_does(self, tmp_path: Path) -> None:
        # the original's BuildContext calls Clean without options; only the prompt window
        # (build_prompt_messages) takes the configured ones
        config = _config(clean={"max_user_len": 20})
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as rt:
            session = rt.memory.create_session("u")
            rt.memory.add_message(session, "user", "x" * 80)

            assert "User: " + "x" * 80 + "\n" in rt.memory.build_context("now", session)
            assert rt.memory.build_prompt_messages(session)[-1].content == "x" * 17 + "..."

    def test_unknown_sessions(self, runtime: Runtime) -> None:
        assert runtime.memory.build_context("input", "nope") == "input"
        with pytest.raises(SessionNotFoundError, match="session not found"):
            runtime.memory.build_prompt_messages("nope")
        with pytest.raises(SessionNotFoundError):
            runtime.memory.add_message("nope", "user", "x")

    def test_delete_session_is_idempotent_and_removes_the_history(self, runtime: Runtime) -> None:
        session = runtime.memory.create_session("u")

        runtime.memory.delete_session(session)
        runtime.memory.delete_session(session)
        runtime.memory.delete_session("never")

        with pytest.raises(SessionNotFoundError):
            runtime.memory.get_messages(session)

    def test_concurrent_reads_are_safe(self, runtime: Runtime) -> None:
        session = runtime.memory.create_session("u")
        errors: list[BaseException] = []
        barrier = threading.Barrier(10, timeout=10)

        def read() -> None:
            barrier.wait()
            try:
                for _ in range(50):
                    assert runtime.memory.get_messages(session)[0].content == "New session started"
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=read) for _ in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)

        assert errors == []


class TestTtlAndEviction:
    def test_reads_refresh_the_last_access(self, runtime: Runtime, clock: FakeClock) -> None:
        session = runtime.memory.create_session("u")
        for _ in range(3):
            clock.advance(TTL * 0.9)
            runtime.memory.get_messages(session)

        clock.advance(TTL * 0.9)
        assert runtime.memory.sweep() == 0
        assert runtime.memory.get_messages(session)

    def test_an_expired_session_is_never_returned_nor_revived(
        self, runtime: Runtime, clock: FakeClock
    ) -> None:
        session = runtime.memory.create_session("u")
        clock.advance(TTL + 1)

        with pytest.raises(SessionNotFoundError):
            runtime.memory.add_message(session, "user", "late")
        with pytest.raises(SessionNotFoundError):
            runtime.memory.get_messages(session)

    def test_the_ttl_boundary_is_exclusive(self, runtime: Runtime, clock: FakeClock) -> None:
        session = runtime.memory.create_session("u")
        clock.advance(TTL)

        assert runtime.memory.sweep() == 0
        assert runtime.memory.get_messages(session)

    @pytest.mark.parametrize("ttl", [0.2, 0.13, 2.7])
    def test_a_session_lives_through_exactly_its_ttl_whatever_the_ttl(
        self, tmp_path: Path, ttl: float
    ) -> None:
        # FakeClock starts at 1.7e9 wall seconds: there, now - accessed_at is not exactly
        # the ttl a clock advanced by the ttl has moved (0.2000000477 for 0.2).
        clock = FakeClock()
        with Runtime.open(tmp_path / "j", config=_config(session_ttl=ttl), clock=clock) as rt:
            session = rt.memory.create_session("u")
            clock.advance(ttl)

            assert rt.memory.sweep() == 0
            assert rt.memory.get_messages(session)
            clock.advance(ttl)
            assert rt.memory.get_messages(session)  # the read refreshed it: ttl more to go
            clock.advance(ttl + 1e-6)
            assert rt.memory.sweep() == 1

    def test_a_sweep_removes_every_expired_session(self, runtime: Runtime, clock: FakeClock) -> None:
        old = [runtime.memory.create_session("u") for _ in range(150 // 3)]
        clock.advance(TTL / 2)
        fresh = runtime.memory.create_session("u")
        clock.advance(TTL / 2 + 1)

        assert runtime.memory.sweep() == len(old)
        assert runtime.memory.size() == 1
        assert runtime.memory.get_messages(fresh)

    def test_the_least_recently_used_session_is_evicted_only_for_a_new_one(
        self, tmp_path: Path, clock: FakeClock
    ) -> None:
        with Runtime.open(tmp_path / "j", config=_config(max_sessions=2), clock=clock) as rt:
            a = rt.memory.create_session("u")
            clock.advance(1)
            b = rt.memory.create_session("u")
            clock.advance(1)
            rt.memory.get_messages(a)
            rt.memory.add_message(b, "user", "writing never evicts")
            clock.advance(1)
            rt.memory.get_messages(a)
            clock.advance(1)

            c = rt.memory.create_session("u")

            assert rt.memory.get_messages(a)
            assert rt.memory.get_messages(c)
            with pytest.raises(SessionNotFoundError):
                rt.memory.get_messages(b)

    def test_after_the_wall_clock_steps_back_an_expired_session_goes_before_a_live_one_is_evicted(
        self, tmp_path: Path
    ) -> None:
        clock = SteppingClock()
        config = Config(memory=MemoryConfig(max_sessions=2, session_ttl=100.0))
        with Runtime.open(tmp_path / "j", config=config, clock=clock) as rt:
            a = rt.memory.create_session("a")  # accessed at 1000
            clock.wall -= 150
            b = rt.memory.create_session("b")  # accessed at 850, after a in access order
            clock.wall += 110  # 960: b expired (past 950), a live until 1100

            c = rt.memory.create_session("c")

            assert rt.memory.get_messages(a)
            assert rt.memory.get_messages(c)
            with pytest.raises(SessionNotFoundError):
                rt.memory.get_messages(b)
            assert rt._journal is not None
            ended = [type(r.event).__name__ for r in rt._journal.read() if r.stream == f"session/{b}"][-1]
            assert ended == "SessionExpired"  # expired, not evicted

    def test_a_wall_clock_that_stepped_back_while_closed_is_seen_before_a_live_session_is_evicted(
        self, tmp_path: Path
    ) -> None:
        clock = SteppingClock()
        config = Config(memory=MemoryConfig(max_sessions=2, session_ttl=100.0))
        with Runtime.open(tmp_path / "j", config=config, clock=clock) as rt:
            a = rt.memory.create_session("a")  # accessed at 1000
        clock.wall -= 50  # stepped back while closed
        with Runtime.open(tmp_path / "j", config=config, clock=clock) as rt:
            b = rt.memory.create_session("b")  # accessed at 950
            clock.wall += 110  # 1060: b expired (past 1050), a live until 1100

            rt.memory.create_session("c")

            assert rt.memory.get_messages(a)
            with pytest.raises(SessionNotFoundError):
                rt.memory.get_messages(b)

    def test_after_reopening_the_same_session_is_evicted_as_live_when_accesses_tie_in_time(
        self, tmp_path: Path
    ) -> None:
        # The clock does not move: the order of the journaled accesses decides, live and
        # replayed. (a's session stream sorts before b's, as their user ids do.)
        def third_evicts(reopen: bool) -> str:
            path = tmp_path / f"j-{reopen}"
            with Runtime.open(path, config=_config(max_sessions=2), clock=FakeClock()) as rt:
                a = rt.memory.create_session("a")
                b = rt.memory.create_session("b")
                rt.memory.add_message(a, "user", "a is used last")
                if not reopen:
                    rt.memory.create_session("u")
                    return "b" if a in _live(rt, a, b) else "a"
            with Runtime.open(path, config=_config(max_sessions=2), clock=FakeClock()) as rt:
                rt.memory.create_session("u")
                return "b" if a in _live(rt, a, b) else "a"

        assert third_evicts(reopen=False) == third_evicts(reopen=True) == "b"

    @pytest.mark.parametrize("durability", ["sync", "batch"])
    def test_a_batch_journals_a_write_and_a_later_touch_in_the_order_they_were_made(
        self, tmp_path: Path, durability: str
    ) -> None:
        # Two callers' operations served in one batch of the session actor: a write,
        # then a read that journals a touch TTL/5 later. Journaled touch first (as
        # before), replay took the write's time for the last access: TTL/5 older than
        # live, past the TTL/10 precision, so reopening could expire a live session.
        from cogfabric.actors._memory import _DRAIN, _Op  # noqa: PLC0415

        class Stepping(FakeClock):
            """Moves on TTL/5 at each reading while ``step`` is set."""

            step = False

            def now(self) -> float:
                now = super().now()
                if self.step:
                    self.advance(TTL / 5)
                return now

        clock = Stepping()
        config = Config(memory=_config().memory, journal=JournalConfig(durability=durability))  # type: ignore[arg-type]
        with Runtime.open(tmp_path / "j", config=config, clock=clock) as rt:
            memory = rt.memory
            session = memory.create_session("u")
            ops = [_Op("add", (session, Message(role="user", content="hi"))), _Op("get_session", (session,))]
            clock.step = True
            with memory._lock:  # queued together, as two callers' calls can be
                memory._queue.extend(ops)
                ring = not memory._scheduled
                memory._scheduled = True
            if ring:
                memory._ref.tell(_DRAIN)
            assert all(op.done.acquire(timeout=10) for op in ops)
            assert [op.error for op in ops] == [None, None]
            clock.step = False
            live = ops[1].result.accessed_at
            rt.flush()

        with Journal.open(tmp_path / "j", readonly=True) as journal:
            kinds = [type(r.event).__name__ for r in journal.read(stream=f"session/{session}")]
        assert kinds == ["SessionCreated", "SessionMessageAdded", "SessionTouched"]
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(live + TTL - 1)) as rt:
            assert rt.memory.get_session(session).accessed_at == live + TTL - 1  # alive, and touched now

    @pytest.mark.parametrize("reopen", [False, True])
    def test_a_wall_clock_that_steps_back_moves_no_last_access_back_live_or_replayed(
        self, tmp_path: Path, reopen: bool
    ) -> None:
        # Live, the order of use decided eviction and a read moved the last access back
        # (unjournaled); replay sorted by time: another session evicted, another expiry.
        clock = SteppingClock()
        config = Config(memory=MemoryConfig(max_sessions=3, session_ttl=100.0))
        start = clock.wall
        rt = Runtime.open(tmp_path / "j", config=config, clock=clock)
        try:
            a = rt.memory.create_session("a", agent_id="x")
            b = rt.memory.create_session("b", agent_id="x")
            clock.wall = start + 50
            rt.memory.add_message(a, "user", "a at +50")
            clock.wall = start + 20  # stepped back 30 s
            rt.memory.add_message(b, "user", "b at +20, used after a")
            rt.memory.get_messages(a)  # used last; at +20, its last access stays +50
            if reopen:
                rt.close()
                rt = Runtime.open(tmp_path / "j", config=config, clock=clock)

            # the read of a made it x's latest, so it was journaled: the same order replayed
            assert rt.memory.sessions() == [b, a]
            assert rt.memory.get_latest_session_for_agent("x") == rt.memory.sessions()[-1]
            assert rt.memory.get_session(a).accessed_at == start + 50
            clock.wall = start + 140  # 120 s after the read, 90 s after a's last access
            assert rt.memory.get_messages(a)  # alive, live and replayed
        finally:
            rt.close()

    @pytest.mark.parametrize("reopen", [False, True])
    def test_after_a_reopen_an_expired_session_still_goes_before_a_live_one_is_evicted(
        self, tmp_path: Path, reopen: bool
    ) -> None:
        # Reopening forgot that the clock had stepped back: a create at capacity then
        # evicted the session at the front, live, instead of expiring the one behind it.
        clock = SteppingClock()
        config = Config(memory=MemoryConfig(max_sessions=2, session_ttl=1000.0))
        start = clock.wall
        rt = Runtime.open(tmp_path / "j", config=config, clock=clock)
        try:
            x = rt.memory.create_session("x")  # used at start
            clock.wall = start - 1000  # stepped back
            y = rt.memory.create_session("y")
            clock.wall = start - 500
            rt.memory.add_message(y, "user", "y is used last, at an earlier time")
            clock.wall = start + 100
            if reopen:
                rt.close()
                rt = Runtime.open(tmp_path / "j", config=config, clock=clock)
            assert rt.memory.sessions() == [x, y]
            clock.wall = start + 600  # y expired (last access start - 500), x live until start + 1000

            z = rt.memory.create_session("z")

            assert rt.memory.sessions() == [x, z]
            # what stood out of order has gone: a create at capacity no longer scans them all
            assert not rt.memory._clock_went_back
        finally:
            rt.close()

    def test_a_session_created_while_the_clock_stands_back_expires_before_a_live_one_is_evicted(
        self, tmp_path: Path
    ) -> None:
        # The create's own sweep found the sessions in order and cleared the flag, then
        # put its session, used at the earlier time, behind them: the next create at
        # capacity evicted a live session and kept the expired one.
        clock = SteppingClock()
        config = Config(memory=MemoryConfig(max_sessions=3, session_ttl=100.0))
        start = clock.wall
        with Runtime.open(tmp_path / "j", config=config, clock=clock) as rt:
            rt.memory.create_session("a")
            clock.wall = start + 1
            b = rt.memory.create_session("b")
            clock.wall = start + 2
            c = rt.memory.create_session("c")
            clock.wall = start - 10  # stepped back
            d = rt.memory.create_session("d")  # evicts a; d is used at start - 10
            clock.wall = start + 95  # d expired (start + 90), b and c live

            e = rt.memory.create_session("e")

            assert rt.memory.sessions() == [b, c, e]
            with pytest.raises(SessionNotFoundError):
                rt.memory.get_messages(d)

    @pytest.mark.parametrize("add", ["add_message", "add_turn_message"])
    @pytest.mark.parametrize("fails_at", [0, 1, 2])
    def test_a_clock_that_fails_inside_add_message_changes_no_session(
        self, tmp_path: Path, fails_at: int, add: str
    ) -> None:
        # The add read the clock three times; a failure at its second reading raised
        # ClockError with a already refreshed and made the most recently used, live only
        # (add_turn_message read it twice, with the same outcome).
        class Failing(SteppingClock):
            readings_left: int | None = None

            def now(self) -> float:
                if self.readings_left is not None:
                    if self.readings_left == 0:
                        self.readings_left = None
                        msg = "clock source unavailable"
                        raise OSError(msg)
                    self.readings_left -= 1
                return super().now()

        clock = Failing()
        config = Config(memory=MemoryConfig(max_sessions=3, session_ttl=100.0))
        with Runtime.open(tmp_path / "j", config=config, clock=clock) as rt:
            a = rt.memory.create_session("a")
            clock.wall += 10
            b = rt.memory.create_session("b")
            clock.wall += 10
            clock.readings_left = fails_at
            try:
                getattr(rt.memory, add)(a, "user", "hi")
            except ClockError:
                failed = True
            else:
                failed = False
            clock.readings_left = None
            live = rt.memory.sessions()
            assert live == ([a, b] if failed else [b, a])
            assert failed or fails_at > 0  # the first reading's failure is always met
        with Runtime.open(tmp_path / "j", config=config, clock=clock) as rt:
            assert rt.memory.sessions() == live
            assert len(rt.memory.get_messages(a)) == (1 if failed else 2)

    def test_the_latest_session_of_an_agent_on_a_tie_in_time_is_the_one_used_last(
        self, tmp_path: Path
    ) -> None:
        clock = FakeClock()
        with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
            first = rt.memory.create_session("u", agent_id="a1")
            second = rt.memory.create_session("u", agent_id="a1")
            assert rt.memory.get_latest_session_for_agent("a1") == second
            rt.memory.add_message(first, "user", "first again")
            assert rt.memory.get_latest_session_for_agent("a1") == first
        with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
            assert rt.memory.get_latest_session_for_agent("a1") == first

    @pytest.mark.parametrize(
        "read", ["get_messages", "get_session", "build_prompt_messages", "build_context"]
    )
    def test_a_read_that_makes_a_session_its_agents_latest_holds_after_reopening(
        self, tmp_path: Path, read: str
    ) -> None:
        # Reads are journaled at most once per ttl/10 for the TTL's sake; one that changes
        # which session is an agent's latest is journaled whenever it is made, or the
        # reopened runtime would answer another session than the live one did.
        clock = FakeClock()
        with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
            first = rt.memory.create_session("u", agent_id="a1")
            second = rt.memory.create_session("u", agent_id="a1")
            third = rt.memory.create_session("u", agent_id="a1")
            _read(rt, read, first)
            assert rt.memory.get_latest_session_for_agent("a1") == first
        with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
            assert rt.memory.get_latest_session_for_agent("a1") == first
            rt.memory.delete_session(first)
            _read(rt, read, second)  # after the latest went, a read of another one
            assert rt.memory.get_latest_session_for_agent("a1") == second
        with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
            assert rt.memory.get_latest_session_for_agent("a1") == second
            assert rt.memory.sessions() == [third, second]

    def test_reads_of_an_agents_latest_session_are_not_journaled_each_time(self, tmp_path: Path) -> None:
        clock = FakeClock()
        with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
            first = rt.memory.create_session("u", agent_id="a1")
            rt.memory.create_session("u", agent_id="a2")
            for _ in range(5):
                rt.memory.get_messages(first)  # a1's latest already: within ttl/10, no record
            assert rt._journal is not None
            touched = [r for r in rt._journal.read() if isinstance(r.event, SessionTouched)]
        assert touched == []

    def test_every_session_change_is_journaled(self, tmp_path: Path, clock: FakeClock) -> None:
        with Runtime.open(tmp_path / "j", config=_config(max_sessions=1), clock=clock) as rt:
            a = rt.memory.create_session("u")
            rt.memory.add_message(a, "user", "x")
            clock.advance(TTL / 5)
            rt.memory.get_messages(a)
            b = rt.memory.create_session("u")
            clock.advance(TTL + 1)
            rt.memory.sweep()
            assert rt._journal is not None
            kinds = [
                (type(r.event).__name__, r.event.session)
                for r in rt._journal.read()
                if hasattr(r.event, "session")
            ]

        assert kinds == [
            (SessionCreated.__name__, a),
            (SessionMessageAdded.__name__, a),
            (SessionTouched.__name__, a),
            (SessionEvicted.__name__, a),
            (SessionCreated.__name__, b),
            (SessionExpired.__name__, b),
        ]

    def test_reopening_restores_sessions_and_expires_those_that_aged_while_closed(
        self, tmp_path: Path
    ) -> None:
        clock = FakeClock()
        with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
            keep = rt.memory.create_session("u", agent_id="a1")
            rt.memory.add_message(keep, "user", "remember me")
            clock.advance(TTL * 0.6)
            lapse = rt.memory.create_session("u")
            clock.advance(TTL * 0.3)
            rt.memory.get_messages(keep)
            before = rt.memory.get_messages(keep)

        clock.advance(TTL * 0.5)
        with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
            assert rt.memory.get_messages(keep) == before
            assert rt.memory.get_latest_session_for_agent("a1") == keep
        clock.advance(TTL * 0.7)
        with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
            with pytest.raises(SessionNotFoundError):
                rt.memory.get_messages(lapse)
            assert rt.memory.get_messages(keep) == before

    def test_the_latest_session_of_an_agent_is_answered(self, runtime: Runtime, clock: FakeClock) -> None:
        first = runtime.memory.create_session("u", agent_id="a1")
        clock.advance(1)
        second = runtime.memory.create_session("u", agent_id="a1")
        clock.advance(1)
        runtime.memory.get_messages(first)

        assert runtime.memory.get_latest_session_for_agent("a1") == first
        assert runtime.memory.get_latest_session_for_agent("nobody") is None
        assert second

    def test_a_runtime_without_a_journal_keeps_sessions_in_memory(self) -> None:
        # the original's _NoEventStore: sessions work, only the journal's questions do not
        with Runtime.open(clock=FakeClock()) as rt:
            session = rt.memory.create_session("u", agent_id="a1")
            rt.memory.add_message(session, "user", "hi")
            rt.memory.add_message(session, "assistant", "hello")

            assert [(m.role, m.content) for m in rt.memory.build_prompt_messages(session)] == [
                ("system", "New session started"),
                ("user", "hi"),
                ("assistant", "hello"),
            ]
            rt.memory.delete_session(session)
            with pytest.raises(SessionNotFoundError):
                rt.memory.get_messages(session)

    def test_a_runtime_without_a_journal_cannot_answer_the_latest_session(self) -> None:
        with Runtime.open(clock=FakeClock()) as rt, pytest.raises(AgentCheckpointNotSupportedError):
            rt.memory.get_latest_session_for_agent("a1")

    def test_batch_durability_sessions_survive_a_flush_and_reopen(self, tmp_path: Path) -> None:
        config = Config(journal=JournalConfig(durability="batch"))
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as rt:
            session = rt.memory.create_session("u")
            rt.memory.add_message(session, "user", "hi")
            rt.flush()
        with Runtime.open(tmp_path / "j", config=config, clock=FakeClock()) as rt:
            assert [m.content for m in rt.memory.get_messages(session)] == ["New session started", "hi"]


def _live(rt: Runtime, *session_ids: str) -> list[str]:
    """Which of ``session_ids`` the runtime still holds (read without refreshing: ``size`` aside)."""
    live = []
    for session_id in session_ids:
        try:
            rt.memory.get_messages(session_id)
        except SessionNotFoundError:
            continue
        live.append(session_id)
    return live


class TestRetrievers:
    def test_retrieved_context_is_prepended_ranked_and_deduplicated(self, runtime: Runtime) -> None:
        class Fixed:
            def retrieve(self, query: str) -> Sequence[Snippet]:
                return [
                    Snippet("kb", f"about {query}", 0.9),
                    Snippet("kb", f"about {query}", 0.5),
                    Snippet("web", "weak", 0.1),
                    Snippet("web", "medium", 0.6),
                ]

        runtime.memory.set_retrievers([Fixed()])
        session = runtime.memory.create_session("u")
        runtime.memory.add_message(session, "user", "cats")

        first = runtime.memory.build_prompt_messages(session)[0]

        assert (first.role, first.content) == ("system", "Relevant context:\n[kb] about cats\n[web] medium\n")

    def test_a_minimum_score_of_zero_means_the_default_and_build_context_gets_the_context_too(
        self, tmp_path: Path
    ) -> None:
        class Fixed:
            def retrieve(self, query: str) -> Sequence[Snippet]:
                return [Snippet("kb", f"about {query}", 0.9), Snippet("web", "weak", 0.1)]

        with Runtime.open(tmp_path / "j", config=_config(rag_min_score=0.0), clock=FakeClock()) as rt:
            rt.memory.set_retrievers([Fixed()])
            session = rt.memory.create_session("u")
            rt.memory.add_message(session, "user", "cats")

            first = rt.memory.build_prompt_messages(session)[0]
            context = rt.memory.build_context("dogs?", session)

        assert first.content == "Relevant context:\n[kb] about cats\n"  # 0.1 is under the default 0.4
        assert context.startswith("Relevant context:\n[kb] about dogs?\n\nPrevious conversation history:\n\n")
        assert context.endswith("\nCurrent request:\ndogs?")

    def test_a_snippet_scored_nan_is_left_out_and_its_retrievers_others_kept(self, runtime: Runtime) -> None:
        # the original's filterByMinScore keeps score >= min, which NaN never is
        class Mixed:
            def retrieve(self, query: str) -> Sequence[Snippet]:  # noqa: ARG002
                return [Snippet("a", "good", 0.9), Snippet("a", "nan", math.nan)]

        runtime.memory.set_retrievers([Mixed()])
        session = runtime.memory.create_session("u")
        runtime.memory.add_message(session, "user", "cats")

        assert runtime.memory.build_prompt_messages(session)[0].content == "Relevant context:\n[a] good\n"

    def test_a_snippet_scored_nan_does_not_hide_the_same_snippet_scored_well(self, runtime: Runtime) -> None:
        # left out before the dedup: a NaN kept as the best score of its source and
        # content would, never >= the minimum, take the well-scored copy out with it
        class Twice:
            def retrieve(self, query: str) -> Sequence[Snippet]:  # noqa: ARG002
                return [Snippet("a", "same", math.nan), Snippet("a", "same", 0.9)]

        runtime.memory.set_retrievers([Twice()])
        session = runtime.memory.create_session("u")
        runtime.memory.add_message(session, "user", "cats")

        assert runtime.memory.build_prompt_messages(session)[0].content == "Relevant context:\n[a] same\n"

    @pytest.mark.parametrize(
        "result",
        [
            None,
            [{"source": "kb", "content": "x", "score": 0.9}],
            [Snippet("kb", "x", "0.9")],  # type: ignore[arg-type]
        ],
        ids=["None", "dicts", "str score"],
    )
    def test_a_retriever_that_returns_a_bad_result_is_skipped_like_one_that_raises(
        self, runtime: Runtime, result: object
    ) -> None:
        class Bad:
            def retrieve(self, query: str) -> object:  # noqa: ARG002
                return result

        class Good:
            def retrieve(self, query: str) -> Sequence[Snippet]:
                return [Snippet("kb", f"about {query}", 0.9)]

        runtime.memory.set_retrievers([Bad(), Good()])  # type: ignore[list-item]
        session = runtime.memory.create_session("u")
        runtime.memory.add_message(session, "user", "cats")

        first = runtime.memory.build_prompt_messages(session)[0]

        assert first.content == "Relevant context:\n[kb] about cats\n"
        assert runtime.memory.build_context("dogs?", session).startswith(
            "Relevant context:\n[kb] about dogs?\n"
        )

    @pytest.mark.parametrize(
        ("field", "value"), [("rag_top_k", 0), ("rag_min_score", -0.1), ("rag_min_score", math.nan)]
    )
    def test_a_bad_rag_limit_is_an_invalid_rag_configuration(self, field: str, value: float) -> None:
        with pytest.raises(InvalidConfigError, match=rf"^invalid RAG configuration: {field} must"):
            MemoryConfig(**{field: value})  # type: ignore[arg-type]


class TestRetrieversRunBesideTheSessionActor:
    """Spec §5.3: retrievers run in parallel, at most four at a time; not on the session actor."""

    def test_four_retrievers_run_at_once_and_a_fifth_waits_for_one_of_them(self, runtime: Runtime) -> None:
        together = threading.Barrier(4, timeout=10)  # breaks unless four run at once
        lock = threading.Lock()
        running: list[int] = [0, 0]  # now, most

        class Meeting:
            def __init__(self, name: str) -> None:
                self.name = name

            def retrieve(self, query: str) -> Sequence[Snippet]:
                with lock:
                    running[0] += 1
                    running[1] = max(running)
                try:
                    if self.name != "fifth":
                        together.wait()
                    return [Snippet(self.name, query, 0.9)]
                finally:
                    with lock:
                        running[0] -= 1

        runtime.memory.set_retrievers([Meeting(n) for n in ("a", "b", "c", "d", "fifth")])
        session = runtime.memory.create_session("u")
        runtime.memory.add_message(session, "user", "q")

        first = runtime.memory.build_prompt_messages(session)[0]

        assert first.content.splitlines() == [
            "Relevant context:",
            *(f"[{n}] q" for n in ("a", "b", "c", "d", "fifth")),
        ]
        assert running[1] == 4

    def test_a_slow_retriever_holds_up_only_its_own_caller(self, runtime: Runtime) -> None:
        entered, release = threading.Event(), threading.Event()

        class Slow:
            def retrieve(self, query: str) -> Sequence[Snippet]:
                entered.set()
                assert release.wait(10)
                return [Snippet("slow", query, 0.9)]

        runtime.memory.set_retrievers([Slow()])
        mine = runtime.memory.create_session("u")
        other = runtime.memory.create_session("v")
        runtime.memory.add_message(mine, "user", "q")
        built: list[list[Message]] = []
        caller = threading.Thread(target=lambda: built.append(runtime.memory.build_prompt_messages(mine)))
        caller.start()
        try:
            assert entered.wait(10)
            # the session actor answers while the retriever works
            assert [m.content for m in runtime.memory.get_messages(other)] == ["New session started"]
            runtime.memory.add_message(other, "user", "meanwhile")
        finally:
            release.set()
            caller.join(10)
        assert not caller.is_alive()
        assert built[0][0].content == "Relevant context:\n[slow] q\n"

    def test_a_retriever_late_past_call_timeout_is_left_out_and_logged(
        self, tmp_path: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture
    ) -> None:
        release = threading.Event()

        class Stuck:
            def retrieve(self, query: str) -> Sequence[Snippet]:  # noqa: ARG002
                release.wait(10)
                return [Snippet("stuck", "late", 0.9)]

        class Quick:
            def retrieve(self, query: str) -> Sequence[Snippet]:
                return [Snippet("quick", query, 0.9)]

        config = _config()  # call_timeout 0.2 s for the retrievers alone, not the set-up's commits
        try:
            with Runtime.open(tmp_path / "j", config=config, clock=clock) as rt:
                rt.memory.set_retrievers([Stuck(), Quick()])
                session = rt.memory.create_session("u")
                rt.memory.add_message(session, "user", "q")

                with _short_call_timeout(rt, 0.2):
                    first = rt.memory.build_prompt_messages(session)[0]
                    text = rt.memory.build_context("q2", session)
        finally:
            release.set()

        assert first.content == "Relevant context:\n[quick] q\n"
        assert text.startswith("Relevant context:\n[quick] q2\n\nPrevious conversation history:")
        assert "1 of 2 retrievers did not answer within 0.2 s" in caplog.text

    def test_a_retriever_that_hangs_holds_one_thread_and_is_asked_again_once_it_returns(
        self, tmp_path: Path, clock: FakeClock
    ) -> None:
        # Each prompt built started another thread for a retriever still hanging from
        # the last one: over a long run they used up the threads agents need.
        release = threading.Event()
        asked: list[str] = []

        class Hanging:
            def retrieve(self, query: str) -> Sequence[Snippet]:
                asked.append(query)
                release.wait(10)
                return [Snippet("hanging", query, 0.9)]

        class Quick:
            def retrieve(self, query: str) -> Sequence[Snippet]:
                return [Snippet("quick", query, 0.9)]

        def retriever_threads() -> list[threading.Thread]:
            return [t for t in threading.enumerate() if t.name.startswith("cogfabric-retriever [")]

        config = _config()  # call_timeout 0.2 s for the retrievers alone, not the set-up's commits
        before = set(retriever_threads())
        try:
            with Runtime.open(tmp_path / "j", config=config, clock=clock) as rt:
                rt.memory.set_retrievers([Hanging(), Quick()])
                session = rt.memory.create_session("u")
                with _short_call_timeout(rt, 0.2):
                    texts = [rt.memory.build_context(f"q{n}", session) for n in range(20)]

                assert all(
                    text.startswith(f"Relevant context:\n[quick] q{n}\n") for n, text in enumerate(texts)
                )
                assert asked == ["q0"]  # left out while it still runs for the first prompt
                hanging = [t for t in retriever_threads() if t not in before]
                assert len(hanging) == 1
                release.set()
                hanging[0].join(10)
                assert not hanging[0].is_alive()

                with _short_call_timeout(rt, 0.2):
                    text = rt.memory.build_context("again", session)
        finally:
            release.set()

        assert asked == ["q0", "again"]
        assert "[hanging] again" in text

    def test_a_retriever_overdue_in_two_overlapping_prompts_holds_no_more_threads_after(
        self, tmp_path: Path, clock: FakeClock
    ) -> None:
        # One mark per retriever: the run that came back late cleared it while the other
        # still hung, and each later pair of prompts left one more thread hanging.
        forever, late = threading.Event(), threading.Event()
        slow_threads: list[threading.Thread] = []

        class Flaky:
            def retrieve(self, query: str) -> Sequence[Snippet]:
                if query.startswith("hang"):
                    forever.wait(30)
                else:
                    slow_threads.append(threading.current_thread())
                    late.wait(30)  # returns once the test lets it: after its caller left
                return [Snippet("flaky", query, 0.9)]

        def retriever_threads() -> int:
            return sum(
                t.name.startswith("cogfabric-retriever [") and t.is_alive() for t in threading.enumerate()
            )

        config = _config()  # call_timeout 0.2 s for the retrievers alone, not the set-up's commits
        before = retriever_threads()
        alive: list[int] = []
        try:
            with Runtime.open(tmp_path / "j", config=config, clock=clock) as rt:
                rt.memory.set_retrievers([Flaky()])
                session = rt.memory.create_session("u")
                with _short_call_timeout(rt, 0.2):  # the retrievers' wait, not the set-up's commits
                    for round_ in range(3):
                        late.clear()
                        callers = [
                            threading.Thread(target=rt.memory.build_context, args=(query, session))
                            for query in (f"slow{round_}", f"hang{round_}")
                        ]
                        for caller in callers:
                            caller.start()
                        for caller in callers:
                            caller.join(10)
                        late.set()
                        for thread in slow_threads:
                            thread.join(10)
                        alive.append(retriever_threads() - before)
        finally:
            forever.set()
            late.set()

        assert alive == [1, 1, 1]  # the first round's hanging run only: later prompts left it out


class TestCleaner:
    def test_with_ellipsis(self) -> None:
        assert with_ellipsis("abc", 0) == ""
        assert with_ellipsis("abc", 3) == "abc"
        assert with_ellipsis("abcdef", 3) == "abc"
        assert with_ellipsis("abcdefgh", 6) == "abc..."

    def test_extract_gist_takes_the_first_sentence(self) -> None:
        assert extract_gist("Done. Then more text follows here.", 50) == "Done."
        assert extract_gist("```py\ncode\n``` Result is 4! yes", 50) == "Result is 4!"
        assert extract_gist("x" * 80, 10) == "xxxxxxx..."

    def test_extract_gist_of_nothing_but_code_keeps_the_code(self) -> None:
        assert extract_gist("```code```", 50) == "```code```"
        assert extract_gist("  ```py\nx = 1\n```  ", 50) == "```py"  # its first line

    def test_a_code_block_of_an_assistant_message_becomes_its_label_with_the_language(self) -> None:
        messages = [
            Message(role="assistant", content="See:\n```python\nprint(1)\n```\nand ```\nplain\n```."),
        ]

        cleaned = clean_with_turns(messages, CleanOptions())

        assert cleaned[0].content == "See:\n<code block [python]>\nand <code block>."

    def test_the_active_turn_keeps_tool_traffic_and_earlier_turns_are_summarised(self) -> None:
        call = ToolCall(
            id="c1", function=ToolCallFunction(name="http_request", arguments='{"url": "http://x"}')
        )
        messages = [
            Message(role="user", content="fetch it", turn_id="t1"),
            Message(role="assistant", content="calling", turn_id="t1", tool_calls=[call]),
            Message(
                role="tool_result",
                content="HTTP 200 OK and a long body " * 10,
                turn_id="t1",
                tool_call_id="c1",
            ),
            Message(role="user", content="again", turn_id="t2", parent_id="p", event_kind="k"),
            Message(role="tool_result", content="raw " * 40, turn_id="t2", tool_call_id="c2"),
        ]

        out = clean_with_turns(messages, CleanOptions())

        assert len(out) == len(messages)
        assert (
            out[2].content == "GET http://x (280 bytes)"
        )  # no line states a status as the original reads one
        assert out[3] == Message(role="user", content="again", turn_id="t2")
        assert out[4] == messages[4]

    def test_messages_before_the_first_turn_id_join_the_first_turn(self) -> None:
        # the original's groupByTurnID: the first turn id names the turn already open,
        # so the session's seed and untagged tool traffic before it are not a finished turn
        call = ToolCall(id="c1", function=ToolCallFunction(name="web_scraper", arguments="{}"))
        messages = [
            Message(role="system", content="New session started"),
            Message(role="assistant", content="", tool_calls=[call]),
            Message(role="tool_result", content="Result line one is here. " * 10, tool_call_id="c1"),
            Message(role="user", content="question", turn_id="t1"),
            Message(role="assistant", content="answer", turn_id="t1"),
        ]

        out = clean_with_turns(messages, CleanOptions(max_summarized_turns=1))

        assert [m.content for m in out[:1] + out[3:]] == ["New session started", "question", "answer"]
        assert out[1:3] == messages[1:3]  # tool traffic of the active turn is kept as it is
        later = [*messages, Message(role="user", content="next", turn_id="t2")]
        assert [m.content for m in clean_with_turns(later, CleanOptions(max_summarized_turns=1))] == ["next"]

    @pytest.mark.parametrize(
        ("tool", "arguments", "output", "summary"),
        [
            (
                "code_runner",
                '{"command": "pytest"}',
                "collected 3 items\nexit code: 1",
                "Exec `pytest` exit=1: collected 3 items",
            ),
            ("code_runner", '{"command": "pytest"}', "Exit code: 2\nFAILED", "Exec `pytest` exit=2: FAILED"),
            (
                "code_runner",
                '{"command": "make"}',
                '{"exit_code": 0}',
                'Exec `make` exit=0: {"exit_code": 0}',
            ),
            ("code_runner", '{"command": "kill"}', "Exited with code -9", "Exec `kill` exit=-9 (19 bytes)"),
            ("code_runner", '{"command": "ls"}', "a.txt b.txt 42", "Exec `ls` exit=?: a.txt b.txt 42"),
            (
                "http_request",
                '{"url": "http://x", "method": "post"}',
                "Status: 404\n250 items",
                "post http://x → 404: 250 items",
            ),
            (
                "http_request",
                '{"url": "http://x"}',
                "HTTP/1.1 503 Service Unavailable",
                "GET http://x → 503 Service Unavailable (32 bytes)",
            ),
            (
                "http_request",
                '{"url": "http://x"}',
                '{"status": 201, "items": 300}',
                'GET http://x → 201: {"status": 201, "items": 300}',
            ),
            ("http_request", '{"url": "http://x"}', "200 OK\nhello", "GET http://x (12 bytes)"),
            # the original's: the last "exit code:" line decides, whatever follows its colon
            (
                "code_runner",
                '{"command": "./deploy.sh"}',
                "step 1: build ok\nretry: worker exited with code 1\nstep 2: push ok\nexit code: 0",
                "Exec `./deploy.sh` exit=0: step 1: build ok",
            ),
            ("code_runner", '{"command": "x"}', "exit code: 0\nexit code: 2\n", "Exec `x` exit=2 (26 bytes)"),
            (
                "code_runner",
                '{"command": "x"}',
                "Exit code: non-zero\nTraceback: boom",
                "Exec `x` exit=non-zero: Traceback: boom",
            ),
            # the code ARES's own code runner takes, where there is no command; no repr of a list
            ("code_runner", '{"code": "print(1)"}', "1", "Exec `print(1)` exit=?: 1"),
            ("code_runner", '{"command": ["ls", "-l"]}', "a", "Exec `` exit=?: a"),
            # the original's TestSummarizeToolResultWithCall_HTTPRequest input: the status's text whole
            (
                "http_request",
                '{"url": "https://api.example.com/resource", "method": "GET"}',
                'Status: 200 OK\n{"id": 1, "name": "test"}\n',
                'GET https://api.example.com/resource → 200 OK: {"id": 1, "name": "test"}',
            ),
            ("http_request", '{"url": "http://x"}', 'Status: OK\n{"id": 1}', 'GET http://x → OK: {"id": 1}'),
            (
                "http_request",
                '{"url": "http://x"}',
                "Status: 200\nHTTP 500 errors in the last hour: 0\n",
                "GET http://x → 200: HTTP 500 errors in the last hour: 0",
            ),
            # a JSON result's own status, not one inside its body; a body's number is no status
            (
                "http_request",
                '{"url": "http://x"}',
                '{"body": {"db": {"status": 503}}, "status_code": 200}',
                'GET http://x → 200: {"body": {"db": {"status": 503}}, "status_code": 200}',
            ),
            (
                "http_request",
                '{"url": "http://x"}',
                "250 users exported\nsee /x.csv",
                "GET http://x (29 bytes)",
            ),
            ("http_request", '{"url": "http://x"}', "no status line, price 250", "GET http://x (25 bytes)"),
            # a line said another way must be that alone; where several are, the last decides
            ("code_runner", '{"command": "x"}', "retry: exit 3 of 5", "Exec `x` exit=?: retry: exit 3 of 5"),
            (
                "code_runner",
                '{"command": "x"}',
                "exit_code=1\nretrying\nexit_code=0",
                "Exec `x` exit=0: retrying",
            ),
            # the original's "status:" too, and the text after the line's first colon
            (
                "http_request",
                '{"url": "http://x"}',
                "status: 404\nnot found",
                "GET http://x → 404: not found",
            ),
            (
                "http_request",
                '{"url": "http://x"}',
                "Status: 503 (retry after 10:30)\nbusy",
                "GET http://x → 503 (retry after 10:30): busy",
            ),
            # a JSON object's status_code before its status, exit_code before the others;
            # a bool is no status (an API's "status": true)
            (
                "http_request",
                '{"url": "http://x"}',
                '{"status": "ok", "status_code": 200}',
                'GET http://x → 200: {"status": "ok", "status_code": 200}',
            ),
            (
                "code_runner",
                '{"command": "x"}',
                '{"exit_status": 1, "exit_code": 0}',
                'Exec `x` exit=0: {"exit_status": 1, "exit_code": 0}',
            ),
            ("http_request", '{"url": "http://x"}', '{"status": true}', "GET http://x (16 bytes)"),
        ],
    )
    def test_a_finished_turns_tool_result_names_the_exit_code_or_status_the_output_states(
        self, tool: str, arguments: str, output: str, summary: str
    ) -> None:
        call = ToolCall(id="c1", function=ToolCallFunction(name=tool, arguments=arguments))
        messages = [
            Message(role="user", content="go", turn_id="t1"),
            Message(role="assistant", content="", turn_id="t1", tool_calls=[call]),
            Message(role="tool_result", content=output, turn_id="t1", tool_call_id="c1"),
            Message(role="user", content="next", turn_id="t2"),
        ]

        assert clean_with_turns(messages, CleanOptions())[2].content == summary

    @pytest.mark.parametrize(
        ("tool", "arguments", "output", "summary"),
        [
            (
                "file_tools",
                '{"operation": "read", "path": "/a"}',
                "\n  first line\nmore",
                "Read /a: first line",
            ),
            ("file_read", '{"operation": "read", "path": "/a"}', "\n\nthird", "Read /a (7 bytes)"),
            ("file_tools", '{"operation": "write", "path": "/a"}', "héllo", "Wrote /a (6 bytes)"),
            ("file_tools", '{"operation": "list", "path": "/d"}', "a\nb\nc", "Listed /d (3 entries)"),
            (
                "file_tools",
                '{"operation": "write", "path": "/etc/app.conf"}',
                "Error: permission denied",
                "File /etc/app.conf (write): Error: permission denied",
            ),
            ("file_tools", '{"path": "/a"}', "contents of a. More.", "contents of a."),
            ("file_stat", '{"operation": "stat", "path": "/a"}', "size 3. mode 644", "size 3."),
            ("code_runner", '{"command": "true"}', "", ""),  # an empty result stays empty
            # the original's TestSummarizeToolResultWithCall_CodeRunner: the exit code, the
            # language, and the output's first line as a preview
            (
                "code_runner",
                '{"command": "echo hello", "language": "bash"}',
                "Hello World\nexit code: 0\n",
                "Exec `echo hello (bash)` exit=0: Hello World",
            ),
            ("code_runner", '{"command": "x"}', "  \n" + "y" * 150, "Exec `x` exit=?: " + "y" * 97 + "..."),
            # the command before the code, cut to 60 code points; a language that is no string is left out
            ("code_runner", '{"command": "pytest", "code": "print(1)"}', "ok", "Exec `pytest` exit=?: ok"),
            ("code_runner", '{"command": "' + "c" * 70 + '"}', "ok", "Exec `" + "c" * 57 + "...` exit=?: ok"),
            ("code_runner", '{"command": "x", "language": 5}', "ok", "Exec `x` exit=?: ok"),
            ("code_runner", '{"command": "x"}', "Exit code: ü", "Exec `x` exit=ü (13 bytes)"),  # Go's len
            # a scraped page keeps its first 120 code points, not only its first sentence
            (
                "web_scraper",
                '{"url": "http://w"}',
                "Weather. Sunny, 21 C in Paris today",
                "Scraped http://w: Weather. Sunny, 21 C in Paris today",
            ),
            ("web_scraper", '{"URL": "http://old"}', "z" * 130, "Scraped http://old: " + "z" * 117 + "..."),
            ("web_scraper", '{"url": 5}', "page", "Scraped <unknown-url>: page"),
            ("web_scraper", '{"url": "http://new", "URL": "http://old"}', "page", "Scraped http://new: page"),
            ("http_request", "{}", "Status: 200", "GET <unknown-url> → 200 (11 bytes)"),
            ("http_request", '{"url": "http://x", "method": ""}', "héllo", "GET http://x (6 bytes)"),
            (
                "knowledge_search",
                '{"query": "cats"}',
                "Cats sleep 16h a day\nCats purr",
                'Search "cats" (2 results): Cats sleep 16h a day\nCats purr',
            ),
            ("memory_search", '{"query": "q"}', "r" * 121, 'Search "q" (1 results): ' + "r" * 117 + "..."),
            # lines are what "\n" ends (U+2028 is none), a JSON object counts its "results"
            ("memory_search", '{"query": "q"}', "a\u2028b\n\n", 'Search "q" (1 results): a\u2028b\n\n'),
            ("knowledge_search", '{"query": "q"}', "a\n \t\nb", 'Search "q" (2 results): a\n \t\nb'),
            (
                "memory_search",
                '{"query": "q"}',
                '{"results": [1, 2, 3]}',
                'Search "q" (3 results): {"results": [1, 2, 3]}',
            ),
            ("http_request", '{"url": "http://x"}', "", ""),
            ("knowledge_search", '{"query": "cats"}', '["a", "b"]', 'Search "cats" (2 results): ["a", "b"]'),
            # the query is quoted as Go's %q quotes it (the preview keeps the results' lines)
            (
                "memory_search",
                '{"query": "say \\"hi\\"\\nnow"}',
                "one\ntwo\nthree",
                'Search "say \\"hi\\"\\nnow" (3 results): one\ntwo\nthree',
            ),
            (
                "knowledge_search",
                '{"query": 5}',
                "[]",
                'Search "" (0 results): []',
            ),  # a query that is no string
            # Go's %q, not JSON's quoting: a control character as \x01, a letter as it is
            (
                "knowledge_search",
                '{"query": "a\\u0001\u00e9"}',
                "[]",
                'Search "a\\x01\u00e9" (0 results): []',
            ),
            (
                "other",
                "{}",
                "Done.\x1f then more",
                "Done.",
            ),  # Go's \s is ASCII: the sentence ends before U+001F
        ],
    )
    def test_a_finished_turns_tool_result_is_summarised_as_the_original_does(
        self, tool: str, arguments: str, output: str, summary: str
    ) -> None:
        call = ToolCall(id="c1", function=ToolCallFunction(name=tool, arguments=arguments))
        messages = [
            Message(role="user", content="go", turn_id="t1"),
            Message(role="assistant", content="", turn_id="t1", tool_calls=[call]),
            Message(role="tool_result", content=output, turn_id="t1", tool_call_id="c1"),
            Message(role="user", content="next", turn_id="t2"),
        ]

        assert clean_with_turns(messages, CleanOptions())[2].content == summary

    def test_a_finished_turns_tool_call_names_its_calls_with_quoted_short_values(self) -> None:
        calls = [
            ToolCall(id="", function=ToolCallFunction(name="f", arguments='{"a": "b", "n": 3}')),
            ToolCall(
                id="c2",
                function=ToolCallFunction(
                    name="g",
                    arguments='{"q": "x\\"y\\nz", "long": "' + "é" * 21 + '", "cjk": "' + "東" * 20 + '"}',
                ),
            ),
        ]
        messages = [
            Message(role="tool_call", content="calling", turn_id="t1", tool_calls=calls),
            Message(role="user", content="next", turn_id="t2"),
        ]

        summary = clean_with_turns(messages, CleanOptions())[0].content

        # no id: no "id: " before it; a value of more than 20 characters shows its key only
        # (spec §5.4 counts characters: 20 CJK characters are shown)
        assert summary == 'call f(a="b", n); c2: call g(q="x\\"y\\nz", long, cjk="' + "東" * 20 + '")'

    @pytest.mark.parametrize(
        ("value", "quoted"),
        [
            ("a\x01b", '"a\\x01b"'),
            ("bell\x07", '"bell\\a"'),
            ("del\x7f", '"del\\x7f"'),
            ("nb\xa0sp", '"nb\\u00a0sp"'),
            ("\u2028", '"\\u2028"'),
            ("é😀", '"é😀"'),
        ],
    )
    def test_a_short_tool_call_value_is_quoted_as_gos_percent_q(self, value: str, quoted: str) -> None:
        arguments = msgspec.json.encode({"k": value}).decode()
        call = ToolCall(id="c1", function=ToolCallFunction(name="f", arguments=arguments))
        messages = [
            Message(role="tool_call", content="calling", turn_id="t1", tool_calls=[call]),
            Message(role="user", content="next", turn_id="t2"),
        ]

        assert clean_with_turns(messages, CleanOptions())[0].content == f"c1: call f(k={quoted})"

    def test_an_escaped_lone_surrogate_in_tool_call_arguments_reads_as_the_replacement_character(
        self,
    ) -> None:
        # a cut-off emoji escape: ASCII text, but json.loads makes it a lone surrogate,
        # which Go's decoder (and so the original's summary) reads as U+FFFD
        call = ToolCall(
            id="c1",
            function=ToolCallFunction(
                name="file_tools", arguments='{"operation": "read", "path": "\\ud83d"}'
            ),
        )
        messages = [
            Message(role="user", content="go", turn_id="t1"),
            Message(role="tool_call", content="", turn_id="t1", tool_calls=[call]),
            Message(role="tool_result", content="line one", turn_id="t1", tool_call_id="c1"),
            Message(role="user", content="next", turn_id="t2"),
        ]

        cleaned = [m.content for m in clean_with_turns(messages, CleanOptions())]

        assert cleaned[1:3] == [
            'c1: call file_tools(operation="read", path="\ufffd")',
            "Read \ufffd: line one",
        ]
        assert all(text.encode() for text in cleaned)  # nothing a provider's encoder would refuse

    def test_a_tool_result_without_id_is_summarised_by_the_call_without_id_as_the_original_matches_them(
        self,
    ) -> None:
        # the original looks a result's ToolCallID up in a map of the turn's calls by id,
        # where a call without id is stored under "" too
        call = ToolCall(
            id="",
            function=ToolCallFunction(name="file_tools", arguments='{"operation": "write", "path": "/a"}'),
        )
        messages = [
            Message(role="user", content="go", turn_id="t1"),
            Message(role="tool_call", content="", turn_id="t1", tool_calls=[call]),
            Message(role="tool_result", content="abc", turn_id="t1"),
            Message(role="user", content="next", turn_id="t2"),
        ]

        assert clean_with_turns(messages, CleanOptions())[2].content == "Wrote /a (3 bytes)"

    @pytest.mark.parametrize("tool", ["code_runner", "knowledge_search"])
    def test_json_nested_past_the_stack_is_summarised_as_malformed_json_is(self, tool: str) -> None:
        deep = "[" * 100_000 + "]" * 100_000  # a model's or a tool's text: json.loads recurses

        def cleaned(arguments: str, output: str) -> str:
            call = ToolCall(id="c1", function=ToolCallFunction(name=tool, arguments=arguments))
            messages = [
                Message(role="user", content="go", turn_id="t1"),
                Message(role="assistant", content="", turn_id="t1", tool_calls=[call]),
                Message(role="tool_result", content=output, turn_id="t1", tool_call_id="c1"),
                Message(role="user", content="next", turn_id="t2"),
            ]
            return "|".join(m.content for m in clean_with_turns(messages, CleanOptions()))

        # malformed JSON with the same first line: the same summary, preview and count
        assert cleaned(deep, deep) == cleaned("{", "[" * 200 + "x")

    def test_max_summarized_turns_keeps_the_last_turns(self) -> None:
        messages = [Message(role="user", content=f"q{i}") for i in range(4)]

        out = clean_with_turns(messages, CleanOptions(max_summarized_turns=2))

        assert [m.content for m in out] == ["q2", "q3"]


@pytest.mark.parametrize("time", [math.nan, math.inf, -math.inf])
def test_a_structured_message_with_a_time_that_is_not_finite_is_refused(
    runtime: Runtime, time: float
) -> None:
    session = runtime.memory.create_session("u")
    before = runtime.memory.get_messages(session)
    with pytest.raises(InvalidEventError, match="finite") as info:
        runtime.memory.add_structured_message(session, Message(role="user", content="x", time=time))
    assert runtime.memory.get_messages(session) == before
    assert isinstance(info.value, ValueError)


def test_a_structured_message_with_a_field_of_the_wrong_type_is_refused_with_a_typed_error(
    runtime: Runtime,
) -> None:
    session = runtime.memory.create_session("u")
    before = runtime.memory.get_messages(session)
    bad = Message(role="assistant", content="x", tool_calls=[{"id": 5}])  # type: ignore[list-item]
    with pytest.raises(InvalidEventError, match="not a valid Message") as info:
        runtime.memory.add_structured_message(session, bad)
    assert runtime.memory.get_messages(session) == before
    assert isinstance(info.value, TypeError)


@pytest.mark.parametrize("error", [SystemExit(3), asyncio.CancelledError()], ids=["sys.exit", "cancelled"])
def test_a_retriever_raising_a_base_exception_is_skipped_and_the_runtime_goes_on(
    runtime: Runtime, error: BaseException
) -> None:
    class Exits:
        def retrieve(self, query: str) -> Sequence[Snippet]:  # noqa: ARG002
            raise error

    runtime.memory.set_retrievers([Exits()])
    session = runtime.memory.create_session("u")
    runtime.memory.add_message(session, "user", "cats")
    window = runtime.memory.build_prompt_messages(session)
    assert [m.content for m in window][-1] == "cats"
    runtime.memory.add_message(session, "user", "still here")  # the session actor still answers


def test_build_context_refuses_an_input_that_is_not_text(runtime: Runtime) -> None:
    with pytest.raises(TypeError):
        runtime.memory.build_context(5, "unknown")  # type: ignore[arg-type]


def test_open_releases_the_journal_when_session_recovery_fails(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Runtime.open(path, clock=FakeClock()) as rt:
        session = rt.memory.create_session("u")
        rt.memory.add_message(session, "user", "x" * 40)
        rt.spawn("later")  # the damaged record is not the last: the chain head still names it
    with Journal.open(path, readonly=True) as journal:
        seq = next(r.seq for r in journal.read() if isinstance(r.event, SessionMessageAdded))
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True) as txn:  # a record recovery cannot read
        txn.put(seq.to_bytes(8, "big"), b"\xff" * 64, db=env.open_db(b"events", txn=txn))
    env.close()
    for _ in range(2):  # the second open would find the journal locked if the first leaked it
        with pytest.raises(JournalRecordError):
            Runtime.open(path, allow_unverified=True, clock=FakeClock())


class SteppingClock:
    """A wall clock an NTP step may move back (a FakeClock only moves forward)."""

    wall = 1_700_001_000.0

    def now(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return 0.0
