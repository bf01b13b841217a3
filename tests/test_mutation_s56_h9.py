"""Pins found by session 56's mutation round on the bulk reads, the CLI's error object and the tail check.

Each test kills a hand-made mutant the session's own tests let through (helper h9):

- ``Runtime._read_or_ask``: an agent given by id and killed before its read is asked
  raises (not silently left out); under ``agent_ids=None`` it is left out.
- ``Runtime._read_all``: the reads share one deadline (the second late agent is given
  what is left of it, not the whole timeout again).
- ``Runtime._read_or_ask``: a full mailbox is skipped at first, then waited for with what
  is left of the timeout, and read once it has room.
- ``Runtime._ask_current``: a call's slot taken, then its agent killed before it is asked,
  is given back as the kind of slot it is, and the caller told the agent is gone; a read
  asked behind a kill is refused: named when given by id, left out of every agent's.
- ``_head_fits``: a head whose count ends at its stream's first record (or at an anchor)
  must name that record, with the heads' counts still adding up; intact streams of 64
  and 65 records (an anchor at the 64th) pass (until now only the hypothesis model test
  found a mutant there, when it drew such a stream).
- ``_json_errors``: the command's ``--json`` as click parsed it wins over the command
  line's words (``--key --json`` gives ``--json`` as the key).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric.actors._agent import ASK
from cogfabric.events import PrivateSet
from cogfabric.store import Journal
from cogfabric.store.testing import make_events
from tests.test_cli_json_s56_h4 import _run
from tests.test_rounds_s55_h10 import WAIT, _Gate, _open
from tests.test_tail_heads_s56_h3 import _head, _put_head

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def _asked_not_read(monkeypatch: pytest.MonkeyPatch, rt: cf.Runtime, agent_id: str) -> None:
    """Make ``agent_id``'s reads go through its mailbox, as for an agent that is not idle."""
    monkeypatch.setattr(rt._entry(agent_id).shared, "read_now", lambda *_args: ASK)


def _killed_once_admitted(
    monkeypatch: pytest.MonkeyPatch, rt: cf.Runtime, agent_id: str, method: str
) -> None:
    """Kill ``agent_id`` once ``method`` (``_admit``, ``_admit_control``) took its slot, before its ask."""
    admit: Callable[..., None] = getattr(rt, method)
    killing: list[str] = []

    def then_killed(aid: str, entry: Any, *args: Any) -> None:
        admit(aid, entry, *args)
        if aid == agent_id and not killing:  # once (the kill's own slot is taken here too)
            killing.append(aid)
            rt.kill(agent_id)

    monkeypatch.setattr(rt, method, then_killed)


@pytest.mark.parametrize("read", ["context_views", "cognitive_states"])
def test_an_agent_given_by_id_killed_before_its_read_is_asked_raises_every_agent_leaves_it_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    with _open(tmp_path, "sync") as rt:
        rt.spawn("a")
        rt.spawn("b")
        _asked_not_read(monkeypatch, rt, "a")
        _killed_once_admitted(monkeypatch, rt, "a", "_admit")
        with pytest.raises(cf.AgentNotFoundError) as caught:
            getattr(rt, read)(["b", "a"])
        assert caught.value.agent_id == "a"
        assert rt.agents() == ["b"]
        assert rt.stats().in_flight == 0  # the slot its read took is given back

        rt.spawn("a")
        _asked_not_read(monkeypatch, rt, "a")
        _killed_once_admitted(monkeypatch, rt, "a", "_admit")
        answered = getattr(rt, read)()  # every live agent: one killed meanwhile is left out
        assert list(answered) == ["b"]
        assert ASK not in answered.values()
        assert rt.stats().in_flight == 0


