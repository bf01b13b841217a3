"""README's "The journal's bytes" is enough to check a journal without cogfabric.

Its sketch of a verifier (lmdb and hashlib only) is run against journals this code
writes, keyed and not, and tampered with; its table of event types and its set of
escaped characters are held against the code, so that the text cannot drift from it.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Any

import lmdb
import msgspec
import pytest

from cogfabric._audit import _ACTED_ON
from cogfabric.events import EVENT_TYPES, ContextLayer, PrivateSet, TaskContextSet
from cogfabric.events._events import (
    AgentEvent,
    SessionEvent,
    TaskContextPublished,
    _AgentOrRuntimeEvent,
    _BusEvent,
)
from cogfabric.store import FORMAT_VERSION, Journal, Snapshot

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
SECTION = README[README.index("### The journal's bytes") : README.index("## What exists today")]
KEY = b"an auditor's key"


def _block(lang: str) -> str:
    found = re.search(rf"```{lang}\n(.*?)```", SECTION, re.DOTALL)
    assert found is not None, f"no {lang} block in README's 'The journal's bytes'"
    return found.group(1)


def _first_bad() -> Any:  # the README's function
    namespace: dict[str, Any] = {}
    exec(compile(_block("py"), "README.md", "exec"), namespace)  # noqa: S102 - README's own code
    return namespace["first_bad"]


def _journal(tmp_path: Path, name: str, key: bytes | None) -> Path:
    path = tmp_path / name
    with Journal.open(path, key=key) as journal:
        for i in range(70):  # past one stream anchor (every 64th record)
            journal.append([PrivateSet(at=float(i), agent="a1", key="k", value={"i": i, "b": b"\0"})])
        journal.append([TaskContextSet(at=99.0, agent="a2", context={"goal": "x\u202e"})])
        journal.save_snapshot(Snapshot(stream="agent/a1", seq=70, data=b"state"))
    return path


def _copy(path: Path, tmp_path: Path, name: str) -> str:
    copy = tmp_path / name
    shutil.copytree(path, copy)
    return str(copy)


def _write(path: str, db: bytes, key: bytes, value: bytes) -> None:
    env = lmdb.open(path, max_dbs=8)
    try:
        with env.begin(write=True) as txn:
            txn.put(key, value, db=env.open_db(db, txn=txn, create=False))
    finally:
        env.close()


@pytest.mark.parametrize("key", [None, KEY], ids=["unkeyed", "keyed"])
def test_the_readme_sketch_checks_a_journal_as_verify_does(tmp_path: Path, key: bytes | None) -> None:
    first_bad = _first_bad()
    path = _journal(tmp_path, "journal", key)
    assert first_bad(_copy(path, tmp_path, "clean"), key or b"") is None
    if key:
        assert first_bad(_copy(path, tmp_path, "nokey")) == "wrong or missing key"
        assert first_bad(_copy(path, tmp_path, "badkey"), b"another key") == "wrong or missing key"
    flipped = _copy(path, tmp_path, "flipped")
    env = lmdb.open(flipped, max_dbs=8, readonly=True, lock=False)
    with env.begin() as txn:
        stored = txn.get((40).to_bytes(8, "big"), db=env.open_db(b"events", txn=txn, create=False))
        assert stored is not None
        record = bytearray(stored)
    env.close()
    record[20] ^= 1
    _write(flipped, b"events", (40).to_bytes(8, "big"), bytes(record))
    assert first_bad(flipped, key or b"") == 40
    rolled = _copy(path, tmp_path, "rolled")
    _write(rolled, b"meta", b"head", bytes(40))
    assert first_bad(rolled, key or b"") == "head"
    with Journal.open(flipped, key=key, readonly=True) as journal:  # the built-in verdict agrees
        report = journal.verify()
        assert not report.ok
        assert report.first_bad_seq == 40


def _stream_kind(kind: type) -> str:
    if kind is TaskContextPublished:
        return "runtime"
    if issubclass(kind, _BusEvent):
        return "bus"
    if issubclass(kind, SessionEvent):
        return "session"
    assert issubclass(kind, AgentEvent | _AgentOrRuntimeEvent), kind
    return "agent"


def test_the_readme_table_of_event_types_is_the_code() -> None:
    letters = {ContextLayer.TASK_SHARED: "T", ContextLayer.AGENT_PRIVATE: "P", ContextLayer.IPC: "I"}
    words = _block("text").split()
    documented = {words[i]: tuple(words[i + 1 : i + 5]) for i in range(0, len(words), 5)}
    actual = {
        kind.__struct_config__.tag: (
            str(_version(kind)),
            _stream_kind(kind),
            "-" if kind.layer is None else letters[kind.layer],
            "".join(letters[layer] for layer in ContextLayer if layer in kind.layers) or "-",
        )
        for kind in EVENT_TYPES
    }
    assert documented == actual


def _version(kind: type) -> int:
    version = next(field.default for field in msgspec.structs.fields(kind) if field.name == "v")
    assert isinstance(version, int)
    return version


def test_the_readme_escape_set_is_the_code() -> None:
    found = re.search(r"character of `(\[.*?\])`", SECTION, re.DOTALL)
    assert found is not None
    documented = re.compile(found.group(1))
    every = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF)
    assert documented.findall(every) == _ACTED_ON.findall(every)


def test_the_readme_constants_are_the_code() -> None:
    from cogfabric.store import _lmdb  # noqa: PLC0415 - its private constants, held against the text

    assert FORMAT_VERSION == 5
    assert "for format 5" in SECTION.replace("\n", " ")
    assert _lmdb._ANCHOR_EVERY == 64
    assert "64th, 128th" in SECTION
    names = {b"events", b"meta", b"heads", b"anchors", b"ids", b"snapshots"}
    assert {*_lmdb._DATA_DBS, _lmdb._DB_META} == names
