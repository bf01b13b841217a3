"""The runtime's contract at its edges: what a mutation test found no test held.

Each test here failed under a small change of ``actors/`` (a copy left out, a bound off
by one, a default changed, a check dropped) that every other test let through.
"""

from __future__ import annotations

import inspect
import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import (
    DEFAULT_MAX_PROMPT_LENGTH,
    AgentContext,
    AgentNotFoundError,
    Config,
    FakeClock,
    LLMClient,
    MemoryConfig,
    PromptTooLongError,
    Runtime,
    ScriptedProvider,
    Snippet,
)
from cogfabric.events import AgentKilled, IpcMessage, LlmOutputRecorded, PromptRejected, SessionExpired
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path


class TestCopiesAtTheBoundary:
    def test_the_task_layer_handed_out_is_a_copy_and_so_is_a_published_mapping(self, tmp_path: Path) -> None:
        # A publication gives every agent of the task one context: handed out as is, a
        # caller's change to it changed every agent, unjournaled; so did a change to
        # the caller's own mapping after the publication.
        with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
            a = rt.spawn("a", task_id="t")
            b = rt.spawn("b", task_id="t")
            goal = {"goal": ["find X"]}
            rt.publish_task_context("t", goal)
            goal["goal"].append("changed by the caller after publishing")
            a.task_context()["goal"].append("changed in a's copy")
            a.context_view().task_shared["goal"].append("changed in a's view")

            live = [a.task_context(), b.task_context(), b.context_view().task_shared]
        with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
            reopened = [rt.agent(agent).task_context() for agent in ("a", "b")]

        assert live == [{"goal": ["find X"]}] * 3
        assert reopened == [{"goal": ["find X"]}] * 2

    def test_each_subscriber_of_a_broadcast_gets_its_own_copy_of_the_payload(self, tmp_path: Path) -> None:
        seen: list[str] = []
        both = threading.Event()
        lock = threading.Lock()

        class Mutator:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
                with lock:
                    seen.append(repr(message.payload))
                    message.payload["n"].append(ctx.agent_id)
                    if len(seen) == 2:
                        both.set()

        with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"m": Mutator}) as rt:
            for agent in ("s1", "s2"):
                rt.spawn(agent, behavior="m")
                rt.bus.subscribe(agent, "news")
            payload: dict[str, list[str]] = {"n": []}
            assert rt.bus.broadcast("x", "news", payload) == 2
            payload["n"].append("changed by the caller")
            assert both.wait(10)

        assert seen == ["{'n': []}", "{'n': []}"]