def test_the_reads_share_one_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    timeout = 0.2
    gates = {"x": _Gate(), "y": _Gate()}
    waits: list[float] = []
    with cf.Runtime.open(None, config={"runtime": {"call_timeout": WAIT}}) as rt:
        for agent_id, gate in gates.items():
            rt.spawn(agent_id, behavior=gate)
        ask = rt._ask_current

        class Recorded:
            def __init__(self, future: Any) -> None:
                self.future = future

            def get(self, timeout: float | None = None) -> Any:
                assert timeout is not None
                waits.append(timeout)
                return self.future.get(timeout=timeout)

        monkeypatch.setattr(rt, "_ask_current", lambda *args, **kwargs: Recorded(ask(*args, **kwargs)))
        try:
            for agent_id, gate in gates.items():
                rt.bus.send("app", agent_id, "m", None)
                assert gate.started.wait(WAIT)
            with pytest.raises(cf.ActorTimeoutError, match="'x', 'y' did not answer") as caught:
                rt.context_views(timeout=timeout)
        finally:
            for gate in gates.values():
                gate.release.set()
        assert "within 0.2 s" in str(caught.value)
        # the first waits out what is left of the timeout; the second gets nothing more
        assert len(waits) == 2
        assert 0 < waits[0] <= timeout
        assert waits[1] == 0.0
        rt.settle(WAIT)


def test_a_full_mailbox_is_waited_for_with_what_is_left_of_the_timeout_and_read_once_it_has_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = _Gate()
    config = {"runtime": {"call_timeout": WAIT, "mailbox_size": 1}}
    admitted: list[float | None] = []
    with cf.Runtime.open(None, config=config) as rt:
        rt.spawn("idle")
        rt.spawn("busy", behavior=gate)
        admit = rt._admit

        def room_comes_while_waiting(agent_id: str, entry: Any, timeout: float | None = None) -> None:
            admitted.append(timeout)
            if timeout:  # the second pass: the busy agent moves on while the read waits for room
                gate.release.set()
            admit(agent_id, entry, timeout)

        try:
            rt.bus.send("app", "busy", "m", 1)
            assert gate.started.wait(WAIT)
            rt.bus.send("app", "busy", "m", 2)  # fills its mailbox
            monkeypatch.setattr(rt, "_admit", room_comes_while_waiting)
            views = rt.context_views(timeout=WAIT)
        finally:
            gate.release.set()
        assert list(views) == ["idle", "busy"]
        assert admitted[0] == 0.0  # first only tried: the others are asked before it is waited for
        assert admitted[1] is not None
        assert 0 < admitted[1] <= WAIT
        rt.settle(WAIT)


@pytest.mark.parametrize(
    ("method", "call"),
    [
        pytest.param("_admit", lambda rt: rt.agent("a").set_private("k", 1), id="a handle's call"),
        pytest.param("_admit_control", lambda rt: rt.suspend("a"), id="a lifecycle call"),
    ],
)
def test_a_call_whose_agent_is_killed_after_its_slot_is_taken_is_told_and_its_slot_given_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str, call: Callable[[cf.Runtime], object]
) -> None:
    with _open(tmp_path, "batch") as rt:
        rt.spawn("a")
        _killed_once_admitted(monkeypatch, rt, "a", method)
        with pytest.raises(cf.AgentNotFoundError, match="'a'"):
            call(rt)
        assert rt.agents() == []
        rt.settle(WAIT)
        assert rt.stats().in_flight == 0


