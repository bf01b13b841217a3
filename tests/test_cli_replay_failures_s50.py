"""`cogfabric replay --agent` shows the failures of an agent's behavior: how many, and the latest.

A behavior that raises is journaled (``AgentFailed``) and the agent restarted from the
journal; an auditor replaying the agent sees it in ``failures``, beside the message its
behavior was handling, as the JSON and the table show it.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

import cogfabric as cf
from cogfabric.actors import IpcHandlerError, IpcTimeoutError
from cogfabric.cli import main
from cogfabric.events import AgentFailed, AgentSpawned, IpcMessage
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric import AgentContext

_START = 1_800_000_000.0
_WHEN = "2027-01-15T08:00:00.000+00:00"  # _START as the table shows it


class _Touchy:
    """Raises on ``boom`` (a send) and ``ask`` (a request); handles anything else."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        if message.topic == "boom":
            msg = f"cannot handle {message.payload!r}"
            raise ValueError(msg)
        if message.topic == "ask":
            raise KeyError(message.payload)
        ctx.set_private("seen", message.topic)


class _Late:
    """Raises on ``job`` once released: after its requester has given up."""

    arrived = threading.Event()
    release = threading.Event()

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002 - it only fails
        _Late.arrived.set()
        assert _Late.release.wait(10)
        msg = "too late"
        raise RuntimeError(msg)


def _view(path: Path, *args: str) -> dict[str, Any]:
    shown = CliRunner().invoke(main, ["replay", str(path), *args, "--json"])
    assert shown.exit_code == 0, shown.output
    view: dict[str, Any] = json.loads(shown.output)
    return view