class TestPromptGateAndSessions:
    @pytest.mark.parametrize("limit", [0, -1])
    def test_a_max_prompt_length_of_zero_or_less_means_the_default(self, limit: int) -> None:
        client = LLMClient(ScriptedProvider(lambda _: "ok"), {"max_prompt_length": limit})

        assert client.max_prompt_length == DEFAULT_MAX_PROMPT_LENGTH == 8192
        assert client.generate("語" * 8192) == "ok"
        with pytest.raises(PromptTooLongError):
            client.generate("語" * 8193)

    def test_the_gate_counts_a_str_subclass_by_its_code_points_not_its_len(self) -> None:
        class Short(str):
            __slots__ = ()

            def __len__(self) -> int:
                return 0

        provider = ScriptedProvider(lambda _: "ok")
        client = LLMClient(provider, {"max_prompt_length": 5})

        with pytest.raises(PromptTooLongError, match="maximum length of 5"):
            client.generate(Short("x" * 6))
        assert provider.calls == []

    def test_rag_keeps_the_top_k_snippets_only(self, tmp_path: Path) -> None:
        class Many:
            def retrieve(self, query: str) -> list[Snippet]:  # noqa: ARG002
                return [Snippet("kb", f"s{i}", 0.9 - i / 100) for i in range(8)]

        config = Config(memory=MemoryConfig(rag_top_k=2))
        with Runtime.open(tmp_path / "j", clock=FakeClock(), config=config) as rt:
            rt.memory.set_retrievers([Many()])
            session = rt.memory.create_session("u")
            rt.memory.add_message(session, "user", "question")

            context = rt.memory.build_prompt_messages(session)[0].content

        assert context == "Relevant context:\n[kb] s0\n[kb] s1\n"

    def test_build_context_cuts_each_history_line_to_100_code_points(self, tmp_path: Path) -> None:
        with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
            session = rt.memory.create_session("u")
            rt.memory.add_message(session, "user", "x" * 150)

            text = rt.memory.build_context("now", session)

        assert "User: " + "x" * 97 + "...\n" in text
        assert "x" * 98 not in text

    def test_sessions_that_expired_while_the_runtime_was_closed_are_expired_at_reopen(
        self, tmp_path: Path
    ) -> None:
        clock = FakeClock()
        config = Config(memory=MemoryConfig(session_ttl=100.0))
        with Runtime.open(tmp_path / "j", clock=clock, config=config) as rt:
            session = rt.memory.create_session("u")
        clock.advance(101)
        with Runtime.open(tmp_path / "j", clock=clock, config=config) as rt:
            swept = rt.memory.sweep()
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            expired = [r.event for r in journal.read(stream="session/" + session)]

        assert swept == 0
        assert isinstance(expired[-1], SessionExpired)

    def test_an_agents_latest_session_is_none_once_it_expired(self, tmp_path: Path) -> None:
        clock = FakeClock()
        config = Config(memory=MemoryConfig(session_ttl=100.0))
        with Runtime.open(tmp_path / "j", clock=clock, config=config) as rt:
            session = rt.memory.create_session("u", agent_id="a1")
            live = rt.memory.get_latest_session_for_agent("a1")
            clock.advance(101)
            expired = rt.memory.get_latest_session_for_agent("a1")

        assert (live, expired) == (session, None)

    def test_a_session_past_its_ttl_that_makes_room_for_a_new_one_is_journaled_expired(
        self, tmp_path: Path
    ) -> None:
        clock = FakeClock()
        config = Config(memory=MemoryConfig(session_ttl=100.0, max_sessions=2))
        with Runtime.open(tmp_path / "j", clock=clock, config=config) as rt:
            old = rt.memory.create_session("old")
            clock.advance(60)
            kept = rt.memory.create_session("kept")
            clock.advance(50)  # old is past its TTL, not swept yet
            rt.memory.create_session("new")
            live = rt.memory.sessions()
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            ended = [type(r.event).__name__ for r in journal.read(stream="session/" + old)][-1]

        assert kept in live
        assert old not in live
        assert ended == "SessionExpired"

    def test_a_turns_session_is_not_named_by_the_clients_later_calls(self, tmp_path: Path) -> None:
        with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
            llm = rt.llm(ScriptedProvider(["a", "b"]))
            session = rt.memory.create_session("u")
            llm.turn(session, "hi")
            llm.generate("a plain call")
            with pytest.raises(ValueError, match="white space"):
                llm.generate(" ")
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            records = [
                r.event for r in journal.read() if isinstance(r.event, LlmOutputRecorded | PromptRejected)
            ]

        assert [(type(e).__name__, e.session) for e in records] == [
            ("LlmOutputRecorded", session),
            ("LlmOutputRecorded", None),
            ("PromptRejected", None),
        ]

    def test_a_turn_of_a_client_kept_past_its_agents_kill_leaves_the_session_as_it_was(
        self, tmp_path: Path
    ) -> None:
        kept: list[Any] = []

        class Keeper:
            def on_message(self, ctx: AgentContext, message: IpcMessage) -> str:  # noqa: ARG002
                kept.append(ctx.llm)
                return "kept"

        provider = ScriptedProvider(["never"])
        with Runtime.open(
            tmp_path / "j", clock=FakeClock(), behaviors={"k": Keeper}, llm_provider=provider
        ) as rt:
            rt.spawn("k", behavior="k")
            rt.bus.request("x", "k", "keep", timeout=10)
            session = rt.memory.create_session("u")
            before = rt.memory.get_messages(session)
            rt.kill("k")

            with pytest.raises(AgentNotFoundError):
                kept[0].turn(session, "after the kill")
            after = rt.memory.get_messages(session)

        assert after == before
        assert provider.calls == []


class TestDefaultsAndRecords:
    def test_a_request_waits_30_seconds_by_default(self, tmp_path: Path) -> None:
        with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
            default = inspect.signature(rt.bus.request).parameters["timeout"].default

        assert default == 30.0

    def test_a_retired_child_is_still_its_parents_child(self, tmp_path: Path) -> None:
        with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
            rt.spawn("p")
            rt.spawn("c", parent="p")
            rt.retire("c")

            assert rt.children("p") == ["c"]

    def test_a_killed_childs_death_snapshot_keeps_its_parent(self, tmp_path: Path) -> None:
        with Runtime.open(tmp_path / "j", clock=FakeClock()) as rt:
            rt.spawn("p")
            rt.spawn("c", parent="p", capabilities=("search",))
            rt.kill("c")
        with Journal.open(tmp_path / "j", readonly=True) as journal:
            killed = [r.event for r in journal.read(stream="agent/c") if isinstance(r.event, AgentKilled)]

        assert [(k.parent, k.capabilities) for k in killed] == [("p", ("search",))]