@pytest.mark.parametrize("given", [True, False], ids=["given by id", "every agent"])
def test_a_read_asked_behind_a_kill_is_refused_given_by_id_raises_every_agent_leaves_it_out(
    monkeypatch: pytest.MonkeyPatch, given: bool
) -> None:
    gate = _Gate()
    asked = {"kill": threading.Event(), "context_view": threading.Event()}
    outcome: dict[str, Any] = {}
    with cf.Runtime.open(None, config={"runtime": {"call_timeout": WAIT}}) as rt:
        rt.spawn("a", behavior=gate)
        rt.spawn("b")
        ask = rt._ask_current

        def told(agent_id: str, entry: Any, message: tuple[Any, ...], **kwargs: Any) -> Any:
            future = ask(agent_id, entry, message, **kwargs)
            if agent_id == "a" and message[1] in asked:
                asked[message[1]].set()
            return future

        def read() -> None:
            try:
                outcome["views"] = rt.context_views(["a", "b"] if given else None)
            except cf.AgentNotFoundError as exc:
                outcome["error"] = exc

        monkeypatch.setattr(rt, "_ask_current", told)
        killer = threading.Thread(target=rt.kill, args=("a",))
        reader = threading.Thread(target=read)
        try:
            rt.bus.send("app", "a", "m", None)
            assert gate.started.wait(WAIT)
            killer.start()
            assert asked["kill"].wait(WAIT)  # queued behind the message in hand
            reader.start()
            assert asked["context_view"].wait(WAIT)  # queued behind the kill
        finally:
            gate.release.set()
            killer.join(WAIT)
            reader.join(WAIT)
        assert not reader.is_alive()
        if given:
            assert outcome["error"].agent_id == "a"
        else:
            assert list(outcome["views"]) == ["b"]
        rt.settle(WAIT)


@pytest.mark.parametrize(
    ("records", "a0", "a1"),
    [
        # a0 at 1, 3, .., 9: one record by its count, but its head past its first; a1
        # (2, 4, .., 10) takes the four records a0 lost, spread out enough to fit
        (10, _head(9, 1, 1), _head(10, 9, 2)),
        # a0 at 1, 3, .., 129 (its 64th record, 127, an anchor): 64 records by its count,
        # so its head is that anchor, not 129; a1 (anchor 128) takes the one a0 lost
        (130, _head(129, 64, 1), _head(130, 66, 2)),
    ],
    ids=["no anchor", "at an anchor"],
)
def test_a_head_whose_count_ends_at_its_first_record_or_anchor_but_names_a_later_one_fails_the_tail_check(
    tmp_path: Path, records: int, a0: bytes, a1: bytes
) -> None:
    # the counts still add up to the journal's records: only each head's own arithmetic tells
    path = tmp_path / "journal"
    with Journal.open(path) as opened:
        opened.append(make_events(records, agents=2))
        opened.append([PrivateSet(at=0.0, agent="t", key="t", value=0)])
    _put_head(path, b"agent/a0", a0)
    _put_head(path, b"agent/a1", a1)

    with Journal.open(path, readonly=True) as opened:
        tail, full = opened.verify(after=records), opened.verify()

    assert not full.ok
    assert (tail.ok, tail.first_bad_seq, tail.reason) == (False, full.first_bad_seq, full.reason)


def test_a_json_word_taken_as_an_options_value_asks_for_no_error_object(tmp_path: Path) -> None:
    missing = tmp_path / "missing"

    code, stdout, stderr = _run(["verify", str(missing), "--key", "--json"])  # the key is "--json"

    assert (code, stdout, stderr) == (2, "", f"error: no journal at {missing}\n")


def test_intact_streams_at_the_anchor_boundaries_pass_the_tail_check(tmp_path: Path) -> None:
    # dense streams (each record right after the one before) of 1, 63, 64, 65, .. records:
    # a count of 64 ends at its anchor; one more puts one record right after it
    sizes = (1, 2, 63, 64, 65, 127, 128, 129)
    path = tmp_path / "journal"
    with Journal.open(path) as opened:
        for size in sizes:
            opened.append([PrivateSet(at=0.0, agent=f"s{size}", key=f"k{i}", value=i) for i in range(size)])
        opened.append([PrivateSet(at=0.0, agent="t", key="t", value=0)])
        total = sum(sizes)
        for after in (total, total + 1):
            report = opened.verify(after=after)
            assert (report.ok, report.reason) == (True, ""), (after, report)
