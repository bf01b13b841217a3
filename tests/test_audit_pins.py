"""The audit's promises (``_audit.py``, ``store/_verify.py``) a hand-made mutation test found unheld.

Each test here failed under a small change of one of the two modules (a check left
out, a bound off by one, an order changed) that every other test of the audit
commands and of ``Journal.verify`` let through: export's ``layers`` order and its
``data``, ``encode_json`` of a dict subclass, a tail check's stream heads, a stream
head that names no seq, and an id index entry of an event whose id is empty.
"""

from __future__ import annotations

import collections
import hashlib
import json
from typing import TYPE_CHECKING, Any

import lmdb
import msgspec
from click.testing import CliRunner

from cogfabric import _audit
from cogfabric._audit import encode_json
from cogfabric.cli import main
from cogfabric.events import AgentSpawned, IpcDeadLettered, IpcDelivered, IpcMessage
from cogfabric.store import Journal, LmdbJournal
from cogfabric.store._record import head_value
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    import pytest

    from cogfabric.store import VerifyReport


def _seq(n: int) -> bytes:
    return n.to_bytes(8, "big")


def _journal(tmp_path: Path, count: int = 12) -> Path:
    """A journal of an agent's spawn, then ``count`` PrivateSet events over agents a0, a1, a2."""
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        journal.append([AgentSpawned(at=0.0, agent="a0"), *make_events(count)])
    return path


def _edit(path: Path, edit: Callable[[Any, dict[bytes, Any]], object]) -> None:
    """Change a closed journal with the plain lmdb package, in one write transaction."""
    env = lmdb.open(str(path), max_dbs=8)
    try:
        dbs = {name: env.open_db(name) for name in (b"events", b"heads", b"ids", b"meta")}
        with env.begin(write=True) as txn:
            edit(txn, dbs)
    finally:
        env.close()


def _verified(path: Path, after: int = 0) -> VerifyReport:
    with Journal.open(path, readonly=True) as journal:
        return journal.verify(after=after)


def _export(path: Path, *args: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["export", str(path), *args])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.output.splitlines()]


def test_export_lists_a_records_layers_in_the_layers_order(tmp_path: Path) -> None:
    # README's export example shows an agent's spawn with its layers TASK_SHARED, then
    # AGENT_PRIVATE; export_lines lists them "in the layers' order"
    # kills: the layer names sorted by name (AGENT_PRIVATE before TASK_SHARED)
    (line,) = _export(_journal(tmp_path), "--type", "AgentSpawned")

    assert line["layer"] == "TASK_SHARED"
    assert line["layers"] == ["TASK_SHARED", "AGENT_PRIVATE"]


def test_export_gives_the_version_once_and_the_events_fields_as_data(tmp_path: Path) -> None:
    # README: "export writes JSON Lines (seq, time, stream, layer, layers, type, version,
    # data, chain)"; _event_data: "An event's fields but its tag and version"
    # kills: the event's "v" kept among its data
    (line,) = _export(_journal(tmp_path), "--after", "1", "--until", "2")

    assert line["version"] == 1
    assert line["type"] == "PrivateSet"
    assert "v" not in line["data"]
    assert line["data"]["key"] == "k0"


def test_encode_json_writes_a_dict_subclass_keyed_by_other_than_strings_as_a_map_of_pairs() -> None:
    # encode_json: "A map with a key that is not a string ... is written as {"$map":
    # [[key, value], ...]} ... Nothing is merged"; a dict subclass is a map
    # kills: the key walk passing over a dict subclass (msgspec then writes 1 and "1"
    # as one JSON key twice)
    value = {"outer": collections.OrderedDict([(1, "a"), ("1", "b")])}

    encoded = encode_json(value)

    assert json.loads(encoded) == {"outer": {"$map": [[1, "a"], ["1", "b"]]}}


def test_a_tail_check_names_a_stream_head_moved_onto_the_last_record_of_another_stream(
    tmp_path: Path,
) -> None:
    # _tail_heads_problem: "each stream the tail holds records of must have its head at
    # the last"; only a head past the last record checked is an append made since
    # kills: a head at exactly the last record taken for an append made since (<= as <)
    path = _journal(tmp_path)  # a0 holds seqs 1, 2, 5, 8, 11; the last record, 13, is a2's
    with Journal.open(path, readonly=True) as journal:
        last = journal.last_seq
        assert [r.seq for r in journal.read(stream="agent/a0")][-1] == last - 2

    def move(txn: Any, dbs: dict[bytes, Any]) -> None:
        head = bytes(txn.get(b"agent/a0", db=dbs[b"heads"]))
        txn.put(b"agent/a0", _seq(last) + head[8:], db=dbs[b"heads"])

    _edit(path, move)
    report = _verified(path, after=6)

    assert not report.ok
    assert report.first_bad_seq == last - 2
    assert "the stream index's head of 'agent/a0' does not match its records" in report.reason


