"""Replay's promises (``actors/_core.py``) that a mutation test found no test held.

Each test names what a docstring or README.md promises of ``replay_agent``,
``agent_end``, recovery from a snapshot plus the tail, and ``snapshot_problem``.
The journals are written by hand, event by event, so each seq is known.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING

import lmdb
import pytest

from cogfabric.actors import (
    AgentContext,
    FakeClock,
    InvalidSpawnSpecError,
    Runtime,
    _core,
    replay_agent,
    snapshot_problem,
)
from cogfabric.actors._state import encode_snapshot
from cogfabric.events import (
    AgentKilled,
    AgentSpawned,
    PrivateSet,
    TaskContextPublished,
    TaskContextSet,
)
from cogfabric.store import Journal, Snapshot

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from cogfabric.events import Event, IpcMessage


def _write(path: Path, *batches: Sequence[Event]) -> None:
    with Journal.open(path) as journal:
        for batch in batches:
            journal.append(batch)


def _save_faithful_snapshot(journal: Journal, agent_id: str) -> int:
    """Save the state the agent's events make as its snapshot, at its stream's last record."""
    state = replay_agent(journal, agent_id, from_snapshot=False)
    assert state is not None
    seq = journal.stream_head("agent/" + agent_id)
    journal.save_snapshot(Snapshot("agent/" + agent_id, seq, encode_snapshot(state)))
    return seq


def test_recovery_past_an_unusable_snapshot_keeps_the_publications_made_before_it(tmp_path: Path) -> None:
    # replay_agent: a snapshot that cannot be used "is passed over, logged: the events
    # are the truth", with the task contexts published to the agent. Recovery reads the
    # runtime stream once, from where the earliest replay starts (replay_start: the
    # snapshot's seq, not decoded); a replay that must start before that reads the
    # stream itself ("A replay that must start before ``after`` reads the stream itself").
    path = tmp_path / "j"
    _write(
        path,
        [AgentSpawned(at=1.0, agent="a", task_id="t", task_context={"goal": "spawned"})],
        [TaskContextPublished(at=2.0, task_id="t", context={"goal": "published"}, agents=("a",))],  # seq 2
        [PrivateSet(at=3.0, agent="a", key="k", value=1)],
        [PrivateSet(at=4.0, agent="a", key="k", value=2)],  # seq 4
    )
    with Journal.open(path) as journal:
        journal.save_snapshot(Snapshot("agent/a", 4, b"\xc0"))  # its hash matches; it does not decode
        assert _core.replay_start(journal, "agent/a") == 4

    with Runtime.open(path, clock=FakeClock(), allow_unverified=True) as runtime:
        agent = runtime.agent("a")
        assert (agent.task_context(), agent.private("k")) == ({"goal": "published"}, 2)


@pytest.mark.parametrize("order", ["set, then published", "published, then set"])
def test_replay_from_a_snapshot_applies_only_what_follows_it(tmp_path: Path, order: str) -> None:
    # replay_agent "Starts from the latest snapshot ... then applies the agent's own
    # events and the task contexts published to it, in seq order": what the snapshot
    # covers is not applied again, or an earlier task context would win over a later one.
    own = TaskContextSet(at=2.0, agent="a", context={"goal": "set"})
    published = TaskContextPublished(at=2.0, task_id="t", context={"goal": "published"}, agents=("a",))
    first, second = (own, published) if order == "set, then published" else (published, own)
    path = tmp_path / "j"
    _write(
        path,
        [AgentSpawned(at=1.0, agent="a", task_id="t", task_context={"goal": "spawned"})],
        [first],
        [second],
        [PrivateSet(at=3.0, agent="a", key="k", value=1)],  # seq 4, a's last
    )
    with Journal.open(path) as journal:
        events_alone = replay_agent(journal, "a", from_snapshot=False)
        assert _save_faithful_snapshot(journal, "a") == 4
        via_snapshot = replay_agent(journal, "a")
        via_publications = replay_agent(journal, "a", published=_core.publications(journal, after=4))
        problem = snapshot_problem(journal, "a")

    assert events_alone is not None
    assert via_snapshot is not None
    assert via_publications is not None
    expected = second.context
    assert (events_alone.task_context, events_alone.events) == (expected, 3)  # a publication is not its own
    for state in (via_snapshot, via_publications):
        assert (state.task_context, state.private, state.events) == (expected, {"k": 1}, events_alone.events)
    assert problem is None
    with Runtime.open(path, clock=FakeClock()) as runtime:
        assert runtime.agent("a").task_context() == expected


class _Unregistered:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        pass


def test_an_unregistered_instances_class_is_logged_once_not_at_every_spawn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Core.behavior_name: "An instance of a class that is not registered runs all the
    # same, and journals its class's qualified name (``module.QualName``, logged once per class)"
    caplog.set_level(logging.WARNING, logger="cogfabric")
    with Runtime.open(None, clock=FakeClock()) as runtime:
        for n in range(3):
            runtime.spawn(f"s{n}", behavior=_Unregistered())
        assert runtime.agents() == ["s0", "s1", "s2"]
    said = [r.getMessage() for r in caplog.records if "is not registered: it runs" in r.getMessage()]
    expected = (
        f"behavior instance of {__name__}._Unregistered is not registered: it runs, but a reopen "
        "cannot reattach it (pass behaviors={name: class} to Runtime.open)"
    )
    assert said == [expected]


class _Handles:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        pass


def test_a_ctrl_c_in_a_behavior_factory_during_a_reopen_stops_the_open(tmp_path: Path) -> None:
    # Core.make_behavior: a BaseException out of a factory on "the caller's own thread
    # (a spawn, a reopen): a Ctrl-C must stop it", not leave the agent without a behavior
    path = tmp_path / "j"
    with Runtime.open(path, clock=FakeClock(), behaviors={"b": _Handles}) as runtime:
        runtime.spawn("a", behavior="b")

    def interrupted() -> _Handles:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Runtime.open(path, clock=FakeClock(), behaviors={"b": interrupted})
    with Runtime.open(path, clock=FakeClock(), behaviors={"b": _Handles}) as runtime:  # not left locked
        assert runtime.agents() == ["a"]


def test_replay_to_a_seq_before_the_snapshot_shows_the_agent_as_it_was_then(tmp_path: Path) -> None:
    # replay_agent: "as it was at seq ``until``", starting "from the latest snapshot at
    # or before ``until``": a snapshot of later changes is no start for an earlier seq
    path = tmp_path / "j"
    _write(
        path,
        [AgentSpawned(at=1.0, agent="a")],
        *([PrivateSet(at=2.0, agent="a", key="k", value=i)] for i in range(1, 5)),  # seqs 2..5
    )
    with Journal.open(path) as journal:
        assert _save_faithful_snapshot(journal, "a") == 5
        then = [replay_agent(journal, "a", until=at) for at in range(1, 6)]

    assert [None if s is None else s.private for s in then] == [{}, {"k": 1}, {"k": 2}, {"k": 3}, {"k": 4}]


def test_replay_to_a_seq_with_the_publications_read_once_leaves_out_later_ones(tmp_path: Path) -> None:
    # replay_agent "as it was at seq ``until``", with ``published``: "the runtime
    # stream's publications (``publications``), read once for many agents", here to
    # the end: one published after ``until`` is not the agent's yet
    path = tmp_path / "j"
    _write(
        path,
        [AgentSpawned(at=1.0, agent="a", task_id="t", task_context={"round": 0})],
        *([TaskContextPublished(at=2.0, task_id="t", context={"round": i}, agents=("a",))] for i in (1, 2)),
    )
    with Journal.open(path, readonly=True) as journal:
        published = _core.publications(journal)
        assert sorted(published.by_agent) == ["a"]
        then = [replay_agent(journal, "a", until=at, published=published) for at in (1, 2, 3)]

    assert [None if s is None else (s.task_context, s.publish_seq) for s in then] == [
        ({"round": 0}, 0),
        ({"round": 1}, 2),
        ({"round": 2}, 3),
    ]


def test_a_snapshot_holding_the_publication_that_is_the_journals_last_record_agrees(tmp_path: Path) -> None:
    # snapshot_flaw names "one naming a publication to the agent at a seq that holds
    # none": a publication at the last seq is one, and the snapshot that holds it (the
    # writer's, covering the agent's last record before it) is sound
    path = tmp_path / "j"
    _write(
        path,
        [AgentSpawned(at=1.0, agent="a", task_id="t")],
        [PrivateSet(at=2.0, agent="a", key="k", value=1)],  # seq 2, a's last
        [TaskContextPublished(at=3.0, task_id="t", context={"goal": "g"}, agents=("a",))],  # seq 3, the last
    )
    with Journal.open(path) as journal:
        state = replay_agent(journal, "a", from_snapshot=False)
        assert state is not None
        assert state.publish_seq == journal.last_seq == 3
        journal.save_snapshot(Snapshot("agent/a", 2, encode_snapshot(state)))
        snapshot = journal.load_snapshot("agent/a")
        assert snapshot is not None
        flaw = _core.snapshot_flaw(journal, snapshot)
        problem = snapshot_problem(journal, "a")

    assert (flaw, problem) == (None, None)


def test_snapshot_problem_names_a_snapshot_that_fails_its_hash(tmp_path: Path) -> None:
    # snapshot_problem: "Why ``agent_id``'s snapshot disagrees with its events, or None
    # when it agrees (or has none)": a damaged one is no agreement
    path = tmp_path / "j"
    _write(path, [AgentSpawned(at=1.0, agent="a")], [PrivateSet(at=2.0, agent="a", key="k", value="abcdef")])
    with Journal.open(path) as journal:
        _save_faithful_snapshot(journal, "a")
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"snapshots")) as txn:
        value = txn.get(b"agent/a")
        assert value is not None
        assert b"abcdef" in value
        txn.put(b"agent/a", bytes(value).replace(b"abcdef", b"abcdeX"))
    env.close()

    with Journal.open(path, readonly=True) as journal:
        problem = snapshot_problem(journal, "a")
        replayed = replay_agent(journal, "a")  # the events, logged, as recovery does

    assert problem is not None
    assert problem.startswith("its snapshot is damaged: ")
    assert replayed is not None
    assert replayed.private == {"k": "abcdef"}


def test_replay_applies_only_the_task_contexts_published_to_the_agent(tmp_path: Path) -> None:
    # replay_agent "applies the agent's own events and the task contexts published to
    # it": one published to another agent's task is not this one's
    path = tmp_path / "j"
    _write(
        path,
        [
            AgentSpawned(at=1.0, agent="a", task_id="t1", task_context={"goal": "a's"}),
            AgentSpawned(at=1.0, agent="b", task_id="t2", task_context={"goal": "b's"}),
        ],
        [TaskContextPublished(at=2.0, task_id="t2", context={"goal": "for t2"}, agents=("b",))],
    )
    with Journal.open(path, readonly=True) as journal:
        alone = [replay_agent(journal, agent, from_snapshot=False) for agent in ("a", "b")]
        at_three = [replay_agent(journal, agent, until=3) for agent in ("a", "b")]

    for states in (alone, at_three):
        assert [None if s is None else (s.task_context, s.publish_seq) for s in states] == [
            ({"goal": "a's"}, 0),
            ({"goal": "for t2"}, 3),
        ]


class _Mute:
    """No ``on_message``: it could handle no message."""


@pytest.mark.parametrize("journaled", [False, True])
def test_an_instance_without_on_message_refuses_the_spawn_before_anything_is_journaled(
    tmp_path: Path, journaled: bool
) -> None:
    # Core.live_behavior raises InvalidSpawnSpecError when "the instance has no ``on_message``"
    with Runtime.open(tmp_path / "j" if journaled else None, clock=FakeClock()) as runtime:
        with pytest.raises(InvalidSpawnSpecError, match=r"behavior _Mute has no on_message\(ctx, message\)"):
            runtime.spawn("a", behavior=_Mute())  # type: ignore[arg-type]  # what a user may pass
        assert runtime.agents() == []
        assert runtime._journal is None or runtime._journal.last_seq == 0
        runtime.spawn("a")  # the id is free


def test_publications_keep_each_agents_last_one_only(tmp_path: Path) -> None:
    # A publication replaces the task layer, as the agent's own TaskContextSet does:
    # only each agent's last one is kept (a helper's hunt: recovery and the audit
    # commands held every publication of the journal, 1.2 GiB for a million records)
    path = tmp_path / "j"
    _write(
        path,
        [AgentSpawned(at=0.0, agent=a, task_id="t") for a in "ab"],
        [
            TaskContextPublished(at=1.0, task_id="t", context={"round": i}, agents=tuple("ab"))
            for i in range(50)
        ],
        [TaskContextPublished(at=2.0, task_id="t", context={"round": "b's"}, agents=("b",))],
    )
    with Journal.open(path, readonly=True) as journal:
        published = _core.publications(journal)
        states = {a: replay_agent(journal, a, published=published) for a in "ab"}

    assert {a: [r.seq for r in published.by_agent[a]] for a in "ab"} == {"a": [52], "b": [53]}
    assert {a: (s.task_context, s.publish_seq) for a, s in states.items() if s is not None} == {
        "a": ({"round": 49}, 52),
        "b": ({"round": "b's"}, 53),
    }


@pytest.mark.parametrize("seed", range(20))
def test_replay_with_the_last_publications_equals_replay_reading_the_stream(
    tmp_path: Path, seed: int
) -> None:
    # random spawns, kills, own task contexts, publications and private values, replayed
    # to every seq: with publications() read once (last ones only) as without
    rng = random.Random(seed)
    events: list[Event] = []
    for i in range(rng.randint(5, 60)):
        agent = rng.choice("ab")
        kind = rng.random()
        if kind < 0.15:
            events.append(AgentSpawned(at=float(i), agent=agent, task_id="t", task_context={"spawn": i}))
        elif kind < 0.22:
            events.append(AgentKilled(at=float(i), agent=agent))
        elif kind < 0.4:
            events.append(TaskContextSet(at=float(i), agent=agent, context={"set": i}))
        elif kind < 0.75:
            targets = tuple(sorted(rng.sample("abc", rng.randint(1, 3))))
            events.append(TaskContextPublished(at=float(i), task_id="t", context={"pub": i}, agents=targets))
        else:
            events.append(PrivateSet(at=float(i), agent=agent, key=f"k{i % 3}", value=i))
    _write(tmp_path / "j", events)
    with Journal.open(tmp_path / "j", readonly=True) as journal:
        last = journal.last_seq
        for after in (0, rng.randint(0, last)):
            published = _core.publications(journal, after=after)
            for agent in "ab":
                for until in (None, *range(1, last + 1)):
                    alone = replay_agent(journal, agent, until=until, from_snapshot=False)
                    via = replay_agent(journal, agent, until=until, from_snapshot=False, published=published)
                    assert (None if alone is None else encode_snapshot(alone)) == (
                        None if via is None else encode_snapshot(via)
                    ), (agent, until, after)


def test_a_replay_past_what_publications_read_reads_the_later_ones_itself(tmp_path: Path) -> None:
    # publications read once, then a writer appends one more: a replay to the new last
    # seq used the stale read and missed it
    path = tmp_path / "j"
    _write(
        path,
        [AgentSpawned(at=0.0, agent="a", task_id="t")],
        [TaskContextPublished(at=1.0, task_id="t", context={"round": 1}, agents=("a",))],
    )
    with Journal.open(path) as journal:
        published = _core.publications(journal)
        journal.append([TaskContextPublished(at=2.0, task_id="t", context={"round": 2}, agents=("a",))])
        state = replay_agent(journal, "a", published=published)

    assert state is not None
    assert (state.task_context, state.publish_seq) == ({"round": 2}, 3)


def test_publications_read_to_a_seq_keep_none_published_after_it(tmp_path: Path) -> None:
    # publications: "Read the runtime stream once (``after < seq <= until``)"; a replay
    # to that seq with them agrees with one reading the stream itself
    path = tmp_path / "j"
    _write(
        path,
        [AgentSpawned(at=1.0, agent="a", task_id="t")],
        *([TaskContextPublished(at=2.0, task_id="t", context={"round": i}, agents=("a",))] for i in (1, 2)),
    )
    with Journal.open(path, readonly=True) as journal:
        published = _core.publications(journal, until=2)
        via = replay_agent(journal, "a", until=2, published=published)
        alone = replay_agent(journal, "a", until=2)

    assert (published.until, {a: [r.seq for r in rs] for a, rs in published.by_agent.items()}) == (
        2,
        {"a": [2]},
    )
    assert via is not None
    assert alone is not None
    assert (via.task_context, via.publish_seq) == (alone.task_context, alone.publish_seq) == ({"round": 1}, 2)
