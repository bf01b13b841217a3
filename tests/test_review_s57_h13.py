"""Review of session 57's commits 474d53b, 19b795d, 2fdecf3 and 6f57039 (helper h13).

474d53b gave a request its recipient refuses after its requester gave up the refusal's own
dead letter, so that an audit reads it as refused (``dead-lettered: <reason>``), not as
handled late (``delivered (its requester timed out)``). Which of the two letters the
journal holds last depends on which thread hands its letter over first: the requester
takes the request off the pending ones, then journals its ``timeout`` letter, and the
recipient may refuse it in between.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import threading
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from cogfabric import ActorTimeoutError, IpcTimeoutError, Runtime
from cogfabric.actors import ClockError, Config, FakeClock, JournalConfig, RuntimeConfig
from cogfabric.cli import main
from cogfabric.events import IpcDeadLettered, IpcMessage
from cogfabric.store import Journal
from tests.actors.test_supervision import _open, _short_call_timeout
from tests.test_late_refusal_s57 import _Blocking

if TYPE_CHECKING:
    from pathlib import Path

WAIT = 10.0


def _letters(path: Path, topic: str) -> list[str]:
    with Journal.open(path, readonly=True) as journal:
        events = [r.event for r in journal.read()]
    (asked,) = [e.id for e in events if isinstance(e, IpcMessage) and e.topic == topic]
    return [e.reason for e in events if isinstance(e, IpcDeadLettered) and e.message_id == asked]


def _status(path: Path, agent_id: str, topic: str) -> str:
    shown = CliRunner().invoke(main, ["replay", str(path), "--agent", agent_id, "--json"])
    assert shown.exit_code == 0, shown.output
    (status,) = [m["status"] for m in json.loads(shown.stdout)["ipc"]["latest"] if m["topic"] == topic]
    return str(status)


def test_a_refusal_journaled_before_its_requesters_timeout_letter_still_reads_as_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The requester times out and takes its request off the pending ones; before its
    # "timeout" letter is handed over, the agent (suspended meanwhile) reaches the request
    # and refuses it: the refusal's letter is journaled first, the timeout's last.
    behavior = _Blocking()
    path = tmp_path / "j"
    with _open(path, behaviors={"blocking": lambda: behavior}) as runtime:
        runtime.spawn("a", behavior="blocking")
        runtime.bus.send("x", "a", "block")
        assert behavior.started.wait(WAIT)
        with _short_call_timeout(runtime, 0.2), pytest.raises(ActorTimeoutError):
            runtime.suspend("a")  # waits in the mailbox behind the running message
        bus = runtime.bus
        real = bus.dead_letter
        refused = threading.Event()

        def dead_letter(message: IpcMessage, reason: str, error: str) -> None:
            if reason == "timeout" and message.topic == "ask":  # the requester's, off _pending already
                behavior.release.set()
                assert refused.wait(WAIT), "the agent never refused the request"
            real(message, reason, error)
            if reason == "agent suspended":
                refused.set()

        monkeypatch.setattr(bus, "dead_letter", dead_letter)
        with pytest.raises(IpcTimeoutError):
            bus.request("x", "a", "ask", timeout=0.2)
        runtime.settle(WAIT)

    assert _letters(path, "ask") == ["agent suspended", "timeout"]
    # as when the letters come the other way round (test_late_refusal_s57): refused, not handled
    assert _status(path, "a", "ask") == "dead-lettered: agent suspended"


class _Deferring:
    """Answers nothing (returns None): its request waits for ``bus.reply``."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.got = threading.Event()

    def on_message(self, ctx: Any, message: IpcMessage) -> None:  # noqa: ARG002
        self.asked.append(message.correlation_id)
        self.got.set()


