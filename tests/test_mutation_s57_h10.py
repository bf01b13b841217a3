"""Session 57's mutation round (helper h10): the tests that kill what the session's own tests let live.

Each test names the mutant it kills: a plausible bug in the session's new code that
every test before it passed with. A Ctrl-C is simulated as in
``tests/test_notebook_s57_h3.py``: the wait it would interrupt raises ``KeyboardInterrupt``.
"""

from __future__ import annotations

import functools
import logging
import threading
import types
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric import _audit
from cogfabric.actors import _bus, _memory, _runtime
from cogfabric.actors._writer import Ack
from cogfabric.cli import _asks_for_json, _newer_cell
from cogfabric.events import PrivateSet
from cogfabric.store import Journal, JournalRecordVersionError, LmdbJournal
from cogfabric.store._record import RecordParts
from cogfabric.store._record import parts as record_parts
from cogfabric.store.testing import make_events
from tests.actors.test_supervision import _stall, _stall_then_fail
from tests.test_cli_json_s56_h4 import _with_a_newer_record
from tests.test_cli_json_s56_h4 import journal as journal  # noqa: PLC0414 - the fixture, used by name
from tests.test_cli_s57_h4 import _NEWER_CODEC
from tests.test_notebook_s57_h3 import _ctrl_c_at_the_commit

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

WAIT = 10.0
SHORT = {"runtime": {"call_timeout": 1.0}}


class _Noted:
    def on_message(self, ctx: Any, message: Any) -> str:
        ctx.set_private("got", message.payload)
        return "ok"


# --------------------------------------------------------------- _noops


def test_a_noop_refused_as_close_stops_its_agent_is_left_out() -> None:
    # mutant: _noops catches AgentNotFoundError only. An agent close() asked to stop is
    # refused with RuntimeClosedError (_ask_current), which then escaped a flush's no-ops
    # or the writer's fail-stop reload (_reload_all) instead of leaving the agent out.
    rt = cf.Runtime.open(None, config=SHORT)
    rt.spawn("a")
    listed = list(rt._agents.items())
    rt.close()
    rt._agents = dict(listed)  # as _noops copied the registry before close() stopped it
    try:
        assert rt._noops(past_bound=True) == []
        assert rt._noops(past_bound=False) == []
    finally:
        rt._agents = {}


# --------------------------------------------------------------- a Ctrl-C just as a commit is over


def _ctrl_c_once_the_commit_is_over(monkeypatch: pytest.MonkeyPatch) -> list[BaseException | None]:
    """The calling thread's next ``Ack.wait`` raises KeyboardInterrupt once its commit is over.

    Over: its ack resolved and its post-commit action (``_Handoff.over``) ran, so the
    caller's ``give_up`` finds it over and finishes the message itself. Returns what the
    commit's own wait raised (None: stored).
    """
    me = threading.get_ident()
    over = threading.Event()
    outcome: list[BaseException | None] = []
    real_wait, real_over = Ack.wait, _bus._Handoff.over

    def handoff_over(self: _bus._Handoff, committed: bool) -> None:
        real_over(self, committed)
        over.set()

    def wait(self: Ack, timeout: float) -> list[int]:
        if threading.get_ident() != me or outcome:
            return real_wait(self, timeout)
        try:
            real_wait(self, WAIT)
        except Exception as exc:  # noqa: BLE001 - the journal's refusal, kept for the test
            outcome.append(exc)
        else:
            outcome.append(None)
        assert over.wait(WAIT), "the writer never finished the commit"
        raise KeyboardInterrupt

    monkeypatch.setattr(_bus._Handoff, "over", handoff_over)
    monkeypatch.setattr(Ack, "wait", wait)
    return outcome


def test_a_send_interrupted_just_as_its_commit_is_over_is_delivered_and_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mutant: _journal_message's KeyboardInterrupt branch after give_up() dropped: the
    # Ctrl-C was swallowed (ack.wait(0.0) returned) and send() went on as if uninterrupted.
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), behaviors={"noted": _Noted}) as rt:
        agent = rt.spawn("a", behavior="noted")
        outcome = _ctrl_c_once_the_commit_is_over(monkeypatch)
        with pytest.raises(KeyboardInterrupt):
            rt.bus.send("app", "a", "note", 7)
        monkeypatch.undo()
        assert outcome == [None]  # stored
        rt.settle(WAIT)
        assert agent.private("got") == 7  # delivered, once
        assert rt.stats().in_flight == 0


def test_a_send_interrupted_just_as_its_commit_is_refused_is_not_delivered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mutant: finish(True) for finish(ack.error is None): a message the journal refused
    # was delivered all the same (replay never sends it).
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), behaviors={"noted": _Noted}) as rt:
        agent = rt.spawn("a", behavior="noted")
        _stall_then_fail(rt, ValueError("refused")).set()  # the next commit is refused
        outcome = _ctrl_c_once_the_commit_is_over(monkeypatch)
        with pytest.raises(KeyboardInterrupt):
            rt.bus.send("app", "a", "note", 7)
        monkeypatch.undo()
        assert len(outcome) == 1
        assert outcome[0] is not None  # refused
        rt.settle(WAIT)
        assert agent.private("got") is None  # not delivered: its slot given back
        assert rt.stats().in_flight == 0


