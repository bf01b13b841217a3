"""How events fold into an agent's state, and how the prompt window is cleaned.

Behaviours of ``actors/_state.py`` and ``actors/_cleaner.py`` (spec §5.4) that a
mutation test found no test held; the comment on each test names what it holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from cogfabric.actors import (
    CleanOptions,
    Config,
    FakeClock,
    JournalConfig,
    Runtime,
    ScriptedProvider,
)
from cogfabric.actors._cleaner import clean, clean_with_turns
from cogfabric.actors._state import apply_event, encode_snapshot
from cogfabric.events import (
    AgentKilled,
    AgentSpawned,
    IpcSubscribed,
    IpcUnsubscribed,
    Message,
    PrivateSet,
    TaskContextPublished,
    ToolCall,
    ToolCallFunction,
)
from cogfabric.store import Journal, Snapshot

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from cogfabric.events import Event


def _journal(runtime: Runtime) -> Journal:
    assert runtime._journal is not None
    return runtime._journal


def _write(path: Path, *batches: Sequence[Event]) -> None:
    with Journal.open(path) as journal:
        for batch in batches:
            journal.append(batch)


class TestReplayedState:
    def test_a_publication_listing_an_agent_killed_just_before_it_is_passed_over(
        self, tmp_path: Path
    ) -> None:
        # _deliver_publication: a publication may list an agent whose kill committed just
        # before it ("Killed: it will never apply it"); replay passes it over, and a new
        # agent of that id starts from its own spawn, not from a crash on reopen
        path = tmp_path / "j"
        _write(
            path,
            [AgentSpawned(at=1.0, agent="a", task_id="t", task_context={"goal": "first"})],
            [AgentKilled(at=2.0, agent="a")],
            [TaskContextPublished(at=3.0, task_id="t", context={"goal": "late"}, agents=("a",))],
            [AgentSpawned(at=4.0, agent="a", task_id="t", task_context={"goal": "second"})],
        )

        with Runtime.open(path, clock=FakeClock()) as runtime:
            assert runtime.agent("a").task_context() == {"goal": "second"}

    def test_a_record_after_an_agents_kill_leaves_it_dead(self, tmp_path: Path) -> None:
        # apply_event: "None once the agent is killed": a record of the agent after its
        # kill (written by hand) neither revives it nor stops the journal from reopening
        path = tmp_path / "j"
        _write(
            path,
            [AgentSpawned(at=1.0, agent="a", task_id="t")],
            [AgentKilled(at=2.0, agent="a")],
            [PrivateSet(at=3.0, agent="a", key="k", value=1)],
        )

        with Runtime.open(path, clock=FakeClock()) as runtime:
            assert runtime.agents() == []

    def test_llm_records_on_an_agents_stream_do_not_bring_its_next_snapshot_forward(
        self, tmp_path: Path
    ) -> None:
        # AgentSnapshot.snapshot_events: a snapshot every snapshot_interval of the agent's
        # events, "counted across a reopen too": the LLM records journaled on its stream
        # (runtime.llm(agent_id=...)), which the live agent never applies, count neither
        # live nor after a reopen
        path = tmp_path / "j"
        config = Config(journal=JournalConfig(snapshot_interval=3))
        with Runtime.open(path, config=config, clock=FakeClock()) as runtime:
            runtime.spawn("a")  # its first event
            llm = runtime.llm(ScriptedProvider(["ok"]), agent_id="a")
            for _ in range(3):
                llm.generate("hi")

        with Runtime.open(path, config=config, clock=FakeClock()) as runtime:
            agent = runtime.agent("a")
            journal = _journal(runtime)
            agent.set_private("k", 1)
            runtime.flush()
            before_third = journal.load_snapshot("agent/a")
            agent.set_private("k", 2)  # its third: the snapshot is due
            runtime.flush()
            third = journal.stream_head("agent/a")
            after_third = journal.load_snapshot("agent/a")

        assert before_third is None
        assert after_third is not None
        assert after_third.seq == third

    def test_one_unsubscription_undoes_a_subscription_replayed_twice_from_a_clamped_snapshot(
        self, tmp_path: Path
    ) -> None:
        # submit_snapshot: a snapshot taken before the agent applied a publication covers
        # only the seqs before it, and replay "re-applies the agent's own later events,
        # which are idempotent": a subscription the snapshot holds already is not listed
        # twice, or the unsubscription after it would leave the agent subscribed on reopen
        path = tmp_path / "j"
        spawned = AgentSpawned(at=1.0, agent="a", task_id="t")
        subscribed = IpcSubscribed(at=3.0, agent="a", topic="news", order=0)
        _write(
            path,
            [spawned],  # seq 1
            [TaskContextPublished(at=2.0, task_id="t", context={"goal": "g"}, agents=("a",))],
            [subscribed],  # seq 3: committed after the publication, applied before it
            [IpcUnsubscribed(at=4.0, agent="a", topic="news")],
        )
        state = apply_event(apply_event(None, spawned), subscribed)
        assert state is not None
        with Journal.open(path) as journal:
            journal.save_snapshot(Snapshot("agent/a", 1, encode_snapshot(state)))

        with Runtime.open(path, clock=FakeClock()) as runtime:
            assert runtime.bus.subscribers("news") == []


def _finished(*turn: Message) -> list[Message]:
    """``turn`` cleaned as a finished turn: a later turn follows it."""
    tagged = [msgspec.structs.replace(m, turn_id="t1") for m in turn]
    later = Message(role="user", content="next", turn_id="t2")
    return clean_with_turns([*tagged, later], CleanOptions())[:-1]


def _call(name: str, arguments: str) -> ToolCall:
    return ToolCall(id="c1", function=ToolCallFunction(name=name, arguments=arguments))


def _summary(tool: str, arguments: str, output: str) -> str:
    """What a finished turn shows of ``tool``'s result ``output`` to its call ``c1``."""
    calling = Message(role="assistant", content="", tool_calls=[_call(tool, arguments)])
    result = Message(role="tool_result", content=output, tool_call_id="c1")
    return _finished(Message(role="user", content="go"), calling, result)[2].content


