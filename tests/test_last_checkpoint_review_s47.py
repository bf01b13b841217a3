"""``Runtime.last_checkpoint`` in batch durability: fail-stop, worker threads, a kept ctx (review s47 h4)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from cogfabric import CognitiveState

if TYPE_CHECKING:
    from pathlib import Path

_WAIT = 30
_SMALL = {"durability": "batch", "map_size": 140 << 10, "max_map_size": 140 << 10}


def _close_failed(rt: cf.Runtime) -> None:
    """Close a runtime whose journal went fail-stop: close() reports the failure nobody was told of."""
    with pytest.raises(cf.JournalError):
        rt.close()


def test_a_behavior_reads_what_a_fail_stop_journal_holds_with_its_changes_still_batched(
    tmp_path: Path,
) -> None:
    # The docstring: once the journal is fail-stop "it reads what the journal holds".
    # The behavior's later changes wait in its outbox; handing them over raised.
    seen: dict[str, Any] = {}
    done = threading.Event()
    runtime: list[cf.Runtime] = []

    class FailsThenReads:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:  # noqa: ARG002
            try:
                ctx.set_private("big", "z" * 200_000)  # no commit can hold it
                with pytest.raises(cf.JournalError):
                    ctx.flush()  # fail-stop from here on
                ctx.checkpoint_cognitive()  # batched: the journal will never hold it
                seen["read"] = runtime[0].last_checkpoint(ctx.agent_id)
            except Exception as exc:  # noqa: BLE001 - the test reads it
                seen["error"] = exc
            finally:
                done.set()

    rt = cf.Runtime.open(
        tmp_path / "j", clock=cf.FakeClock(), config={"journal": _SMALL}, behaviors={"b": FailsThenReads}
    )
    try:
        runtime.append(rt)
        agent = rt.spawn("a", behavior="b")
        agent.set_cognitive_state(CognitiveState(decision="kept"))
        agent.checkpoint_cognitive()
        rt.flush()
        rt.bus.send("driver", "a", "go", None)
        assert done.wait(_WAIT)
    finally:
        _close_failed(rt)
    assert "error" not in seen, seen.get("error")
    assert seen["read"].decision == "kept"


def test_a_journal_that_fails_while_the_call_waits_for_it_is_read_as_it_stands(tmp_path: Path) -> None:
    rt = cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock(), config={"journal": _SMALL})
    try:
        agent = rt.spawn("a")
        agent.set_cognitive_state(CognitiveState(decision="kept"))
        agent.checkpoint_cognitive()
        rt.flush()
        writer = rt._core.writer
        assert writer is not None
        # Hold the writer, so the failing commit comes only once the call waits for it.
        busy, go = threading.Event(), threading.Event()

        def hold(_committed: bool) -> None:
            busy.set()
            go.wait(_WAIT)

        writer.submit((), want_ack=False, after=hold)
        assert busy.wait(_WAIT)
        agent.set_private("big", "z" * 200_000)  # batch: handed over; no commit can hold it
        flush = writer.flush

        def flush_then_go(timeout: float | None = None) -> None:
            go.set()
            flush(timeout)

        writer.flush = flush_then_go  # type: ignore[method-assign]
        try:
            last: object = rt.last_checkpoint("a")
        except cf.JournalError as exc:
            last = exc
    finally:
        _close_failed(rt)
    assert isinstance(last, CognitiveState), last
    assert last.decision == "kept"


def test_a_checkpoint_a_worker_thread_took_is_found_from_it(tmp_path: Path) -> None:
    # ctx.flush works "from a worker thread the behavior waits for, as from its own"
    seen: dict[str, Any] = {}
    done = threading.Event()
    runtime: list[cf.Runtime] = []

    class Worker:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:  # noqa: ARG002
            def work() -> None:
                ctx.set_cognitive_state(CognitiveState(decision="from the worker"))
                seen["taken"] = ctx.checkpoint_cognitive()
                seen["read"] = runtime[0].last_checkpoint(ctx.agent_id)

            try:
                worker = threading.Thread(target=work)
                worker.start()
                worker.join(_WAIT)
            finally:
                done.set()

    with cf.Runtime.open(
        tmp_path / "j", config={"journal": {"durability": "batch"}}, behaviors={"w": Worker}
    ) as rt:
        runtime.append(rt)
        rt.spawn("a", behavior="w")
        rt.bus.send("driver", "a", "go", None)
        assert done.wait(_WAIT)
    assert seen["read"] == seen["taken"]


def test_a_checkpoint_a_kept_ctx_took_while_its_agent_is_busy_is_found(tmp_path: Path) -> None:
    kept: list[cf.AgentContext] = []
    busy, release = threading.Event(), threading.Event()

    class Keeps:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:
            if message.topic == "keep":
                kept.append(ctx)
            else:
                busy.set()
                release.wait(_WAIT)

    with cf.Runtime.open(
        tmp_path / "j", config={"journal": {"durability": "batch"}}, behaviors={"k": Keeps}
    ) as rt:
        rt.spawn("a", behavior="k")
        rt.bus.send("driver", "a", "keep", None)
        rt.bus.send("driver", "a", "hold", None)
        try:
            assert busy.wait(_WAIT)
            ctx = kept[0]
            ctx.set_cognitive_state(CognitiveState(decision="kept ctx"))
            taken = ctx.checkpoint_cognitive()
            assert rt.last_checkpoint("a") == taken
        finally:
            release.set()
