"""A send or request refused at a full mailbox names the refused message, as its dead letter does.

``MailboxFullError`` from the bus now carries ``message_id`` (what ``cogfabric trace
--id`` takes, and what the ``mailbox full`` dead letter holds) and, for a request,
``correlation_id``, as the bus's ``IpcError``s do; a handle's call names none.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pytest

from cogfabric.actors import Config, FakeClock, MailboxFullError, Runtime, RuntimeConfig
from cogfabric.events import IpcDeadLettered
from cogfabric.store import Journal
from tests.actors.test_close_and_flush import _Gated
from tests.actors.test_supervision import _short_call_timeout

if TYPE_CHECKING:
    from pathlib import Path


def refused_at_a_full_mailbox(path: Path) -> tuple[MailboxFullError, MailboxFullError]:
    """A journal at ``path`` in which a send (topic ``third``) and a request (``fourth``) were
    refused at a full mailbox; their errors."""
    entered, gate = threading.Event(), threading.Event()
    config = Config(runtime=RuntimeConfig(mailbox_size=1))
    behaviors = {"gated": lambda: _Gated(entered, gate)}
    with Runtime.open(path, config=config, clock=FakeClock(), behaviors=behaviors) as rt:
        rt.spawn("s", behavior="gated")
        rt.spawn("u")
        try:
            rt.bus.send("u", "s", "first")
            assert entered.wait(10)
            rt.bus.send("u", "s", "second")  # the mailbox is full now
            # only the refused calls have the short call_timeout: the set-up's commits may be slow
            with _short_call_timeout(rt, 0.3):
                with pytest.raises(MailboxFullError) as sent:
                    rt.bus.send("u", "s", "third")
                with pytest.raises(MailboxFullError) as asked:
                    rt.bus.request("u", "s", "fourth", None, timeout=0.3)
        finally:
            gate.set()
        rt.flush()
    return sent.value, asked.value


def test_a_refused_send_and_request_name_their_messages(tmp_path: Path) -> None:
    sent, asked = refused_at_a_full_mailbox(tmp_path / "j")

    with Journal.open(tmp_path / "j", readonly=True) as journal:
        letters = {
            r.event.topic: r.event for r in journal.read(stream="bus") if isinstance(r.event, IpcDeadLettered)
        }
    assert {topic: letter.reason for topic, letter in letters.items()} == {
        "third": "mailbox full",
        "fourth": "mailbox full",
    }
    assert (sent.message_id, sent.correlation_id) == (letters["third"].message_id, None)
    assert asked.message_id == letters["fourth"].message_id
    assert (asked.correlation_id or "").endswith("-corr")  # the original's correlation id form
