"""A search researcher's rollbacks: checkpoint, try a branch, ``recover``, try another.

Thousands of times per agent, from the handle and from a behavior's ``ctx``, in sync and
batch durability, with reopens in between; the branches audited afterwards with
``cogfabric replay --agent [--at N]``. Pins what such a user relies on: a checkpoint is
a copy both ways, a reopen lands on the branch the live runtime was on, each recover is
one event, replay at any seq shows the branch there, and nothing grows per rollback.
"""

from __future__ import annotations

import gc
import json
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

import cogfabric as cf
from cogfabric import CognitiveState
from cogfabric.cli import main
from cogfabric.events import AgentRecovered
from cogfabric.store import Journal, LmdbJournal, Record

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

DURABILITIES = ["sync", "batch"]


def _config(durability: str, snapshot_interval: int = 200) -> dict[str, Any]:
    return {"journal": {"durability": durability, "snapshot_interval": snapshot_interval}}


class _Search:
    """``explore`` (payload n): checkpoint, try n branches each rolled back with
    ``ctx.set_cognitive_state``, keep the best; ``back``: go to ``ctx.last_checkpoint()``."""

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> Any:
        if message.topic == "explore":
            root = ctx.checkpoint_cognitive()
            best = (-1, -1)
            for action in range(message.payload):
                ctx.set_cognitive_state(
                    CognitiveState(decision=action, working_memory=[*root.working_memory, action])
                )
                best = max(best, ((action * 7) % 11, action))
                ctx.set_cognitive_state(root)  # roll back
                root.working_memory.append("scribble")  # the caller's copy: never the agent's
                assert ctx.cognitive_state() == CognitiveState(
                    schema_version=1, decision=root.decision, working_memory=root.working_memory[:-1]
                )
                root.working_memory.pop()
            chosen = best[1]
            ctx.set_cognitive_state(
                CognitiveState(decision=chosen, working_memory=[*root.working_memory, chosen])
            )
            return chosen
        if message.topic == "back":
            last = ctx.last_checkpoint()
            assert last is not None
            ctx.set_cognitive_state(last)
        return ctx.cognitive_state().decision


def _ask(rt: cf.Runtime, topic: str, payload: object = None) -> Any:
    return rt.bus.request("driver", "a", topic, payload, 30).payload


def _types(path: Path) -> Counter[str]:
    with Journal.open(path, readonly=True) as journal:
        return Counter(type(record.event).__name__ for record in journal.read())


@pytest.mark.parametrize("durability", DURABILITIES)
def test_a_checkpoint_and_a_recovered_state_are_copies_both_ways(tmp_path: Path, durability: str) -> None:
    with cf.Runtime.open(tmp_path / "j", config=_config(durability)) as rt:
        a = rt.spawn("a")
        given = CognitiveState(decision="root", working_memory={"path": [1, 2]})
        a.set_cognitive_state(given)
        given.working_memory["path"].append("given later")
        checkpoint = a.checkpoint_cognitive()
        checkpoint.working_memory["path"].append("returned later")
        assert a.cognitive_state().working_memory == {"path": [1, 2]}

        a.set_cognitive_state(CognitiveState(decision="branch"))
        rt.recover("a", checkpoint)
        checkpoint.working_memory["path"].append("after the recover")
        assert a.cognitive_state().working_memory == {"path": [1, 2, "returned later"]}  # what was given
        last = rt.last_checkpoint("a")
        assert last is not None
        assert last.working_memory == {"path": [1, 2]}  # the journal's, not the caller's copy
        last.working_memory["path"].clear()
        assert rt.last_checkpoint("a") == CognitiveState(
            schema_version=1, decision="root", working_memory={"path": [1, 2]}
        )


@pytest.mark.parametrize("durability", DURABILITIES)
def test_a_reopen_lands_on_the_branch_the_live_runtime_was_on(tmp_path: Path, durability: str) -> None:
    path = tmp_path / "j"
    config = _config(durability, snapshot_interval=3)  # snapshots land between rollbacks
    for round_ in range(3):
        with cf.Runtime.open(path, config=config, behaviors={"search": _Search}) as rt:
            a = rt.agent("a") if round_ else rt.spawn("a", behavior="search")
            if not round_:
                a.set_cognitive_state(CognitiveState(decision="start", working_memory=[]))
            root = a.checkpoint_cognitive()
            for branch in range(7):
                rt.recover("a", root)  # from the handle
                a.set_cognitive_state(CognitiveState(decision=f"{round_}.{branch}", working_memory=[branch]))
            rt.suspend("a")
            rt.recover("a", root)
            assert a.lifecycle == cf.AgentState.IDLE
            assert _ask(rt, "explore", 5) == 3  # from the behavior
            live = a.cognitive_state()
        with cf.Runtime.open(path, config=config, behaviors={"search": _Search}) as rt:
            assert rt.agent("a").cognitive_state() == live
            assert rt.agent("a").lifecycle == cf.AgentState.IDLE
            assert _ask(rt, "back") == root.decision  # explore's checkpoint: the round's root


