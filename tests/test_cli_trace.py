"""`cogfabric trace` and `trace_view`: what led to a record, and what it led to."""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

import cogfabric as cf
from cogfabric._audit import encode_json, open_for_audit, trace_view
from cogfabric.cli import main
from cogfabric.events import Event, IpcDelivered, IpcMessage, PrivateSet
from cogfabric.store import Journal

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def _message(
    event_id: str, sender: str, recipient: str, topic: str, *, kind: str = "send", cause: str | None = None
) -> IpcMessage:
    return IpcMessage(
        at=1.0, id=event_id, cause=cause, sender=sender, recipient=recipient, topic=topic, kind=kind
    )


def _private(event_id: str, agent: str, key: str, cause: str | None) -> PrivateSet:
    return PrivateSet(at=1.0, id=event_id, cause=cause, agent=agent, key=key, value=1)


def _journal(path: Path, *batches: list[Event]) -> Path:
    with Journal.open(path) as journal:
        for batch in batches:
            journal.append(batch)
    return path


def _trace(path: Path, seq: int, depth: int | None = None) -> dict[str, Any]:
    with open_for_audit(path, copy=False, key=None) as journal:
        return trace_view(journal, seq, until=journal.last_seq, depth=depth)


def _effects(view: dict[str, Any]) -> list[tuple[int, int, int]]:
    """Each effect as (seq, from, level)."""
    return [(e["seq"], e["from"], e["level"]) for e in view["effects"]]


class _Asker:
    def __init__(self, done: threading.Event) -> None:
        self._done = done

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:
        ctx.set_private("asked", message.payload)
        reply = ctx.request("answerer", "question", {"n": 1}, timeout=10)
        ctx.set_private("answer", reply.payload)
        self._done.set()


class _Answerer:
    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:
        ctx.set_private("question", message.payload)
        return {"answer": 42}


