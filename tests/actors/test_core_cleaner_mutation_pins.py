"""Pins of ``actors/_core.py`` and ``actors/_cleaner.py`` from a mutation test.

Each test holds a behaviour that a hand-picked mutant of one of the two modules
changed while every other test still passed; the comment on each names what a
docstring, README.md or spec §5.4 promises.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pykka
import pytest

from cogfabric.actors import (
    CleanOptions,
    Config,
    FakeClock,
    InvalidSpawnSpecError,
    Runtime,
    RuntimeClosedError,
    RuntimeConfig,
    ScriptedProvider,
    replay_agent,
    snapshot_problem,
)
from cogfabric.actors._cleaner import clean
from cogfabric.actors._state import apply_event, encode_snapshot
from cogfabric.events import (
    AgentSpawned,
    IpcSubscribed,
    IpcUnsubscribed,
    Message,
    PrivateSet,
    TaskContextPublished,
)
from cogfabric.store import Journal, Snapshot

from .test_boundary_types import Folded
from .test_state_cleaner_pins import _call, _finished, _summary

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.actors import AgentContext
    from cogfabric.events import IpcMessage


class _AsksTheModelPastClose:
    """Holds a message past close()'s patience, then asks the model; keeps what the call raised."""

    def __init__(self, entered: threading.Event, gate: threading.Event, outcome: list[object]) -> None:
        self.entered, self.gate, self.outcome = entered, gate, outcome

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
        self.entered.set()
        assert self.gate.wait(30)
        try:
            self.outcome.append(ctx.llm.generate("still there?"))
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            self.outcome.append(exc)
        return None


def test_a_behavior_asking_the_model_after_close_stopped_its_work_calls_no_provider() -> None:
    # Core.stopped: set by close() once its agents had call_timeout to finish; from then
    # on ctx.llm raises RuntimeClosedError ("the runtime and journal can take its
    # record") before any provider is called, a runtime without a journal too, where
    # no stopped writer would refuse the record instead
    entered, gate = threading.Event(), threading.Event()
    outcome: list[object] = []
    provider = ScriptedProvider(["answer"])
    rt = Runtime.open(
        None,
        config=Config(runtime=RuntimeConfig(call_timeout=0.3)),
        clock=FakeClock(),
        llm_provider=provider,
        behaviors={"asks": lambda: _AsksTheModelPastClose(entered, gate, outcome)},
    )
    try:
        rt.spawn("a", behavior="asks")
        rt.bus.send("x", "a", "m")
        assert entered.wait(10)
        rt.close()  # gives up on the busy agent after call_timeout
        gate.set()
        pykka.ActorRegistry.stop_all(block=True, timeout=10)  # its message's handling is over
    finally:
        gate.set()
        rt.close()

    assert len(outcome) == 1
    assert isinstance(outcome[0], RuntimeClosedError)
    assert provider.calls == []


class _Echo:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
        return message.payload


def test_a_behavior_name_is_looked_up_by_its_text_as_the_journal_stores_it(tmp_path: Path) -> None:
    # Core.behavior_name raises InvalidSpawnSpecError for "an unknown name", and journals
    # "a str subclass's text, plain": a subclass whose own __eq__ found "echo" for
    # "ECHO" passed the check, then the agent ran without a behavior (only logged), and
    # a reopen could not reattach one either
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"echo": _Echo}) as runtime:
        with pytest.raises(InvalidSpawnSpecError, match="unknown behavior 'ECHO'"):
            runtime.spawn("a", behavior=Folded("ECHO"))
        assert runtime.agents() == []
        runtime.spawn("a", behavior=Folded("echo"))  # its text is registered: it runs
        assert runtime.bus.request("x", "a", "q", "p", timeout=10).payload == "p"


