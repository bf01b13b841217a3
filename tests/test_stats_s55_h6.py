"""Runtime.stats(): an operator's figures of a running runtime, read without asking any agent."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf

if TYPE_CHECKING:
    from pathlib import Path

WAIT = 10.0


class _Gate:
    """A behavior that holds its first message until ``release`` is set."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def on_message(self, ctx: Any, message: Any) -> None:  # noqa: ARG002
        self.started.set()
        assert self.release.wait(WAIT)


class _Raises:
    def on_message(self, ctx: Any, message: Any) -> None:  # noqa: ARG002
        msg = "boom"
        raise RuntimeError(msg)


def test_a_memory_only_runtime_counts_its_agents_by_lifecycle_and_has_no_journal_figures() -> None:
    with cf.Runtime.open() as rt:
        for agent_id in ("a", "b", "c", "d"):
            rt.spawn(agent_id)
        rt.suspend("b")
        rt.retire("c")
        rt.kill("d")
        stats = rt.stats()
    assert isinstance(stats, cf.RuntimeStats)
    assert (stats.agents, stats.idle, stats.running, stats.suspended, stats.retired) == (3, 1, 0, 1, 1)
    assert (stats.queued, stats.queued_max, stats.mailboxes_full) == (0, 0, 0)
    assert stats.dead_letters == {}
    assert stats.behavior_failures == 0
    journal_fields = (
        stats.writer_backlog,
        stats.writer_backlog_max,
        stats.commits,
        stats.commit_seconds,
        stats.journal_last_seq,
        stats.journal_bytes,
        stats.journal_max_map_size,
        stats.journal_failure,
    )
    assert journal_fields == (None,) * 8


def test_stats_answers_while_a_behavior_is_busy_and_counts_its_waiting_mail() -> None:
    gate = _Gate()
    rt = cf.Runtime.open(config={"runtime": {"mailbox_size": 2}}, behaviors={"gate": lambda: gate})
    try:
        rt.spawn("busy", behavior="gate")
        rt.spawn("other")
        rt.bus.send("app", "busy", "first")  # taken up: the behavior holds it
        assert gate.started.wait(WAIT)
        rt.bus.send("app", "busy", "second")
        rt.bus.send("app", "busy", "third")  # the mailbox is full now: a fourth would wait
        stats = rt.stats()  # asks no actor: the busy one would not answer until released
        assert (stats.agents, stats.running, stats.idle) == (2, 1, 1)
        assert (stats.queued, stats.queued_max, stats.mailboxes_full) == (2, 2, 1)
        assert rt.agent("busy").queued == stats.queued_max
    finally:
        gate.release.set()
        rt.close()


def test_a_failing_behavior_is_counted_with_its_dead_letter() -> None:
    with cf.Runtime.open(behaviors={"raises": _Raises}) as rt:
        rt.spawn("r", behavior="raises")
        with pytest.raises(cf.IpcHandlerError):
            rt.bus.request("app", "r", "q", timeout=WAIT)
        with pytest.raises(cf.AgentNotRegisteredError):
            rt.bus.send("app", "nobody", "q")
        stats = rt.stats()
    assert stats.behavior_failures == 1
    assert stats.dead_letters == {"handler error": 1, "agent not registered": 1}


def test_the_journal_figures_follow_its_commits(tmp_path: Path) -> None:
    path = tmp_path / "j"
    config = {"journal": {"max_map_size": 8 << 20, "group_commit_max": 64}}
    with cf.Runtime.open(path, config=config) as rt:
        agent = rt.spawn("a")
        before = rt.stats()
        agent.set_private("k", "v")  # sync durability: committed when it returns
        after = rt.stats()
        size = (path / "data.mdb").stat().st_size
    assert before.journal_last_seq is not None
    assert after.journal_last_seq == before.journal_last_seq + 1
    assert before.commits is not None
    assert after.commits is not None
    assert after.commits >= before.commits + 1
    assert after.writer_backlog == 0  # nothing else was handed over
    assert after.writer_backlog_max == 4 * 64
    assert after.commit_seconds is not None
    assert after.commit_seconds >= 0.0
    assert after.journal_bytes == size  # nothing was written since: the file as it was
    assert after.journal_max_map_size == 8 << 20
    assert after.journal_failure is None


def test_a_journal_without_a_size_limit_says_none(tmp_path: Path) -> None:
    with cf.Runtime.open(tmp_path / "j") as rt:
        stats = rt.stats()
    assert stats.journal_max_map_size is None
    assert stats.journal_bytes is not None
    assert stats.journal_bytes > 0


def test_a_fail_stop_journal_is_named_by_its_error(tmp_path: Path) -> None:
    config = {"journal": {"durability": "batch", "map_size": 140 << 10, "max_map_size": 140 << 10}}
    rt = cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), config=config)
    try:
        rt.spawn("a")
        rt.flush()
        assert rt.stats().journal_failure is None
        rt.agent("a").set_private("big", "z" * 200_000)  # applied, then refused by storage
        with pytest.raises(cf.JournalError):
            rt.flush(WAIT)
        stats = rt.stats()
    finally:
        rt.close()  # raises nothing: flush reported the failure
    assert stats.journal_failure is not None
    assert stats.journal_failure.startswith("JournalFullError: ")
    assert stats.journal_max_map_size == 140 << 10


def test_after_close_stats_raises_and_the_dead_letter_counts_still_answer() -> None:
    rt = cf.Runtime.open()
    with pytest.raises(cf.AgentNotRegisteredError):
        rt.bus.send("app", "nobody", "q")
    rt.close()
    with pytest.raises(cf.RuntimeClosedError):
        rt.stats()
    assert rt.bus.dead_letter_counts() == {"agent not registered": 1}


def test_the_figures_are_frozen_and_their_dict_a_copy() -> None:
    with cf.Runtime.open() as rt:
        stats = rt.stats()
        stats.dead_letters["mailbox full"] = 5
        assert rt.stats().dead_letters == {}
    with pytest.raises(AttributeError):
        stats.agents = 3  # type: ignore[misc]