@pytest.fixture(scope="module")
def conversation(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A journal where a send from outside makes one agent ask another: the send's id."""
    path = tmp_path_factory.mktemp("trace") / "journal"
    done = threading.Event()
    with cf.Runtime.open(path, behaviors={"asker": lambda: _Asker(done), "answerer": _Answerer}) as rt:
        rt.spawn("asker", behavior="asker")
        rt.spawn("answerer", behavior="answerer")
        rt.bus.send("driver", "asker", "go", "please")
        assert done.wait(30)
    # closed: what the asker noted as its message ended is committed
    with Journal.open(path, readonly=True) as journal:
        go = next(
            r.event for r in journal.read() if isinstance(r.event, IpcMessage) and r.event.topic == "go"
        )
    return path, go.id


def _seq_of(path: Path, event_id: str) -> int:
    with open_for_audit(path, copy=False, key=None) as journal:
        seq = journal.seq_of(event_id)
    assert seq is not None
    return seq


def test_a_send_leads_to_its_delivery_the_behaviors_changes_and_the_request_it_made(
    conversation: tuple[Path, str],
) -> None:
    path, go_id = conversation
    view = _trace(path, _seq_of(path, go_id))

    assert view["causes"] == []
    by_seq = {e["seq"]: e for e in view["effects"]}
    shown = [
        (e["type"], e["level"], e["data"].get("key") or e["data"].get("kind") or "") for e in view["effects"]
    ]
    assert ("IpcDelivered", 1, "") in shown
    assert ("PrivateSet", 1, "asked") in shown
    assert ("PrivateSet", 1, "answer") in shown
    assert ("IpcMessage", 1, "request") in shown
    assert ("PrivateSet", 2, "question") in shown  # the answerer's change, made for the request
    assert ("IpcMessage", 2, "reply") in shown
    request = next(e for e in view["effects"] if e["data"].get("kind") == "request")
    reply = next(e for e in view["effects"] if e["data"].get("kind") == "reply")
    assert reply["from"] == request["seq"]
    assert all(e["from"] == view["seq"] or e["from"] in by_seq for e in view["effects"])
    assert [e["seq"] for e in view["effects"]] == sorted(by_seq)


def test_a_reply_is_traced_back_to_the_send_from_outside(conversation: tuple[Path, str]) -> None:
    path, go_id = conversation
    with Journal.open(path, readonly=True) as journal:
        reply = next(r for r in journal.read() if isinstance(r.event, IpcMessage) and r.event.kind == "reply")

    view = _trace(path, reply.seq)

    assert [(c["type"], c["data"].get("kind")) for c in view["causes"]] == [
        ("IpcMessage", "send"),
        ("IpcMessage", "request"),
    ]
    assert view["causes"][0]["data"]["id"] == go_id
    assert view["record"]["seq"] == reply.seq
    assert [e["type"] for e in view["effects"]] == ["IpcDelivered"]  # the requester has it


def test_effects_stored_before_what_they_follow_from_are_found(tmp_path: Path) -> None:
    # seq 1: c3 (from c2), seq 2: c1 (from the root), seq 3: the root, seq 4: c2 (from c1),
    # seq 5: c4 (from c3): found in a pass over what came before, then a whole pass again
    path = _journal(
        tmp_path / "j",
        [_private("c3", "a", "k3", "c2")],
        [_private("c1", "a", "k1", "root")],
        [_message("root", "x", "a", "t")],
        [_private("c2", "a", "k2", "c1")],
        [_private("c4", "a", "k4", "c3")],
    )

    view = _trace(path, 3)

    assert _effects(view) == [(1, 4, 3), (2, 3, 1), (4, 2, 2), (5, 1, 4)]
    assert [c["data"]["id"] for c in _trace(path, 5)["causes"]] == ["root", "c1", "c2", "c3"]


def test_depth_limits_the_levels_followed(tmp_path: Path) -> None:
    path = _journal(
        tmp_path / "j",
        [
            _message("root", "x", "a", "t"),
            _private("c1", "a", "k1", "root"),
            _private("c2", "a", "k2", "c1"),
            _private("c3", "a", "k3", "c2"),
        ],
    )

    assert _effects(_trace(path, 1, depth=0)) == []
    assert _effects(_trace(path, 1, depth=2)) == [(2, 1, 1), (3, 2, 2)]
    assert _effects(_trace(path, 1)) == [(2, 1, 1), (3, 2, 2), (4, 3, 3)]


def test_a_delivery_follows_from_its_message_and_a_cause_outside_the_journal_ends_the_walk(
    tmp_path: Path,
) -> None:
    path = _journal(
        tmp_path / "j",
        [
            _message("m", "x", "a", "t", cause="from-elsewhere"),
            IpcDelivered(at=1.0, id="d", message_id="m", recipient="a"),
        ],
    )

    view = _trace(path, 2)

    assert view["causes"] == [{"id": "from-elsewhere", "seq": None}, _trace(path, 1)["record"]]
    assert _effects(_trace(path, 1)) == [(2, 1, 1)]


def test_causes_that_loop_end_the_walk(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j", [_private("a", "x", "k", "b"), _private("b", "x", "k", "a")])

    view = _trace(path, 1)

    assert view["causes"] == [{"id": "a", "seq": 1, "loop": True}, _trace(path, 2)["record"]]
    assert _effects(view) == [(2, 1, 1)]


def test_a_chain_thousands_deep_is_shown_as_text_and_json(tmp_path: Path) -> None:
    deep = 3_000
    events: list[Event] = [_message("e0", "x", "a", "t")]
    events += [_private(f"e{i}", "a", "k", f"e{i - 1}") for i in range(1, deep + 1)]
    path = _journal(tmp_path / "j", events)
    runner = CliRunner()

    text = runner.invoke(main, ["trace", str(path), "--seq", "1"])
    as_json = runner.invoke(main, ["trace", str(path), "--seq", str(deep + 1), "--json"])

    assert text.exit_code == 0, text.output
    assert f"led to {deep:,} records" in text.output
    assert text.output.rstrip().endswith(
        f'{"  " * 40}[level {deep:,}] seq {deep + 1} PrivateSet agent/a key "k"'
    )
    assert as_json.exit_code == 0, as_json.output
    assert len(json.loads(as_json.output)["causes"]) == deep


def test_the_command_prints_causes_the_record_and_effects_as_a_tree(conversation: tuple[Path, str]) -> None:
    path, go_id = conversation

    result = CliRunner().invoke(main, ["trace", str(path), "--id", go_id])

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "caused by: nothing (a root)"
    assert lines[1] == "record:"
    assert lines[2] == f'  seq {_seq_of(path, go_id)} IpcMessage bus send "driver" -> "asker" "go"'
    assert lines[3].startswith("led to ")
    assert "  seq " in lines[4]
    request = next(i for i, line in enumerate(lines) if 'request "asker" -> "answerer" "question"' in line)
    assert lines[request].startswith("  seq ")  # a level-1 effect
    assert any(
        line.startswith("    seq ") and 'reply "answerer" -> "asker"' in line for line in lines[request:]
    )


def test_the_json_is_the_view(conversation: tuple[Path, str]) -> None:
    path, go_id = conversation
    seq = _seq_of(path, go_id)

    result = CliRunner().invoke(main, ["trace", str(path), "--seq", str(seq), "--depth", "1", "--json"])

    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["record"]["data"]["id"] == go_id
    assert shown["effects"]
    assert {e["level"] for e in shown["effects"]} == {1}
    assert shown == json.loads(json.dumps(_trace(path, seq, depth=1)))


@pytest.mark.parametrize("depth", [None, 0, 1])
def test_the_json_written_as_effects_are_read_is_the_views_document_byte_for_byte(
    conversation: tuple[Path, str], depth: int | None
) -> None:
    path, go_id = conversation
    seq = _seq_of(path, go_id)
    given = [] if depth is None else ["--depth", str(depth)]

    result = CliRunner().invoke(main, ["trace", str(path), "--seq", str(seq), "--json", *given])

    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == encode_json(_trace(path, seq, depth=depth), indent=2) + b"\n"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ([], "give one of --seq or --id"),
        (["--seq", "1", "--id", "x"], "give one of --seq or --id"),
        (["--seq", "99"], "--seq 99 is past the journal's last seq 2"),
        (["--id", "nothing"], "no record up to seq 2 holds the event id 'nothing'"),
        (["--seq", "1", "--seq", "2"], "given 2 times"),
        (["--seq", "0"], "0 is not in the range x>=1"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str], error: str) -> None:
    path = _journal(tmp_path / "j", [_message("m", "x", "a", "t"), _private("p", "a", "k", "m")])

    result = CliRunner().invoke(main, ["trace", str(path), *args])

    assert result.exit_code == 2, result.output
    assert error in result.output


def test_names_from_the_journal_are_escaped_in_text(tmp_path: Path) -> None:
    path = _journal(tmp_path / "j", [_message("m", "x\x1b[2J", "a\nseq 9 forged", "t\u202e")])

    result = CliRunner().invoke(main, ["trace", str(path), "--seq", "1"])

    assert result.exit_code == 0, result.output
    assert '  seq 1 IpcMessage bus send "x\\u001b[2J" -> "a\\nseq 9 forged" "t\\u202e"' in result.output
    assert "\x1b" not in result.output
    assert "\u202e" not in result.output


def test_a_journal_that_fails_verification_is_refused(
    tmp_path: Path, break_link: Callable[[Path, int], None]
) -> None:
    path = _journal(tmp_path / "j", [_message("m", "x", "a", "t"), _private("p", "a", "k", "m")])
    break_link(path, 2)

    refused = CliRunner().invoke(main, ["trace", str(path), "--seq", "1"])
    unverified = CliRunner().invoke(main, ["trace", str(path), "--seq", "1", "--no-verify"])

    assert refused.exit_code == 1, refused.output
    assert "fails verification at seq 2" in refused.output
    assert unverified.exit_code == 0, unverified.output
    assert "led to 1 record, up to seq 2" in unverified.output