def test_a_forged_snapshot_covering_the_journals_last_record_disagrees_with_its_events(
    tmp_path: Path,
) -> None:
    # snapshot_problem: "Rebuilds the agent as of now from its snapshot plus what
    # follows, and from its events alone, and compares the two", as of the last seq by
    # default: a snapshot that covers that very seq is the one recovery starts from, so
    # it is compared too, not passed over as one "after until"
    with Journal.open(tmp_path / "j") as journal:
        journal.append([AgentSpawned(at=1.0, agent="a")])
        journal.append([PrivateSet(at=2.0, agent="a", key="k", value=1)])  # seq 2, the last
        state = replay_agent(journal, "a", from_snapshot=False)
        assert state is not None
        state.private["k"] = "FORGED"
        journal.save_snapshot(Snapshot("agent/a", 2, encode_snapshot(state)))  # its hash matches

        problem = snapshot_problem(journal, "a")
        recovered = replay_agent(journal, "a")

    assert recovered is not None
    assert recovered.private == {"k": "FORGED"}  # what recovery would start from
    assert problem == "its snapshot at seq 2 does not hold the state its events make"


def test_a_forged_snapshot_holding_the_publication_that_is_the_journals_last_record_disagrees(
    tmp_path: Path,
) -> None:
    # the writer's snapshot taken before the agent applied a publication covers the seq
    # before it and holds it (publish_seq): with that publication the journal's last
    # record, recovery starts from the snapshot, so snapshot_problem compares it too
    with Journal.open(tmp_path / "j") as journal:
        journal.append([AgentSpawned(at=1.0, agent="a", task_id="t")])
        journal.append([PrivateSet(at=2.0, agent="a", key="k", value=1)])  # seq 2, a's last
        journal.append([TaskContextPublished(at=3.0, task_id="t", context={"goal": "g"}, agents=("a",))])
        state = replay_agent(journal, "a", from_snapshot=False)
        assert state is not None
        assert state.publish_seq == 3
        state.private["k"] = "FORGED"
        journal.save_snapshot(Snapshot("agent/a", 2, encode_snapshot(state)))  # its hash matches

        problem = snapshot_problem(journal, "a")
        recovered = replay_agent(journal, "a")

    assert recovered is not None
    assert (recovered.private, recovered.task_context) == ({"k": "FORGED"}, {"goal": "g"})
    assert problem == "its snapshot at seq 2 does not hold the state its events make"


def test_a_clamped_snapshot_whose_replay_reorders_the_topics_agrees_with_its_events(tmp_path: Path) -> None:
    # snapshot_problem compares "its topics as a set: a snapshot saved before a
    # publication it already holds replays its later events twice, which can reorder
    # them": here an unsubscription and a new subscription replayed over the snapshot
    # put "news" after "sports", where the events alone keep it first
    spawned = AgentSpawned(at=1.0, agent="a", task_id="t")
    own = [
        IpcUnsubscribed(at=3.0, agent="a", topic="news"),  # seq 4
        IpcSubscribed(at=3.0, agent="a", topic="news", order=1),
        IpcSubscribed(at=3.0, agent="a", topic="sports", order=2),
    ]
    news = IpcSubscribed(at=2.0, agent="a", topic="news", order=0)
    with Journal.open(tmp_path / "j") as journal:
        journal.append([spawned])
        journal.append([news])  # seq 2
        journal.append([TaskContextPublished(at=3.0, task_id="t", context={"goal": "g"}, agents=("a",))])
        for event in own:  # committed after the publication, applied by the agent before it
            journal.append([event])
        state = None
        for event in (spawned, news, *own):
            state = apply_event(state, event)
        assert state is not None
        journal.save_snapshot(Snapshot("agent/a", 2, encode_snapshot(state)))  # clamped before it
        via_snapshot = replay_agent(journal, "a")
        alone = replay_agent(journal, "a", from_snapshot=False)

        problem = snapshot_problem(journal, "a")

    assert via_snapshot is not None
    assert alone is not None
    assert (via_snapshot.topics, alone.topics) == (["sports", "news"], ["news", "sports"])
    assert problem is None


