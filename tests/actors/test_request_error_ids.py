"""A request's failure names the request: ``message_id`` (its journaled IpcMessage's id,
which ``cogfabric trace --id`` takes) and ``correlation_id``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

import cogfabric as cf
from cogfabric.cli import main
from cogfabric.events import IpcDeadLettered, IpcMessage
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path


class _Fails:
    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:  # noqa: ARG002
        if message.topic == "defer":
            return None  # defers the reply, which never comes
        msg = "boom"
        raise RuntimeError(msg)


def _requests(path: Path) -> dict[tuple[str, str], IpcMessage]:
    """Each request journaled, by (recipient, topic)."""
    with Journal.open(path, readonly=True) as journal:
        return {
            (r.event.recipient, r.event.topic): r.event
            for r in journal.read()
            if isinstance(r.event, IpcMessage) and r.event.kind == "request"
        }


def test_a_handler_error_a_timeout_and_a_refusal_name_their_request(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with cf.Runtime.open(path, behaviors={"fails": _Fails}) as rt:
        rt.spawn("worker", behavior="fails")
        rt.spawn("idle")  # no behavior: a request to it is refused at once
        with pytest.raises(cf.IpcHandlerError) as failed:
            rt.bus.request("driver", "worker", "work", None, 30)
        with pytest.raises(cf.IpcTimeoutError) as timed_out:
            rt.bus.request("driver", "worker", "defer", None, 0.2)
        with pytest.raises(cf.IpcNoHandlerError) as refused:
            rt.bus.request("driver", "idle", "work", None, 30)

    requests = _requests(path)
    assert len(requests) == 3
    for error, key in (
        (failed, ("worker", "work")),
        (timed_out, ("worker", "defer")),
        (refused, ("idle", "work")),
    ):
        request = requests[key]
        assert (error.value.message_id, error.value.correlation_id) == (request.id, request.correlation_id)
    with Journal.open(path, readonly=True) as journal:
        dead = [r.event.message_id for r in journal.read() if isinstance(r.event, IpcDeadLettered)]
    assert {failed.value.message_id, timed_out.value.message_id, refused.value.message_id} <= set(dead)


def test_trace_takes_a_failed_requests_message_id(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with cf.Runtime.open(path, behaviors={"fails": _Fails}) as rt:
        rt.spawn("worker", behavior="fails")
        with pytest.raises(cf.IpcHandlerError) as failed:
            rt.bus.request("driver", "worker", "work", None, 30)

    assert failed.value.message_id is not None
    shown = CliRunner().invoke(main, ["trace", str(path), "--id", failed.value.message_id])

    assert shown.exit_code == 0, shown.output
    assert 'IpcMessage bus request "driver" -> "worker" "work"' in shown.output
    assert "AgentFailed agent/worker" in shown.output


def test_other_bus_errors_name_no_request(tmp_path: Path) -> None:
    with cf.Runtime.open(tmp_path / "journal") as rt, pytest.raises(cf.IpcInvalidMessageError) as invalid:
        rt.bus.reply("", None)

    assert (invalid.value.message_id, invalid.value.correlation_id) == (None, None)
