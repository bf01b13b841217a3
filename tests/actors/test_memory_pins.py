"""Session memory and its cleaner: behaviours of spec §4-§5 and README that no test held.

Each was found by a mutation test (a mutant of ``_memory.py``, ``_cleaner.py`` or
``_memory_config.py`` that every other test let through); the comment on each test
names what it holds.
"""

from __future__ import annotations

import math
import re
import threading
import types
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from cogfabric.actors import (
    CleanOptions,
    Config,
    FakeClock,
    InvalidConfigError,
    MemoryConfig,
    Runtime,
    SessionNotFoundError,
    Snippet,
)
from cogfabric.actors import _memory as memory_module
from cogfabric.actors._cleaner import clean, clean_with_turns, extract_gist, with_ellipsis
from cogfabric.events import Message, SessionExpired, SessionTouched, ToolCall, ToolCallFunction

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    from cogfabric.store import Journal

TTL = 100.0


def _config(**memory: object) -> Config:
    settings: dict[str, object] = {"session_ttl": TTL, **memory}
    return Config(memory=msgspec.convert(settings, MemoryConfig))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def runtime(tmp_path: Path, clock: FakeClock) -> Iterator[Runtime]:
    with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
        yield rt


def _journal(rt: Runtime) -> Journal:
    assert rt._journal is not None
    return rt._journal


def _touches(rt: Runtime) -> list[float]:
    """When each journaled read was made (a read's record is not waited for: flushed first)."""
    rt.flush()
    return [r.event.at for r in _journal(rt).read() if isinstance(r.event, SessionTouched)]


class _Recording:
    """A retriever that records each query and finds one snippet of ``score`` for it."""

    def __init__(self, score: float = 0.9) -> None:
        self.score = score
        self.queries: list[str] = []

    def retrieve(self, query: str) -> Sequence[Snippet]:
        self.queries.append(query)
        return [Snippet("kb", f"about {query}", self.score)]


class TestSessionIds:
    def test_a_session_id_is_session_the_user_id_and_16_random_hex_digits(self, runtime: Runtime) -> None:
        # README "Ids": session_<user id>_<16 random hex>
        session = runtime.memory.create_session("u1")

        assert re.fullmatch(r"session_u1_[0-9a-f]{16}", session), session

    def test_the_user_id_in_a_session_id_is_cut_to_its_first_100_characters(self, runtime: Runtime) -> None:
        # README "Ids": the user id cut to 100 characters, as the stream name is bounded
        user = "".join(chr(ord("a") + n % 26) for n in range(150))

        session = runtime.memory.create_session(user)

        assert re.fullmatch(rf"session_{user[:100]}_[0-9a-f]{{16}}", session), session


class TestTtlJournalAndCounts:
    def test_a_read_that_finds_its_session_expired_journals_the_expiry_at_once(
        self, runtime: Runtime, clock: FakeClock
    ) -> None:
        # "every change journaled": the lazy expiry of a read, not only a sweep's
        session = runtime.memory.create_session("u")
        clock.advance(TTL + 1)

        with pytest.raises(SessionNotFoundError):
            runtime.memory.get_messages(session)

        runtime.flush()
        expired = [r.event for r in _journal(runtime).read() if isinstance(r.event, SessionExpired)]
        assert [(e.at, e.session) for e in expired] == [(clock.now(), session)]

    def test_a_read_is_journaled_once_a_tenth_of_the_ttl_has_passed_since_the_last_record(
        self, runtime: Runtime, clock: FakeClock
    ) -> None:
        # README: a read is journaled at most once per session_ttl / 10, so a reopened
        # runtime's last access is at most that much older than the live one's
        session = runtime.memory.create_session("u")
        clock.advance(TTL / 10 * 1.5)
        first = clock.now()
        runtime.memory.get_messages(session)
        clock.advance(TTL / 20)
        runtime.memory.get_messages(session)  # within ttl/10 of the last record: none

        assert _touches(runtime) == [first]

    def test_after_reopening_reads_of_an_agents_latest_session_are_not_journaled_each_time(
        self, tmp_path: Path, clock: FakeClock
    ) -> None:
        # recovery knows each agent's latest session: reading it again journals nothing
        with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
            rt.memory.create_session("u", agent_id="a1")
            latest = rt.memory.create_session("u", agent_id="a1")
        with Runtime.open(tmp_path / "j", config=_config(), clock=clock) as rt:
            for _ in range(3):
                rt.memory.get_messages(latest)

            assert rt.memory.get_latest_session_for_agent("a1") == latest
            assert _touches(rt) == []

    def test_size_and_sessions_count_only_live_sessions_before_any_sweep(
        self, runtime: Runtime, clock: FakeClock
    ) -> None:
        # size(): "How many live sessions there are"; an expired one is never returned
        old = runtime.memory.create_session("u")
        clock.advance(TTL / 2)
        fresh = runtime.memory.create_session("u")
        clock.advance(TTL / 2 + 1)

        assert runtime.memory.size() == 1
        assert runtime.memory.sessions() == [fresh]
        assert old != fresh