@pytest.mark.parametrize("durability", DURABILITIES)
def test_each_recover_is_one_event_and_snapshots_come_every_interval(tmp_path: Path, durability: str) -> None:
    path = tmp_path / "j"
    with cf.Runtime.open(path, config=_config(durability, snapshot_interval=10)) as rt:
        a = rt.spawn("a")
        a.set_cognitive_state(CognitiveState(decision="root"))
        root = a.checkpoint_cognitive()
        for _ in range(47):
            rt.recover("a", root)
    assert _types(path) == {
        "AgentSpawned": 1,
        "CognitiveStateSet": 1,
        "CheckpointTaken": 1,
        "AgentRecovered": 47,
    }
    with Journal.open(path, readonly=True) as journal:
        snapshot = journal.load_snapshot("agent/a")
    assert snapshot is not None
    assert snapshot.seq == 50  # the agent's 50th event: every 10th of its events


def test_replay_at_each_seq_shows_the_branch_there(tmp_path: Path) -> None:
    path = tmp_path / "j"
    expected: list[tuple[str, object, int]] = []  # (lifecycle, decision, version) after each seq
    with cf.Runtime.open(path, config=_config("sync", snapshot_interval=3)) as rt:
        a = rt.spawn("a")
        expected.append(("IDLE", None, 0))  # a spawn with no prior: version 0, as the original
        a.set_cognitive_state(CognitiveState(decision="root"))
        expected.append(("IDLE", "root", 1))
        root = a.checkpoint_cognitive()
        expected.append(("IDLE", "root", 1))
        rt.suspend("a")
        expected.append(("SUSPENDED", "root", 1))
        rt.recover("a", CognitiveState(schema_version=0, decision="legacy"))  # upgraded once, stored as 1
        expected.append(("IDLE", "legacy", 1))
        for branch in range(4):
            rt.recover("a", root)
            expected.append(("IDLE", "root", 1))
            a.set_cognitive_state(CognitiveState(decision=branch))
            expected.append(("IDLE", branch, 1))
    runner = CliRunner()
    for seq, (lifecycle, decision, version) in enumerate(expected, start=1):
        shown = runner.invoke(main, ["replay", str(path), "--agent", "a", "--at", str(seq), "--json"])
        assert shown.exit_code == 0, shown.output
        view = json.loads(shown.output)
        assert (view["lifecycle"], view["cognitive"]["decision"], view["cognitive"]["schema_version"]) == (
            lifecycle,
            decision,
            version,
        ), seq
        assert view["checkpoints"]["taken"] == (seq >= 3)
    with Journal.open(path, readonly=True) as journal:
        recovered = [r.event for r in journal.read() if isinstance(r.event, AgentRecovered)]
    assert [e.cognitive.schema_version for e in recovered] == [1] * 5
    assert [e.has_checkpoint for e in recovered] == [False] * 5  # the state's checkpoint field, None here


@pytest.mark.parametrize("durability", DURABILITIES)
def test_last_checkpoint_across_a_kill_a_spawn_again_and_a_reopen(tmp_path: Path, durability: str) -> None:
    path = tmp_path / "j"
    with cf.Runtime.open(path, config=_config(durability)) as rt:
        a = rt.spawn("a")
        a.set_cognitive_state(CognitiveState(decision="life 1"))
        a.checkpoint_cognitive()  # batch: not flushed; the kill commits it first
        a.set_cognitive_state(CognitiveState(decision="not checkpointed"))
        rt.kill("a")
        first = rt.last_checkpoint("a")
        assert first is not None
        assert first.decision == "life 1"
        again = rt.spawn("a")
        assert again.cognitive_state() == CognitiveState()  # nothing of the first life
        assert rt.last_checkpoint("a") == first  # but its checkpoint
        rt.recover("a", first)
        again.set_cognitive_state(CognitiveState(decision="life 2"))
        again.checkpoint_cognitive()
    with cf.Runtime.open(path, config=_config(durability)) as rt:
        second = rt.last_checkpoint("a")
        assert second is not None
        assert second.decision == "life 2"
        rt.kill("a")
        with pytest.raises(cf.AgentNotFoundError):
            rt.recover("a", second)
        assert rt.last_checkpoint("a") == second


