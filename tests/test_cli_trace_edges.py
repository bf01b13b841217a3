"""`cogfabric trace` at its edges: journal text in a message's kind, --depth's wording, a chain
stored backwards, a chain deeper than the text indents, and every order against an oracle."""

from __future__ import annotations

import json
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cogfabric as cf
from cogfabric._audit import open_for_audit, trace_view
from cogfabric.cli import main
from cogfabric.events import Event, IpcDeadLettered, IpcDelivered
from tests.test_cli_trace import _effects, _journal, _message, _private, _seq_of, _trace

if TYPE_CHECKING:
    from collections.abc import Iterator

    from cogfabric.store import LmdbJournal, Record


def test_a_message_kind_from_the_journal_is_escaped_in_text(tmp_path: Path) -> None:
    # the kind is any text an append gives it: an ESC sequence or a newline must not reach
    # the terminal, nor forge a line of the trace
    forged = "send\x1b[2J\nrecord:\n  seq 9 forged"
    path = _journal(tmp_path / "j", [_message("m", "x", "a", "t", kind=forged)])

    result = CliRunner().invoke(main, ["trace", str(path), "--seq", "1"], color=True)

    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output
    assert result.output.splitlines().count("record:") == 1
    assert '  seq 1 IpcMessage bus send\\x1b[2J\\nrecord:\\n  seq 9 forged "x" -> "a" "t"' in result.output