class TestRetrievalQuery:
    def test_a_snippet_scored_exactly_the_minimum_score_is_kept(self, tmp_path: Path) -> None:
        # the original's filterByMinScore keeps score >= min (0 means the default, 0.4)
        for min_score, score in ((0.0, 0.4), (0.7, 0.7)):
            with Runtime.open(
                tmp_path / f"j{min_score}", config=_config(rag_min_score=min_score), clock=FakeClock()
            ) as rt:
                rt.memory.set_retrievers([_Recording(score)])
                session = rt.memory.create_session("u")
                rt.memory.add_message(session, "user", "cats")

                first = rt.memory.build_prompt_messages(session)[0]

            assert first.content == "Relevant context:\n[kb] about cats\n", min_score

    def test_the_query_is_the_last_user_message_of_the_window(self, runtime: Runtime) -> None:
        # spec §5.3 step 5: the raw content of the last user message inside the window
        retriever = _Recording()
        runtime.memory.set_retrievers([retriever])
        session = runtime.memory.create_session("u")
        runtime.memory.add_message(session, "user", "first question")
        runtime.memory.add_message(session, "assistant", "an answer")
        runtime.memory.add_message(session, "user", "second question")
        runtime.memory.add_message(session, "assistant", "another answer")

        first = runtime.memory.build_prompt_messages(session)[0]

        assert retriever.queries == ["second question"]
        assert first.content == "Relevant context:\n[kb] about second question\n"

    def test_no_more_than_four_retriever_threads_run_for_one_prompt(
        self, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # "at most four at a time": five retrievers get four threads, not five (a
        # thread count holds it deterministically, where peak concurrency is a race)
        started: list[str] = []

        class Counted(threading.Thread):
            def start(self) -> None:
                started.append(self.name)
                super().start()

        namespace: dict[str, Any] = {**vars(threading), "Thread": Counted}
        monkeypatch.setattr(memory_module, "threading", types.SimpleNamespace(**namespace))
        retrievers = [_Recording() for _ in range(5)]
        runtime.memory.set_retrievers(retrievers)
        session = runtime.memory.create_session("u")
        runtime.memory.add_message(session, "user", "q")

        first = runtime.memory.build_prompt_messages(session)[0]

        assert first.content == "Relevant context:\n[kb] about q\n"  # five alike, deduplicated
        assert [r.queries for r in retrievers] == [["q"]] * 5
        assert started == ["cogfabric-retriever [j]"] * 4  # the runtime's name: its journal directory's


class TestBuildContextLines:
    def test_each_role_has_its_prefix_and_a_role_not_named_is_unknown(self, runtime: Runtime) -> None:
        # spec §5.3 BuildContext: User/Assistant/Tool call/Tool result/System, else "Unknown: "
        session = runtime.memory.create_session("u")
        for role in ("user", "assistant", "tool_call", "tool_result", "critic"):
            runtime.memory.add_message(session, role, f"from {role}")

        text = runtime.memory.build_context("now?", session)

        assert text == (
            "Previous conversation history:\n\n"
            "System: New session started\n"
            "User: from user\n"
            "Assistant: from assistant\n"
            "Tool call: from tool_call\n"
            "Tool result: from tool_result\n"
            "Unknown: from critic\n"
            "\nCurrent request:\nnow?"
        )


class TestCleanerLimits:
    def test_with_ellipsis_returns_a_text_of_exactly_the_limit_unchanged(self) -> None:
        # spec §5.4: strings of at most n runes are returned unchanged
        assert with_ellipsis("abcdef", 6) == "abcdef"
        assert with_ellipsis("é" * 200, 200) == "é" * 200

    def test_extract_gist_keeps_a_first_sentence_of_exactly_the_limit(self) -> None:
        # spec §5.4: the first sentence is used if it has at most n runes
        assert extract_gist("Hello. And then much more text.", 6) == "Hello."

    def test_an_assistant_message_with_tool_calls_is_cleaned_to_its_gist(self) -> None:
        # spec §5.4 Clean: assistant with ToolCalls -> extractGist(content, MaxToolLen)
        call = ToolCall(id="c1", function=ToolCallFunction(name="web_scraper", arguments="{}"))
        message = Message(
            role="assistant",
            content="I will fetch the page. Then I will read it and tell you what it says.",
            tool_calls=[call],
        )

        assert clean([message], CleanOptions())[0].content == "I will fetch the page."

    def test_a_message_of_a_role_the_cleaner_does_not_name_is_cut_to_the_assistant_length(self) -> None:
        # spec §5.4 Clean: any other role -> WithEllipsis(MaxAssistantLen)
        options = CleanOptions(max_user_len=10, max_assistant_len=20)

        out = clean([Message(role="critic", content="x" * 30)], options)

        assert out[0].content == "x" * 17 + "..."

    def test_leading_system_messages_join_the_first_turn_split_at_user_messages(self) -> None:
        # spec §5.4 CleanWithTurns: split at a user message once the turn holds one;
        # leading system messages join the first turn (so max_summarized_turns keeps them)
        messages = [
            Message(role="system", content="New session started"),
            Message(role="user", content="q1"),
            Message(role="assistant", content="a1"),
            Message(role="user", content="q2"),
        ]

        out = clean_with_turns(messages, CleanOptions(max_summarized_turns=2))

        assert [m.content for m in out] == ["New session started", "q1", "a1", "q2"]

    def test_the_active_turn_keeps_an_assistant_message_with_tool_calls_exactly(self) -> None:
        # spec §5.4 CleanWithTurns step 3: kept exactly as it is, metadata and length too
        call = ToolCall(id="c1", function=ToolCallFunction(name="web_scraper", arguments='{"url": "u"}'))
        calling = Message(
            role="assistant",
            content="Let me look that up for you, and then read it. " * 5,
            tool_calls=[call],
            parent_id="p1",
            event_kind="k",
            artifact_refs=["a1"],
        )
        messages = [Message(role="user", content="look it up"), calling]

        out = clean_with_turns(messages, CleanOptions())

        assert out[1] == calling

    def test_a_finished_turns_result_of_another_tool_is_a_200_code_point_gist(self) -> None:
        # spec §5.4 step 4: any other tool's result gets a 200-rune gist
        call = ToolCall(id="c1", function=ToolCallFunction(name="custom_tool", arguments="{}"))
        for content, summary in (("y" * 200, "y" * 200), ("y" * 201, "y" * 197 + "...")):
            messages = [
                Message(role="user", content="go"),
                Message(role="assistant", content="", tool_calls=[call]),
                Message(role="tool_result", content=content, tool_call_id="c1"),
                Message(role="user", content="next"),
            ]

            out = clean_with_turns(messages, CleanOptions())

            assert out[2].content == summary


@pytest.mark.parametrize("field", ["max_history", "session_ttl", "rag_top_k"])
def test_a_limit_of_nan_is_not_positive(field: str) -> None:
    # MemoryConfig: "each must be positive"; NaN is no positive number (a session_ttl of NaN
    # would never, or always, expire), as rag_min_score's check refuses it too
    with pytest.raises(
        InvalidConfigError, match=rf"{field} must be positive, got nan - at `\$\.memory\.{field}`"
    ):
        MemoryConfig(**{field: math.nan})  # type: ignore[arg-type]
