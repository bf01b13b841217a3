"""Session 54, helper h9: a review of the error messages of 0d670a2 and their advice.

A retire or recover refused while the agent works said "call it again once that
returns", which an agent with mail waiting refuses again (it goes on to its next
message); a journal refused at open named a verify command that, for a keyed journal,
only says the key is missing; a deeply nested unencodable value's message held its whole
path (hundreds of subscripts).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import lmdb
import pytest

import cogfabric as cf
from cogfabric.events import UnencodableValueError
from cogfabric.events._codec import encode_value

if TYPE_CHECKING:
    from pathlib import Path


class _FirstBlocks:
    """Blocks on its first message until ``release``; the rest return at once."""

    started = threading.Event()
    release = threading.Event()

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:  # noqa: ARG002
        if not _FirstBlocks.started.is_set():
            _FirstBlocks.started.set()
            assert _FirstBlocks.release.wait(10)


def test_a_busy_agent_with_mail_waiting_is_recovered_and_retired_as_the_refusal_says() -> None:
    _FirstBlocks.started.clear()
    _FirstBlocks.release.clear()
    with cf.Runtime.open(None, behaviors={"block": _FirstBlocks}) as rt:
        rt.spawn("busy", behavior="block")
        for n in range(3):  # mail waits behind the message in hand
            rt.bus.send("app", "busy", "work", n)
        assert _FirstBlocks.started.wait(10)
        try:
            with pytest.raises(cf.AgentRunningError) as retiring:
                rt.retire("busy")
            with pytest.raises(cf.AgentRunningError) as recovering:
                rt.recover("busy", cf.CognitiveState())
        finally:
            _FirstBlocks.release.set()
        assert "suspend it first" in str(retiring.value)
        assert str(recovering.value).endswith("then call recover)")

        rt.suspend("busy")  # as the message says: behind the mail, then SUSPENDED
        rt.recover("busy", cf.CognitiveState())
        rt.retire("busy")
        assert rt.agent("busy").state == cf.AgentState.RETIRED


def _damage_record(path: Path, seq: int) -> None:
    env = lmdb.open(str(path), max_dbs=8)
    try:
        with env.begin(write=True, db=env.open_db(b"events")) as txn:
            key = seq.to_bytes(8, "big")
            value = bytearray(txn.get(key) or b"")
            value[20] ^= 1
            txn.put(key, bytes(value))
    finally:
        env.close()


_SMALL = {"journal": {"max_map_size": 1 << 22}}


def test_a_keyed_journal_refused_at_open_names_the_verify_command_with_a_key_file(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with cf.Runtime.open(path, key=b"k", config=_SMALL) as rt:
        rt.spawn("a").set_private("x", 1)
    _damage_record(path, 2)

    with pytest.raises(cf.JournalIntegrityError) as raised:
        cf.Runtime.open(path, key=b"k", config=_SMALL)

    assert f"(`cogfabric verify {path} --key-file KEYFILE` reports it;" in str(raised.value)


def test_a_refused_journal_s_path_is_shown_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "a\njournal"
    with cf.Runtime.open(path, config=_SMALL) as rt:
        rt.spawn("a").set_private("x", 1)
    _damage_record(path, 2)

    with pytest.raises(cf.JournalIntegrityError) as raised:
        cf.Runtime.open(path, config=_SMALL)

    assert "\n" not in str(raised.value)


def test_a_deeply_nested_unencodable_part_is_named_with_the_middle_of_its_path_left_out() -> None:
    value: object = {"bad": object()}
    for _ in range(300):
        value = [value]

    with pytest.raises(UnencodableValueError) as raised:
        encode_value(value)

    message = str(raised.value)
    assert message.endswith(" - at `$[0][0][0][0][0][0][0][0]...285 more...[0][0][0][0][0][0][0]['bad']`")
    assert len(message) < 300