# --------------------------------------------------------------- an interrupted close()


def _stop_agents_then_ctrl_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """``close()``'s wait for its agents ends in a Ctrl-C (the session actor not yet asked to stop)."""
    real_stop_agents = _runtime.Runtime._stop_agents

    def interrupted(self: _runtime.Runtime, entries: list[Any]) -> None:
        real_stop_agents(self, entries)
        raise KeyboardInterrupt

    monkeypatch.setattr(_runtime.Runtime, "_stop_agents", interrupted)


def _interrupted(*args: Any) -> None:  # noqa: ARG001
    raise KeyboardInterrupt


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[cf.Runtime]:
    rt = cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), config=SHORT)
    rt.spawn("a").set_private("k", 1)
    try:
        yield rt
    finally:
        rt.close()


def test_an_interrupted_close_asks_the_session_actor_to_stop_without_a_second_close(
    opened: cf.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mutant: close()'s clean-up without _cut_short: the session actor lived on until a
    # second close() (the cell run again), if any.
    session_actor = opened.memory.actor_thread
    assert session_actor is not None
    _stop_agents_then_ctrl_c(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        opened.close()
    monkeypatch.undo()
    session_actor.join(WAIT)
    assert not session_actor.is_alive()


def test_a_close_after_one_interrupted_twice_stops_the_session_actor_and_waits_for_it(
    opened: cf.Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first Ctrl-C before close() asked the session actor to stop, the second in its
    # clean-up before _close_soon asked: the next close() is the one to ask, and wait.
    # mutants: _finish_interrupted without its _cut_short (never asked: it lived on), or
    # without its join of the session actor's thread (close() returned before it ended).
    session_actor = opened.memory.actor_thread
    assert session_actor is not None
    _stop_agents_then_ctrl_c(monkeypatch)
    monkeypatch.setattr(_memory.MemoryManager, "_close_soon", _interrupted)
    with pytest.raises(KeyboardInterrupt):
        opened.close()
    monkeypatch.undo()
    assert session_actor.is_alive()  # nobody asked it to stop
    joined: list[threading.Thread] = []
    real_join = session_actor.join

    def join(timeout: float | None = None) -> None:
        joined.append(threading.current_thread())
        real_join(timeout)

    monkeypatch.setattr(session_actor, "join", join)
    opened.close()
    assert threading.current_thread() in joined  # waited for
    assert not session_actor.is_alive()
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as reopened:
        assert reopened.agent("a").private("k") == 1


def test_a_close_that_waits_in_vain_for_another_one_leaves_that_close_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # mutant: no return after "waited ... in vain": the second close() went on to finish
    # the first as an interrupted one (its _interrupted is set while it runs), stopping
    # the session actor and the writer under the close() still under way.
    rt = cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), config={"runtime": {"call_timeout": 0.05}})
    rt.spawn("a").set_private("k", 1)
    session_actor = rt.memory.actor_thread
    assert session_actor is not None
    entered, release = threading.Event(), threading.Event()
    real_stop_agents = _runtime.Runtime._stop_agents

    def held(self: _runtime.Runtime, entries: list[Any]) -> None:
        entered.set()
        assert release.wait(WAIT)
        real_stop_agents(self, entries)

    monkeypatch.setattr(_runtime.Runtime, "_stop_agents", held)
    first = threading.Thread(target=rt.close)
    first.start()
    try:
        assert entered.wait(WAIT)
        with caplog.at_level(logging.WARNING, logger="cogfabric"):
            rt.close()  # waits 5 * call_timeout for the first, in vain
        assert "in vain" in caplog.text
        assert session_actor.is_alive()  # the first close() has yet to stop it
        assert not rt.memory._closed
    finally:
        release.set()
        first.join(WAIT)
    assert not first.is_alive()
    assert not session_actor.is_alive()
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as reopened:
        assert reopened.agent("a").private("k") == 1


# --------------------------------------------------------------- repr


def test_repr_counts_no_spawn_whose_commit_is_under_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mutant: len(self._agents): an id reserved by a spawn still waiting for its commit
    # (after a Ctrl-C, or a timeout) counted as a live agent.
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), name="nb") as rt:
        entered = threading.Event()
        gate = _stall(rt, entered=entered)
        _ctrl_c_at_the_commit(monkeypatch, entered)
        try:
            with pytest.raises(KeyboardInterrupt):
                rt.spawn("a")
            monkeypatch.undo()
            assert repr(rt).endswith(" sync, 0 agents>")  # reserved, not reached
        finally:
            gate.set()
        rt.flush(WAIT)
        assert repr(rt).endswith(" sync, 1 agent>")