def test_recover_takes_idle_and_suspended_agents_and_resets_only_the_cognitive_state(tmp_path: Path) -> None:
    with cf.Runtime.open(tmp_path / "j") as rt:
        a = rt.spawn("a", task_context={"goal": "g"})
        a.set_private("visits", 1)
        rt.bus.subscribe("a", "news")
        root = a.checkpoint_cognitive()
        a.set_private("visits", 2)
        rt.suspend("a")
        rt.recover("a", root)
        assert a.lifecycle == cf.AgentState.IDLE
        # a rollback restores the cognitive state only: the layers and topics stay
        assert a.private("visits") == 2
        assert a.task_context() == {"goal": "g"}
        assert rt.bus.subscribers("news") == ["a"]
        with pytest.raises(cf.CognitiveStateSchemaVersionError, match="got 2, this code reads up to 1"):
            rt.recover("a", CognitiveState(schema_version=2))
        rt.retire("a")
        with pytest.raises(cf.AgentRetiredError):
            rt.recover("a", root)


class _Rollback:
    """Rolls agent ``b`` back to its latest checkpoint through the runtime."""

    runtime: cf.Runtime

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> Any:
        checkpoint = self.runtime.last_checkpoint("b")
        assert checkpoint is not None
        self.runtime.recover("b", checkpoint)
        return f"{ctx.agent_id} {message.topic}"


def test_trace_shows_a_recover_a_behavior_made_through_the_runtime_as_a_root(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with cf.Runtime.open(path, behaviors={"rollback": _Rollback}) as rt:
        _Rollback.runtime = rt
        rt.spawn("a", behavior="rollback")
        rt.spawn("b").checkpoint_cognitive()
        assert _ask(rt, "go") == "a go"
    with Journal.open(path, readonly=True) as journal:
        (seq,) = [r.seq for r in journal.read() if isinstance(r.event, AgentRecovered)]
    shown = CliRunner().invoke(main, ["trace", str(path), "--seq", str(seq)])
    assert shown.exit_code == 0, shown.output
    assert shown.output.startswith("caused by: nothing (a root)\n"), shown.output


def test_last_checkpoint_reads_every_rollback_since_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # README: keep the checkpoint you were given rather than read it back per rollback
    read: list[str] = []
    read_back = LmdbJournal.read_back

    def counted(self: LmdbJournal, stream: str, before: int | None = None) -> Iterator[Record]:
        for record in read_back(self, stream, before):
            read.append(type(record.event).__name__)
            yield record

    monkeypatch.setattr(LmdbJournal, "read_back", counted)
    with cf.Runtime.open(tmp_path / "j") as rt:
        a = rt.spawn("a")
        root = a.checkpoint_cognitive()
        for _ in range(40):
            rt.recover("a", root)
        assert rt.last_checkpoint("a") == root
    assert read == ["AgentRecovered"] * 40 + ["CheckpointTaken"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("durability", "size"), [("batch", 2_500), ("sync", 500)]
)  # sync: one sync per change
def test_ten_thousand_rollbacks_grow_no_objects(tmp_path: Path, durability: str, size: int) -> None:
    path = tmp_path / "j"
    with cf.Runtime.open(path, config=_config(durability), behaviors={"search": _Search}) as rt:
        a = rt.spawn("a", behavior="search")
        a.set_cognitive_state(CognitiveState(decision="root", working_memory=list(range(20))))
        root = a.checkpoint_cognitive()

        def rollbacks(n: int) -> None:
            for branch in range(n):
                rt.recover("a", root)
                a.set_cognitive_state(CognitiveState(decision=branch, working_memory=root.working_memory))
            _ask(rt, "explore", n)  # n more rollbacks from the behavior's ctx
            _ask(rt, "explore", 1)  # a message's changes may stay referenced until the next one's
            rt.flush()
            gc.collect()
            counts.append(len(gc.get_objects()))

        counts: list[int] = []
        for n in (500, size, size, size, size):
            rollbacks(n)
        # 8 * size rollbacks since the first count (20,000 in batch durability): a leak of
        # one object per rollback would show
        assert max(counts[1:]) - counts[0] < 2_000, counts
    rounds = 500 + 4 * size
    types = _types(path)
    assert types["AgentRecovered"] == rounds
    assert types["CognitiveStateSet"] == 1 + rounds + (2 * rounds + 5) + (3 * 5)
