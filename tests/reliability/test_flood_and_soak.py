"""Flooding one agent from 100 threads, and 8 threads of random operations against replay."""

from __future__ import annotations

import random
import threading
import tracemalloc
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from cogfabric.actors import (
    AgentContext,
    Config,
    FakeClock,
    JournalConfig,
    MailboxFullError,
    Runtime,
    RuntimeConfig,
)
from cogfabric.events import IpcDelivered, IpcMessage

if TYPE_CHECKING:
    from pathlib import Path


class Slow:
    """Counts what it handles, once the gate opens: until then the mailbox can only fill."""

    handled: ClassVar[list[int]] = []
    gate: ClassVar[threading.Event] = threading.Event()

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
        assert Slow.gate.wait(60)
        Slow.handled.append(message.payload)


def _flood(tmp_path: Path, producers: int, per_producer: int) -> None:
    Slow.handled = []
    Slow.gate = threading.Event()
    config = Config(
        journal=JournalConfig(durability="batch"), runtime=RuntimeConfig(mailbox_size=50, call_timeout=0.05)
    )
    accepted: list[int] = []
    refused: list[type[BaseException]] = []  # types: a kept exception would keep its frames
    lock = threading.Lock()
    with Runtime.open(tmp_path / "j", config=config, clock=FakeClock(), behaviors={"slow": Slow}) as rt:
        rt.spawn("sink", behavior="slow")
        barrier = threading.Barrier(producers, timeout=30)

        def produce(p: int) -> None:
            barrier.wait()
            for i in range(per_producer):
                n = p * per_producer + i
                try:
                    rt.bus.send(f"p{p}", "sink", "load", n)
                except Exception as exc:  # noqa: BLE001 - every error is checked below
                    with lock:
                        refused.append(type(exc))
                else:
                    with lock:
                        accepted.append(n)

        tracemalloc.start()
        threads = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        Slow.gate.set()
        # call_timeout is short for the flood's refusals, not for this: the sink's full
        # mailbox and the journal's commits of it took longer than 0.05 s on a loaded machine
        rt.flush(60)
        assert rt._journal is not None
        delivered = {r.event.message_id for r in rt._journal.read() if isinstance(r.event, IpcDelivered)}

    assert not any(t.is_alive() for t in threads)
    assert set(refused) <= {MailboxFullError}, set(refused)
    assert refused, "the flood never filled the mailbox"
    assert sorted(Slow.handled) == sorted(accepted)
    assert len(delivered) == len(accepted)
    assert peak < 64 * 2**20, f"peak traced memory {peak / 2**20:.1f} MiB"


def test_a_flood_from_100_threads_is_bounded_typed_and_loses_nothing_accepted(tmp_path: Path) -> None:
    _flood(tmp_path, producers=100, per_producer=20)


@pytest.mark.slow
def test_a_long_flood(tmp_path: Path) -> None:
    _flood(tmp_path, producers=100, per_producer=500)


def _views(rt: Runtime) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for agent_id in rt.agents():
        view = rt.agent(agent_id).context_view()
        out[agent_id] = (dict(view.task_shared), dict(view.private), rt.agent(agent_id).cognitive_state())
    return out


def _soak(tmp_path: Path, threads: int, operations: int, durability: str) -> None:
    config = Config(journal=JournalConfig(durability=durability, snapshot_interval=7))  # type: ignore[arg-type]
    path = tmp_path / "j"
    with Runtime.open(path, config=config, clock=FakeClock()) as rt:
        agents = [rt.spawn(f"a{i}", task_id="t").id for i in range(4)]
        sessions = [rt.memory.create_session("u", agent_id=a) for a in agents]
        barrier = threading.Barrier(threads, timeout=30)
        errors: list[BaseException] = []

        def work(w: int) -> None:
            rng = random.Random(w)
            barrier.wait()
            try:
                for n in range(operations):
                    target = rng.choice(agents)
                    roll = rng.random()
                    if roll < 0.5:
                        rt.agent(target).set_private(f"k{rng.randrange(5)}", [w, n])
                    elif roll < 0.7:
                        rt.agent(target).set_task_context({"w": w, "n": n})
                    elif roll < 0.75:
                        rt.publish_task_context("t", {"published": n})
                    else:
                        rt.memory.add_message(rng.choice(sessions), "user", f"{w}-{n}")
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        pool = [threading.Thread(target=work, args=(w,)) for w in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(timeout=300)
        rt.flush()
        live = _views(rt)
        messages = {s: rt.memory.get_messages(s) for s in sessions}

    assert errors == []
    with Runtime.open(path, config=config, clock=FakeClock()) as rt:
        assert _views(rt) == live
        assert {s: rt.memory.get_messages(s) for s in sessions} == messages


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_eight_threads_of_random_operations_replay_to_the_live_state(tmp_path: Path, durability: str) -> None:
    _soak(tmp_path, threads=8, operations=60, durability=durability)


@pytest.mark.slow
@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_long_soak(tmp_path: Path, durability: str) -> None:
    _soak(tmp_path, threads=8, operations=2000, durability=durability)