def test_a_long_message_kind_is_cut_in_text(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j", [_message("m", "x", "a", "t", kind="k" * 100_000)])

    result = CliRunner().invoke(main, ["trace", str(path), "--seq", "1"])

    assert result.exit_code == 0, result.output
    assert len(result.output) < 1_000
    assert f"{'k' * 200}... " in result.output


def test_depth_0_says_effects_were_not_followed_not_that_there_are_none(tmp_path: Path) -> None:
    path = _journal(
        tmp_path / "j",
        [_message("root", "x", "a", "t"), _private("c1", "a", "k1", "root"), _private("c2", "a", "k2", "c1")],
    )
    runner = CliRunner()

    none = runner.invoke(main, ["trace", str(path), "--seq", "1", "--depth", "0"])
    one = runner.invoke(main, ["trace", str(path), "--seq", "1", "--depth", "1"])
    all_of_them = runner.invoke(main, ["trace", str(path), "--seq", "1"])
    leaf = runner.invoke(main, ["trace", str(path), "--seq", "3", "--depth", "1"])

    assert none.exit_code == one.exit_code == all_of_them.exit_code == leaf.exit_code == 0
    assert "led to: not followed (--depth 0), up to seq 3" in none.output
    assert "nothing" not in none.output.split("record:")[1]
    assert "led to 1 record 1 level down (--depth 1), up to seq 3:" in one.output
    assert "led to 2 records, up to seq 3:" in all_of_them.output
    assert "led to: nothing, up to seq 3" in leaf.output  # a leaf led to nothing, whatever the depth


class _CountedReads:
    """A journal whose reads of more than one record are counted (the passes of a trace)."""

    def __init__(self, journal: LmdbJournal) -> None:
        self._journal = journal
        self.passes = 0

    def read(self, after: int = 0, until: int | None = None, stream: str | None = None) -> Iterator[Record]:
        end = self._journal.last_seq if until is None else until
        if end - after > 1:
            self.passes += 1
        return self._journal.read(after=after, until=until, stream=stream)

    def seq_of(self, event_id: str) -> int | None:
        return self._journal.seq_of(event_id)


def _counted_trace(path: Path, seq: int) -> tuple[dict[str, Any], int]:
    with open_for_audit(path, copy=False, key=None) as journal:
        counted = _CountedReads(journal)
        view = trace_view(counted, seq, until=journal.last_seq)  # type: ignore[arg-type]
    return view, counted.passes


def test_a_chain_stored_backwards_is_found_in_four_passes_not_one_a_record(tmp_path: Path) -> None:
    # seq 1: c60 (from c59), ..., seq 60: c1 (from the root), seq 61: the root. A pass found
    # one record more each time: 60 passes over the whole journal (a minute for 100 such
    # records in a journal of a million)
    links = 60
    chain: list[Event] = [
        _private(f"c{i}", "a", f"k{i}", f"c{i - 1}" if i > 1 else "root") for i in range(links, 0, -1)
    ]
    unrelated: list[Event] = [_private(f"u{i}", "a", "k", None) for i in range(20)]
    path = _journal(tmp_path / "j", chain, [_message("root", "x", "a", "t")], unrelated)

    view, passes = _counted_trace(path, links + 1)

    assert _effects(view) == [(seq, seq + 1, links + 1 - seq) for seq in range(1, links + 1)]
    assert passes <= 4
    assert _effects(_trace(path, links + 1, depth=5)) == [(seq, seq + 1, 61 - seq) for seq in range(56, 61)]


def test_a_journal_in_the_runtimes_order_is_searched_twice(tmp_path: Path) -> None:
    path = _journal(
        tmp_path / "j",
        [_message("root", "x", "a", "t"), _private("c1", "a", "k1", "root"), _private("c2", "a", "k2", "c1")],
        [_private(f"u{i}", "a", "k", None) for i in range(5)],
    )

    view, passes = _counted_trace(path, 1)

    assert _effects(view) == [(2, 1, 1), (3, 2, 2)]
    assert passes == 3  # two searches and the read of the effects found


def test_a_chain_deeper_than_the_indent_shows_its_level_and_its_text_grows_linearly(tmp_path: Path) -> None:
    deep = 2_000
    events: list[Event] = [_message("e0", "x", "a", "t")]
    events += [_private(f"e{i}", "a", "k", f"e{i - 1}") for i in range(1, deep + 1)]
    path = _journal(tmp_path / "j", events)

    result = CliRunner().invoke(main, ["trace", str(path), "--seq", "1"])

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[-1] == f'{"  " * 40}[level {deep:,}] seq {deep + 1} PrivateSet agent/a key "k"'
    assert f'{"  " * 40}seq 41 PrivateSet agent/a key "k"' in lines  # level 40: indented, no number
    assert len(result.output) < deep * 200  # it was deep * deep: 8 MB for 2,000 levels


def test_an_unknown_id_is_named_with_reprs_escapes_once(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j", [_message("m", "x", "a", "t")])

    result = CliRunner().invoke(main, ["trace", str(path), "--id", "a\x1b[2Jb\u202e"])

    assert result.exit_code == 2, result.output
    assert "holds the event id 'a\\x1b[2Jb\\u202e'" in result.output
    assert "\x1b" not in result.output


# Every order: records that name one another by cause or message, in any order, with
# causes outside the journal and loops, against the closure computed the plain way.

_IDS = [f"i{n}" for n in range(10)]


@st.composite
def _events(draw: st.DrawFn) -> list[Event]:
    """Mostly a forest (each id follows from an earlier one), stored in any order, often backwards."""
    parents: dict[str, str | None] = {}
    for n, event_id in enumerate(_IDS):
        earlier = _IDS[:n]
        choices: list[str | None] = [None, "elsewhere", *_IDS]  # loops and causes outside
        if draw(st.booleans()) and earlier:
            choices = list(earlier)
        parents[event_id] = draw(st.sampled_from(choices))
    order = draw(st.sampled_from(["forwards", "backwards", "any"]))
    ids: list[str] = list(_IDS) if order == "forwards" else _IDS[::-1]
    if order == "any":
        ids = draw(st.permutations(_IDS))
    events: list[Event] = []
    for event_id in ids:
        parent = parents[event_id]
        kind = draw(st.sampled_from(["message", "private", "delivered", "dead"]))
        if kind == "delivered" and parent is not None:
            events.append(IpcDelivered(at=1.0, id=event_id, message_id=parent, recipient="a"))
        elif kind == "dead" and parent is not None:
            events.append(
                IpcDeadLettered(
                    at=1.0, id=event_id, message_id=parent, sender="x", recipient="a", topic="t", reason="r"
                )
            )
        elif kind == "message":
            events.append(_message(event_id, "x", "a", "t", cause=parent))
        else:
            events.append(_private(event_id, "a", "k", parent))
    return events


def _parent(event: Event) -> str | None:
    if event.cause is not None:
        return event.cause
    return event.message_id if isinstance(event, IpcDelivered | IpcDeadLettered) else None


def _closure(events: list[Event], seq: int, depth: int | None) -> list[tuple[int, int, int]]:
    """(seq, from, level) of what the record ``seq`` led to, by repeating until nothing changes."""
    found = {events[seq - 1].id: (seq, 0)}
    changed = True
    while changed:
        changed = False
        for at, event in enumerate(events, start=1):
            parent = _parent(event)
            if parent in found and event.id not in found:
                level = found[parent][1] + 1
                if depth is None or level <= depth:
                    found[event.id] = (at, level)
                    changed = True
    by_id = {event.id: at for at, event in enumerate(events, start=1)}
    return sorted(
        (at, by_id[_parent(events[at - 1]) or ""], level) for at, level in found.values() if at != seq
    )


# 25 examples in the default suite (the suite's time on 2 cores); 250 under -m slow.
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=_events(), data=st.data())
def test_effects_and_causes_match_the_plain_closure_in_any_order(
    events: list[Event], data: st.DataObject
) -> None:
    _check_effects_and_causes(events, data)


@pytest.mark.slow
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=_events(), data=st.data())
def test_effects_and_causes_match_the_plain_closure_in_any_order_long(
    events: list[Event], data: st.DataObject
) -> None:
    _check_effects_and_causes(events, data)