def _rows(path: Path, agent: str, name: str) -> list[str]:
    """The lines of the table's row ``name`` for ``agent``."""
    shown = CliRunner().invoke(main, ["replay", str(path), "--agent", agent], env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output
    rows = [line.split("│")[1:-1] for line in shown.output.splitlines() if line.startswith("│")]
    start = next(i for i, r in enumerate(rows) if r[0].strip() == name)
    end = next((i for i, r in enumerate(rows) if i > start and r[0].strip()), len(rows))
    return [r[-1].strip() for r in rows[start:end]]


def _records(path: Path) -> tuple[list[int], dict[str, tuple[int, str]]]:
    """The seqs of the journal's ``AgentFailed`` records, and each message's (seq, id) by topic."""
    with Journal.open(path, readonly=True) as journal:
        records = list(journal.read())
    failed = [r.seq for r in records if isinstance(r.event, AgentFailed)]
    messages = {r.event.topic: (r.seq, r.event.id) for r in records if isinstance(r.event, IpcMessage)}
    return failed, messages


def _journal(path: Path) -> None:
    """a: handles ``hello``, raises on ``boom`` (a send), then on ``ask`` (a request); b: no failure."""
    with cf.Runtime.open(path, clock=cf.FakeClock(start=_START), behaviors={"touchy": _Touchy}) as rt:
        rt.spawn("a", behavior="touchy")
        rt.spawn("b", behavior="touchy")
        rt.spawn("x")
        rt.bus.send("x", "a", "hello", 1)
        rt.bus.send("x", "b", "hello", 1)
        rt.bus.send("x", "a", "boom", 2)
        with pytest.raises(IpcHandlerError):
            rt.bus.request("x", "a", "ask", "missing", timeout=10)
        assert rt.agent("a").private("seen") == "hello"  # a call: answered once the request is handled
        rt.flush()


def test_the_json_counts_the_failures_and_shows_the_latest_with_the_message_handled(tmp_path: Path) -> None:
    path = tmp_path / "j"
    _journal(path)
    (boom_failed, ask_failed), messages = _records(path)

    view = _view(path, "--agent", "a")
    assert list(view)[-2:] == ["ipc", "failures"]  # after the IPC whose messages it names
    assert view["failures"] == {
        "count": 2,
        "latest": [
            {
                "seq": boom_failed,
                "at": _START,
                "error": "ValueError",
                "detail": "cannot handle 2",
                "message": {
                    "id": messages["boom"][1],
                    "seq": messages["boom"][0],
                    "kind": "send",
                    "from": "x",
                    "topic": "boom",
                },
            },
            {
                "seq": ask_failed,
                "at": _START,
                "error": "KeyError",
                "detail": "'missing'",
                "message": {
                    "id": messages["ask"][1],
                    "seq": messages["ask"][0],
                    "kind": "request",
                    "from": "x",
                    "topic": "ask",
                },
            },
        ],
    }
    # the IPC entries are as they were: the failures are beside them, not in them
    assert [(m["topic"], m["status"]) for m in view["ipc"]["latest"]] == [
        ("hello", "delivered"),
        ("boom", "dead-lettered: handler error"),
        ("ask", "dead-lettered: handler error"),
    ]


def test_an_agent_that_never_failed_shows_none_and_so_does_a_seq_before_the_failure(tmp_path: Path) -> None:
    path = tmp_path / "j"
    _journal(path)
    (boom_failed, ask_failed), _ = _records(path)
    none = {"count": 0, "latest": []}

    assert _view(path, "--agent", "b")["failures"] == none
    assert _view(path, "--agent", "x")["failures"] == none  # a requester is not the one that failed
    assert _view(path, "--agent", "a", "--at", str(boom_failed - 1))["failures"] == none
    between = _view(path, "--agent", "a", "--at", str(ask_failed - 1))["failures"]
    assert between["count"] == 1
    assert [f["seq"] for f in between["latest"]] == [boom_failed]
    assert _rows(path, "b", "failures") == ["none"]
    assert _rows(path, "a", "failures")[0] == "2 failures:"


def test_the_table_shows_each_failure_a_line_with_its_error_and_message(tmp_path: Path) -> None:
    path = tmp_path / "j"
    _journal(path)
    (boom_failed, ask_failed), messages = _records(path)

    assert _rows(path, "a", "failures") == [
        "2 failures:",
        (
            f'seq {boom_failed} ({_WHEN}) error "ValueError: cannot handle 2", '
            f'handling seq {messages["boom"][0]} send from "x" "boom"'
        ),
        (
            f"seq {ask_failed} ({_WHEN}) error \"KeyError: 'missing'\", "
            f'handling seq {messages["ask"][0]} request from "x" "ask"'
        ),
    ]


def test_a_request_its_handler_raised_on_after_its_requester_timed_out_shows_the_failure(
    tmp_path: Path,
) -> None:
    # its IPC entry says only "delivered (its requester timed out)": the failure says it raised
    _Late.arrived.clear()
    _Late.release.clear()
    path = tmp_path / "j"
    with cf.Runtime.open(path, behaviors={"late": _Late}) as rt:
        rt.spawn("x")
        rt.spawn("y", behavior="late")
        with pytest.raises(IpcTimeoutError):
            rt.bus.request("x", "y", "job", 1, timeout=0.05)
        assert _Late.arrived.wait(10)
        _Late.release.set()
        assert rt.agent("y").private("any") is None  # a call: answered once the job is handled
        rt.flush()
    (failed,), messages = _records(path)

    view = _view(path, "--agent", "y")
    assert [(m["topic"], m["status"]) for m in view["ipc"]["latest"]] == [
        ("job", "delivered (its requester timed out)")
    ]
    assert view["failures"]["count"] == 1
    (shown,) = view["failures"]["latest"]
    assert (shown["seq"], shown["error"], shown["detail"]) == (failed, "RuntimeError", "too late")
    assert (shown["message"]["seq"], shown["message"]["kind"]) == (messages["job"][0], "request")
    assert _rows(path, "y", "failures")[1].endswith(
        f'error "RuntimeError: too late", handling seq {messages["job"][0]} request from "x" "job"'
    )


def test_only_the_latest_five_are_kept_and_a_respawned_agent_starts_with_none(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with cf.Runtime.open(path, behaviors={"touchy": _Touchy}) as rt:
        rt.spawn("a", behavior="touchy")
        rt.spawn("x")
        for n in range(7):
            rt.bus.send("x", "a", "boom", n)
        assert rt.agent("a").private("seen") is None  # a call: answered once the sends are handled
        rt.kill("a")
        rt.spawn("a", behavior="touchy")
        rt.flush()
    failed, _ = _records(path)

    assert len(failed) == 7
    before = _view(path, "--agent", "a", "--at", str(failed[-1]))["failures"]
    assert before["count"] == 7
    assert [(f["seq"], f["detail"]) for f in before["latest"]] == [
        (seq, f"cannot handle {n}") for n, seq in enumerate(failed) if n >= 2
    ]
    assert _rows(path, "a", "failures") == ["none"]  # an earlier agent's of that id are not its own
    assert _view(path, "--agent", "a")["failures"] == {"count": 0, "latest": []}
    table = CliRunner().invoke(main, ["replay", str(path), "--agent", "a", "--at", str(failed[-1])])
    assert "7 failures, the latest 5:" in table.output


def test_a_failure_naming_no_message_or_one_outside_its_ipc_shows_what_the_event_says(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(
            [
                AgentSpawned(at=_START, agent="a"),
                AgentFailed(at=_START, agent="a", error="OSError", detail="disk"),
                AgentFailed(at=_START, agent="a", error="ValueError", cause="elsewhere"),
            ]
        )

    latest = _view(path, "--agent", "a")["failures"]["latest"]
    assert [f["message"] for f in latest] == [
        None,
        {"id": "elsewhere", "seq": None, "kind": None, "from": None, "topic": None},
    ]
    assert latest[1]["detail"] == ""
    assert _rows(path, "a", "failures") == [
        "2 failures:",
        f'seq 2 ({_WHEN}) error "OSError: disk"',
        f'seq 3 ({_WHEN}) error "ValueError", handling message "elsewhere"',
    ]