class TestCleanedMessages:
    def test_clean_keeps_a_messages_time_turn_and_tool_call_id_and_drops_the_rest(self) -> None:
        # spec §5.4 Clean: rebuilt from only Role, Content, Time, TurnID, ToolCallID and
        # ToolCalls (a role it does not name, as an OpenAI-style "tool" reply, keeps its call id)
        message = Message(
            role="tool",
            content="42",
            time=5.0,
            turn_id="t1",
            tool_call_id="c1",
            event_kind="k",
            parent_id="p1",
            artifact_refs=["a1"],
        )

        out = clean([message], CleanOptions())

        assert out == [Message(role="tool", content="42", time=5.0, turn_id="t1", tool_call_id="c1")]

    def test_clean_gives_a_tool_call_or_result_its_first_sentence_not_a_cut(self) -> None:
        # spec §5.4 Clean: tool_call / tool_result -> extractGist(content, MaxToolLen), as
        # build_context shows them: the first sentence when it fits, not the first 47 code points
        for role in ("tool_call", "tool_result"):
            message = Message(role=role, content="Done. " + "x" * 80)

            assert clean([message], CleanOptions())[0].content == "Done.", role

    def test_the_active_turn_keeps_a_tool_call_message_exactly(self) -> None:
        # spec §5.4 CleanWithTurns step 3: tool_call and tool_result messages of the last
        # turn are kept exactly as they are, their length and metadata too
        calling = Message(
            role="tool_call",
            content="Calling the scraper on the page you named. " * 3,
            tool_calls=[_call("web_scraper", '{"url": "u"}')],
            parent_id="p1",
            event_kind="k",
        )
        messages = [Message(role="user", content="look it up"), calling]

        out = clean_with_turns(messages, CleanOptions())

        assert out[1] == calling


class TestFinishedTurns:
    def test_a_result_that_answers_no_call_of_its_turn_is_a_gist_of_the_tool_length(self) -> None:
        # spec §5.4 step 4: a tool_result whose ToolCallID matches no call of its turn
        # gets extractGist(MaxToolLen), 50 code points by default, not a tool's 200
        unmatched = Message(role="tool_result", content="y" * 60, tool_call_id="elsewhere")

        out = _finished(Message(role="user", content="go"), unmatched)

        assert out[1].content == "y" * 47 + "..."

    def test_a_summarised_result_keeps_every_other_field(self) -> None:
        # spec §5.4 step 4: a tool_result is summarised, "All other fields are kept"
        # (unlike Clean, which drops the event kind, parent and artifacts)
        result = Message(
            role="tool_result",
            content="Cats purr",
            time=5.0,
            tool_call_id="c1",
            event_kind="k",
            parent_id="p1",
            artifact_refs=["a1"],
        )
        calling = Message(role="assistant", content="", tool_calls=[_call("memory_search", '{"query": "q"}')])

        out = _finished(Message(role="user", content="go"), calling, result)

        assert out[2] == msgspec.structs.replace(
            result, content='Search "q" (1 results): Cats purr', turn_id="t1"
        )

    def test_a_search_answered_by_one_json_object_without_results_counts_one_result(self) -> None:
        # _count_results, the original's: a JSON object counts its "results", else itself
        summary = _summary("memory_search", '{"query": "q"}', '{"answer": "Paris"}')

        assert summary == 'Search "q" (1 results): {"answer": "Paris"}'

    def test_a_file_read_with_no_text_in_its_first_two_lines_counts_its_bytes(self) -> None:
        # the original's summarizeFileToolResult: "Read path (N bytes)" with Go's len,
        # UTF-8 bytes, not code points
        summary = _summary("file_tools", '{"operation": "read", "path": "/a"}', "\n\nnaïve café")

        assert summary == "Read /a (14 bytes)"

    def test_an_empty_exit_code_in_a_json_result_is_passed_over_for_the_next_key(self) -> None:
        # _json_field: only a key holding a number or some text names the exit code
        summary = _summary("code_runner", '{"command": "make"}', '{"exit_code": "", "returncode": 3}')

        assert summary == 'Exec `make` exit=3: {"exit_code": "", "returncode": 3}'

    def test_a_short_value_outside_the_printable_is_quoted_as_gos_percent_q(self) -> None:
        # Go's strconv.Quote: \u for a rune of the basic multilingual plane, U+FFFF
        # included, \U beyond it
        arguments = '{"bmp": "\\uffff", "tag": "\\udb40\\udc01"}'  # U+FFFF and U+E0001

        out = _finished(Message(role="tool_call", content="", tool_calls=[_call("f", arguments)]))

        assert out[0].content == 'c1: call f(bmp="\\uffff", tag="\\U000e0001")'