class _FailingForRepliers(FakeClock):
    """A FakeClock whose first reading on each ``replier`` thread fails, once both repliers are in it."""

    def __init__(self) -> None:
        super().__init__()
        self.both = threading.Barrier(2, timeout=WAIT)
        self.failed: set[str] = set()

    def now(self) -> float:
        name = threading.current_thread().name
        if name.startswith("replier") and name not in self.failed:
            self.failed.add(name)
            self.both.wait()
            msg = "no time now"
            raise RuntimeError(msg)
        return super().now()


def test_two_replies_failing_on_the_clock_leave_one_dead_letter(tmp_path: Path) -> None:
    behavior = _Deferring()
    clock = _FailingForRepliers()
    config = Config(runtime=RuntimeConfig(call_timeout=WAIT))
    errors: list[BaseException] = []
    behaviors = {"d": lambda: behavior}
    with (
        concurrent.futures.ThreadPoolExecutor(1) as pool,
        Runtime.open(tmp_path / "j", config=config, clock=clock, behaviors=behaviors) as rt,
    ):
        rt.spawn("a", behavior="d")
        asked = pool.submit(rt.bus.request, "x", "a", "ask", timeout=WAIT)
        assert behavior.got.wait(WAIT)
        (correlation_id,) = behavior.asked

        def reply() -> None:
            try:
                rt.bus.reply(correlation_id, "answer")
            except ClockError as exc:
                errors.append(exc)

        repliers = [threading.Thread(target=reply, name=f"replier-{n}") for n in range(2)]
        for thread in repliers:
            thread.start()
        for thread in repliers:
            thread.join(WAIT)
        with pytest.raises(ClockError):  # the requester hears it at once
            asked.result(WAIT)
        counts = rt.bus.dead_letter_counts()
    assert len(errors) == 2  # both replies failed on the clock: each raised to its caller
    # one request, refused once: the second reply is one to a request no longer pending
    assert counts == {"clock error": 1}
    assert _letters(tmp_path / "j", "ask") == ["clock error"]


# ---------------------------------------------------------------- 19b795d


class _Changer:
    """Changes a request's payload in place and answers nothing (its requester times out)."""

    def on_message(self, ctx: Any, message: IpcMessage) -> None:  # noqa: ARG002
        message.payload["q"] = "changed by b"


class _Asker:
    """Asks ``b`` from its own behavior (``ctx.request``), and gives up after a moment."""

    def on_message(self, ctx: Any, message: IpcMessage) -> str:  # noqa: ARG002
        with contextlib.suppress(IpcTimeoutError):
            ctx.request("b", "ask", {"q": "from the asker"}, timeout=0.3)  # meant to time out
        return "done"


@pytest.mark.parametrize("durability", ["sync", "batch"])
@pytest.mark.parametrize("journaled", [True, False], ids=["journal", "memory-only"])
@pytest.mark.parametrize("from_behavior", [False, True], ids=["bus.request", "ctx.request"])
def test_a_requests_timeout_letter_holds_the_payload_as_sent_whatever_its_recipient_changed(
    tmp_path: Path, durability: str, journaled: bool, from_behavior: bool
) -> None:
    config = Config(journal=JournalConfig(durability=durability))  # type: ignore[arg-type]
    behaviors: dict[str, Any] = {"changer": _Changer, "asker": _Asker}
    path = tmp_path / "j" if journaled else None
    with Runtime.open(path, config=config, clock=FakeClock(), behaviors=behaviors) as rt:
        rt.spawn("b", behavior="changer")
        if from_behavior:
            rt.spawn("asker", behavior="asker")
            assert rt.bus.request("x", "asker", "go", timeout=WAIT).payload == "done"
            sent = {"q": "from the asker"}
        else:
            sent = {"q": "from the app"}
            with pytest.raises(IpcTimeoutError):
                rt.bus.request("x", "b", "ask", dict(sent), timeout=0.3)  # meant to time out
        rt.settle(WAIT)
        (letter,) = rt.bus.dead_letters()
    assert (letter.reason, letter.payload) == ("timeout", sent)