# --------------------------------------------------------------- the redefined-class hint


class Reviewer:
    def on_message(self, ctx: Any, message: Any) -> None:  # noqa: ARG002
        return None


class Writer:
    def on_message(self, ctx: Any, message: Any) -> None:  # noqa: ARG002
        return None


def _of_another_module() -> type:
    """A class ``Reviewer`` of the same qualified name as this module's, but of another module."""
    module = types.ModuleType("elsewhere")
    exec("class Reviewer:\n    def on_message(self, ctx, message):\n        return None\n", module.__dict__)  # noqa: S102
    return module.Reviewer  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "spawned",
    [
        pytest.param(_of_another_module(), id="its name, of another module"),  # mutant: no module check
        pytest.param(Writer, id="another name, of its module"),  # mutant: no qualified-name check
    ],
)
def test_only_a_class_of_the_registered_ones_module_and_name_gets_the_redefined_hint(spawned: type) -> None:
    with cf.Runtime.open(None, behaviors={"reviewer": Reviewer}) as rt:
        with pytest.raises(cf.InvalidSpawnSpecError, match="is not registered") as refused:
            rt.spawn("r", behavior=spawned)
        assert "has its name" not in str(refused.value)


def test_a_factory_that_is_no_class_leaves_an_unregistered_class_refused() -> None:
    # mutant: _same_name without isinstance(factory, type): a factory with no __qualname__
    # (a functools.partial) raised AttributeError instead of InvalidSpawnSpecError.
    with (
        cf.Runtime.open(None, behaviors={"writer": functools.partial(Writer)}) as rt,
        pytest.raises(cf.InvalidSpawnSpecError, match="is not registered"),
    ):
        rt.spawn("r", behavior=Reviewer)


# --------------------------------------------------------------- the tail check's heads pass


def test_a_stream_of_one_record_outside_the_tail_passes_the_tail_check(tmp_path: Path) -> None:
    # mutant: _head_fits refusing a head whose first seq is its last (>= for >): found
    # before only by the model test's random journals (tests/store/test_lmdb_model.py)
    with Journal.open(tmp_path / "j") as opened:
        opened.append(make_events(1, agents=1))  # agent/a0: seq 1 only
        opened.append([PrivateSet(at=float(i), agent="t", key="k", value=i) for i in range(3)])
        report = opened.verify(after=2)
    assert (report.ok, report.reason) == (True, "")


# --------------------------------------------------------------- the CLI


@pytest.mark.parametrize(
    ("args", "asked"),
    [
        # click's group takes a `--` before the command as its own: the command's options follow
        (["--", "verify", "J", "--bogus", "--json"], True),
        (["--", "export", "J", "--json-errors"], True),
        (["--", "verify", "J", "--", "--json"], False),
        (["--", "--json", "verify", "J"], False),  # a command called --json: there is none
    ],
)
def test_a_double_dash_before_the_command_ends_the_groups_options_only(args: list[str], asked: bool) -> None:
    assert _asks_for_json(args) is asked


def test_newer_records_of_several_seqs_name_the_first_and_the_last() -> None:
    # mutant: the last seq named as the first
    found = {"type": "PrivateSet", "stored": 2, "known": 1, "records": 4, "first_seq": 7, "last_seq": 13}
    assert _newer_cell(found) == "PrivateSet v2 4 (known v1; first seq 7, last 13)"


def _framed_as(stream: bytes | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """``_audit``'s framing of a record: its stream replaced by ``stream`` (None: malformed)."""

    def parts(record: bytes) -> RecordParts | None:
        framed = record_parts(record)
        return None if stream is None or framed is None else framed._replace(stream=stream)

    monkeypatch.setattr(_audit, "parts", parts)


@pytest.mark.parametrize(
    "stream",
    [
        pytest.param(b"agent/\xff", id="a stream that is not UTF-8"),  # mutant: no UnicodeDecodeError branch
        pytest.param(None, id="malformed framing"),  # mutant: no `stream is None` check
    ],
)
def test_a_newer_record_whose_framing_cannot_be_read_is_raised(
    journal: Path, monkeypatch: pytest.MonkeyPatch, stream: bytes | None
) -> None:
    _with_a_newer_record(journal)
    _framed_as(stream, monkeypatch)
    with (
        LmdbJournal.open(journal, readonly=True) as opened,
        pytest.raises(JournalRecordVersionError) as raised,
    ):
        _audit.inspect_journal(opened, journal, skip_newer=True)
    assert raised.value.seq == 7


def test_the_newer_codec_reads_the_record_the_framing_tests_use(journal: Path) -> None:
    # the record above is newer only to this code (the tests' premise)
    _with_a_newer_record(journal)
    with LmdbJournal.open(journal, codec=_NEWER_CODEC, readonly=True) as opened:
        assert _audit.inspect_journal(opened, journal)["records"] == 7