def _check_effects_and_causes(events: list[Event], data: st.DataObject) -> None:
    """The trace of a drawn seq: effects as the plain closure, causes as the walk up."""
    seq = data.draw(st.integers(1, len(events)))
    depth = data.draw(st.none() | st.integers(0, 3))
    with tempfile.TemporaryDirectory() as tmp:
        path = _journal(Path(tmp) / "j", *([event] for event in events))
        view = _trace(path, seq, depth)
        shown = CliRunner().invoke(main, ["trace", str(path), "--seq", str(seq), "--json"])
        whole = _trace(path, seq)

    assert _effects(view) == _closure(events, seq, depth)
    by_id = {event.id: at for at, event in enumerate(events, start=1)}
    walked, parent, seen = [], _parent(events[seq - 1]), {events[seq - 1].id}
    while parent is not None and parent not in seen and parent in by_id:
        walked.append(by_id[parent])
        seen.add(parent)
        parent = _parent(events[by_id[parent] - 1])
    assert [c["seq"] for c in view["causes"] if "loop" not in c and c["seq"] is not None] == walked[::-1]
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["effects"] == json.loads(json.dumps(whole["effects"]))


class _Hub:
    """On "go": a change, a cognitive state and checkpoint, an LLM call, a send, a broadcast,
    a request, then a failure: each names "go" as its cause."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:
        if message.topic != "go":
            return "pong"
        ctx.set_private("k", 1)
        ctx.set_cognitive_state(cf.CognitiveState(decision={"d": 1}))
        ctx.checkpoint_cognitive()
        ctx.llm.generate("hello")
        ctx.send("leaf", "fyi", 1)
        ctx.broadcast("news", 2)
        ctx.request("leaf", "ask", 3, timeout=10)
        msg = "boom"
        raise RuntimeError(msg)


class _Leaf:
    def __init__(self, heard: threading.Event) -> None:
        self._heard = heard

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:
        if message.topic == "sub":
            ctx.subscribe("news")
        if message.topic == "news":
            self._heard.set()
        return {"ok": True} if message.kind == "request" else None


def test_what_a_behavior_journals_on_a_message_names_it_and_a_reply_its_request(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    heard = threading.Event()
    behaviors: dict[str, Any] = {"hub": _Hub, "leaf": lambda: _Leaf(heard)}
    with cf.Runtime.open(path, behaviors=behaviors, llm_provider=cf.ScriptedProvider(["ok"])) as rt:
        rt.spawn("hub", behavior="hub")
        rt.spawn("leaf", behavior="leaf")
        rt.bus.request("driver", "leaf", "sub", None, 10)
        go = rt.bus.send("driver", "hub", "go")
        assert heard.wait(30)
        rt.bus.request(
            "driver", "hub", "ping", None, 10
        )  # answered once "go" failed: its mailbox is in order
    view = _trace(path, _seq_of(path, go.id))

    direct = {(e["type"], e["data"].get("kind") or "") for e in view["effects"] if e["level"] == 1}
    assert direct >= {
        ("IpcDelivered", ""),
        ("PrivateSet", ""),
        ("CognitiveStateSet", ""),
        ("CheckpointTaken", ""),
        ("LlmOutputRecorded", ""),
        ("IpcMessage", "send"),
        ("IpcMessage", "broadcast"),
        ("IpcMessage", "request"),
        ("IpcDeadLettered", ""),  # the handler error
        ("AgentFailed", ""),
    }
    request = next(e for e in view["effects"] if e["data"].get("kind") == "request")
    reply = next(e for e in view["effects"] if e["data"].get("kind") == "reply")
    assert (reply["from"], reply["level"]) == (request["seq"], 2)