def test_a_stream_head_of_a_stream_with_no_records_naming_no_seq_is_reported_without_a_seq(
    tmp_path: Path,
) -> None:
    # VerifyReport.first_bad_seq: "None when ok (or when no seq applies)"; seq 0 is no record
    # kills: the extra head's own seq, 0, given as the first bad seq
    path = _journal(tmp_path)

    def add(txn: Any, dbs: dict[bytes, Any]) -> None:
        txn.put(b"agent/ghost", bytes(24), db=dbs[b"heads"])

    _edit(path, add)
    report = _verified(path)

    assert not report.ok
    assert report.first_bad_seq is None
    assert report.reason == "the stream index names stream 'agent/ghost', which has no records"


def test_a_rechained_record_whose_event_id_is_empty_is_reported_not_raised(tmp_path: Path) -> None:
    # Journal.verify: "Damage is reported, not raised"; README: verify names "an id index
    # entry that disagrees with the records"
    # kills: looking an empty id up in the id index (LMDB refuses an empty key: raised)
    path = _journal(tmp_path)
    bad = 5

    def forge(txn: Any, dbs: dict[bytes, Any]) -> None:
        events = dbs[b"events"]
        value = bytes(txn.get(_seq(bad), db=events))
        _, event, trailer = msgspec.msgpack.decode(value)
        event["id"] = ""
        body = value[:10] + msgspec.msgpack.encode(event) + value[len(value) - len(trailer) - 3 : -16]
        prev = bytes(txn.get(_seq(bad - 1), db=events))[-16:]
        n = bad
        while True:  # re-chained, head included, as anyone can an unkeyed journal
            prev = hashlib.blake2b(prev + body, digest_size=16).digest()
            txn.put(_seq(n), body + prev, db=events)
            following = txn.get(_seq(n + 1), db=events)
            if following is None:
                break
            n += 1
            body = bytes(following)[:-16]
        txn.put(b"head", head_value(_seq(n), prev, b""), db=dbs[b"meta"])

    _edit(path, forge)
    report = _verified(path)

    assert not report.ok
    assert report.first_bad_seq == bad
    assert report.reason == "the event id index does not match the records"


def test_replay_of_an_agent_keeps_only_the_broadcasts_that_reached_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another agent's broadcast is read when its copy's fate for the agent comes, not
    # kept from its own record on the chance (a helper's hunt: every broadcast of the
    # journal, with a fate per subscriber, was held until the end)
    def broadcast(sender: str, topic: str) -> IpcMessage:
        return IpcMessage(at=1.0, sender=sender, recipient="", topic=topic, kind="broadcast")

    theirs, missed, ours = broadcast("y", "theirs"), broadcast("y", "missed"), broadcast("x", "ours")
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append([AgentSpawned(at=0.0, agent=a) for a in "xyz"])
        journal.append([theirs, missed, ours])
        journal.append(
            [
                IpcDelivered(at=2.0, message_id=missed.id, recipient="z"),  # not to x
                IpcDelivered(at=2.0, message_id=ours.id, recipient="y"),
                IpcDelivered(at=2.0, message_id=theirs.id, recipient="x"),
                IpcDelivered(at=2.0, message_id=theirs.id, recipient="z"),
                IpcDeadLettered(
                    at=2.0, message_id=ours.id, sender="x", recipient="z", topic="ours", reason="full"
                ),
            ]
        )
    built: list[str] = []
    shown_message = _audit._shown_message

    def counted(seq: int, event: IpcMessage | IpcDeadLettered, kind: str) -> dict[str, Any]:
        built.append(event.topic)
        return shown_message(seq, event, kind)

    monkeypatch.setattr(_audit, "_shown_message", counted)
    with LmdbJournal.open(path, readonly=True) as journal:
        shown = _audit._ipc_of(journal, "x", 1, None)

    assert [(m["topic"], m["from"], m["status"]) for m in shown] == [
        ("theirs", "y", "delivered"),
        ("ours", "x", "delivered to 1, dead-lettered for 1"),
    ]
    assert sorted(built) == ["ours", "theirs"]  # "missed" never reached x: never kept