class TestCleaner:
    def test_a_code_blocks_language_is_trimmed_in_its_label(self) -> None:
        # spec §5.4 Clean: an assistant's code block becomes "<code block [lang]>", the
        # language its first line trimmed (Go's strings.TrimSpace)
        message = Message(role="assistant", content="See:\n``` python \nprint(1)\n```")

        assert clean([message], CleanOptions())[0].content == "See:\n<code block [python]>"

    def test_a_system_message_is_cut_to_the_system_length_not_the_assistants(self) -> None:
        # spec §5.4 Clean: system -> WithEllipsis(MaxSystemLen), 500 by default
        message = Message(role="system", content="s" * 400)

        assert clean([message], CleanOptions())[0].content == "s" * 400

    def test_an_escaped_lone_surrogate_in_an_argument_key_reads_as_the_replacement_character(self) -> None:
        # _arguments: a lone surrogate from a JSON escape reads as U+FFFD, as Go's
        # decoder reads it, in a key as in a value: nothing a provider's encoder refuses
        calling = Message(role="tool_call", content="", tool_calls=[_call("f", '{"\\ud83d": "v"}')])

        summary = _finished(calling)[0].content

        assert summary == 'c1: call f(\ufffd="v")'
        assert summary.encode()

    @pytest.mark.parametrize("arguments", ["[1, 2]", '"text"', "3"])
    def test_arguments_that_are_no_json_object_are_summarised_as_no_arguments(self, arguments: str) -> None:
        # _arguments: a model's text that is no JSON object reads as no arguments, as
        # malformed JSON does, for the call's summary and its result's
        calling = Message(role="assistant", content="", tool_calls=[_call("web_scraper", arguments)])
        result = Message(role="tool_result", content="page", tool_call_id="c1")

        out = _finished(Message(role="user", content="go"), calling, result)

        assert out[2].content == "Scraped <unknown-url>: page"
        tool_call = _finished(Message(role="tool_call", content="", tool_calls=[_call("f", arguments)]))
        assert tool_call[0].content == "c1: call f()"

    def test_a_file_tools_lowercase_error_is_reported_as_an_error(self) -> None:
        # the original's summarizeFileToolResult: a result starting "Error:" or "error:"
        summary = _summary("file_tools", '{"operation": "write", "path": "/a"}', "error: disk full")

        assert summary == "File /a (write): error: disk full"

    def test_a_file_read_of_one_blank_line_counts_its_bytes(self) -> None:
        # the original's: the first line, else the second when there is one, else the size
        summary = _summary("file_tools", '{"operation": "read", "path": "/a"}', " \t")

        assert summary == "Read /a (2 bytes)"

    def test_a_file_list_counts_the_lines_as_gos_split_does(self) -> None:
        # the original's len(strings.Split(result, "\n")): a trailing line break counts one more
        summary = _summary("file_tools", '{"operation": "list", "path": "/d"}', "a\nb\n")

        assert summary == "Listed /d (3 entries)"

    def test_an_empty_command_gives_way_to_the_code(self) -> None:
        # _code_summary: the command, or "without one" the code ARES's code runner takes
        summary = _summary("code_runner", '{"command": "", "code": "print(1)"}', "1")

        assert summary == "Exec `print(1)` exit=?: 1"

    def test_a_tool_call_message_without_calls_keeps_a_first_sentence_of_100_code_points(self) -> None:
        # spec §5.4 step 4: a finished turn's tool_call message without tool calls is
        # extractGist(content, 100), not the 50 of MaxToolLen
        calling = Message(role="tool_call", content="c" * 80)

        assert _finished(calling)[0].content == "c" * 80

    def test_a_status_line_must_be_the_whole_first_line(self) -> None:
        # _http_summary: a raw response's status line, "HTTP/1.1 404 Not Found", only
        # as the first line whole: one quoted inside a line is no status
        summary = _summary("http_request", '{"url": "http://x"}', "proxy said HTTP/1.1 404 Not Found\nbody")

        assert summary == "GET http://x (38 bytes)"
