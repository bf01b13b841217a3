"""README's "From asyncio": each sentence of that paragraph, checked.

The runtime's calls block; an asyncio application runs them with ``asyncio.to_thread``
(or an executor of its own), and a behavior that wants a coroutine's result waits for
it on its own thread.
"""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pytest

import cogfabric as cf

if TYPE_CHECKING:
    from pathlib import Path

WAIT = 10.0


class Echo:
    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:
        ctx.set_private("last", message.payload)
        return message.payload


class Held:
    """Holds each message until ``release`` is set; ``entered`` says one is in hand."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:
        self.entered.set()
        self.release.wait(WAIT)
        ctx.set_private(f"handled-{message.payload}", True)
        return message.payload


def test_no_public_call_is_a_coroutine_function() -> None:
    for cls in (cf.Runtime, cf.Agent, cf.IpcBus, cf.MemoryManager, cf.JournaledLLM, cf.AgentContext):
        for name, member in inspect.getmembers(cls):
            if not name.startswith("_"):
                assert not inspect.iscoroutinefunction(member), f"{cls.__name__}.{name}"


def test_hundreds_of_to_thread_calls_at_once() -> None:
    async def main() -> None:
        rt = await asyncio.to_thread(cf.Runtime.open, None, behaviors={"echo": Echo})
        try:
            await asyncio.to_thread(
                rt.spawn_many, [{"agent_id": f"e{i}", "behavior": "echo"} for i in range(4)]
            )
            plain = await asyncio.to_thread(rt.spawn_many, [{"agent_id": f"p{i}"} for i in range(150)])
            replies = [
                asyncio.to_thread(rt.bus.request, "app", f"e{i % 4}", "t", i, timeout=WAIT)
                for i in range(150)
            ]
            changes = [asyncio.to_thread(agent.set_private, "k", i) for i, agent in enumerate(plain)]
            got = await asyncio.wait_for(asyncio.gather(*replies, *changes), WAIT)
            assert [m.payload for m in got[:150] if isinstance(m, cf.IpcMessage)] == list(range(150))
            assert await asyncio.to_thread(lambda: [a.private("k") for a in plain]) == list(range(150))
        finally:
            await asyncio.to_thread(rt.close)

    asyncio.run(main())


def test_a_cancelled_call_runs_to_its_end_once_begun_and_not_at_all_while_queued() -> None:
    held = Held()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        one = ThreadPoolExecutor(1)
        rt = await asyncio.to_thread(cf.Runtime.open, None)
        try:
            await asyncio.to_thread(rt.spawn, "h", behavior=held)
            begun = loop.run_in_executor(one, lambda: rt.bus.request("app", "h", "t", 1, timeout=WAIT))
            queued = loop.run_in_executor(one, lambda: rt.bus.request("app", "h", "t", 2, timeout=WAIT))
            assert await asyncio.to_thread(held.entered.wait, WAIT)
            begun.cancel()
            queued.cancel()
            # the executor's future is cancelled by a callback of the loop's: let it run
            assert all(
                isinstance(r, asyncio.CancelledError)
                for r in await asyncio.gather(begun, queued, return_exceptions=True)
            )
            held.release.set()
            await loop.run_in_executor(None, lambda: one.shutdown(wait=True))
            await asyncio.to_thread(rt.flush)
            view = await asyncio.to_thread(rt.agent("h").context_view)
            assert dict(view.private) == {"handled-1": True}  # the begun call ran, the queued one never did
        finally:
            held.release.set()
            await asyncio.to_thread(rt.close)

    asyncio.run(main())


def test_a_behavior_waits_for_a_coroutine_three_ways() -> None:
    async def lookup(x: object) -> str:
        await asyncio.sleep(0)
        return f"found {x}"

    loop_box: list[asyncio.AbstractEventLoop] = []

    class OwnLoop:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:  # noqa: ARG002
            return asyncio.run(lookup(message.payload))

    class OnAppLoop:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:  # noqa: ARG002
            return asyncio.run_coroutine_threadsafe(lookup(message.payload), loop_box[0]).result(WAIT)

    class Later:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:
            correlation_id = message.correlation_id
            assert correlation_id is not None

            async def answer() -> None:
                await asyncio.to_thread(ctx.reply, correlation_id, await lookup(message.payload))

            asyncio.run_coroutine_threadsafe(answer(), loop_box[0])
            return None

    async def main() -> None:
        loop_box.append(asyncio.get_running_loop())
        behaviors: dict[str, type[cf.Behavior]] = {"own": OwnLoop, "app": OnAppLoop, "later": Later}
        rt = await asyncio.to_thread(cf.Runtime.open, None, behaviors=behaviors)
        try:
            for name in behaviors:
                await asyncio.to_thread(rt.spawn, name, behavior=name)
                reply = await asyncio.to_thread(rt.bus.request, "app-main", name, "q", 7, timeout=WAIT)
                assert reply.payload == "found 7", name
        finally:
            await asyncio.to_thread(rt.close)

    asyncio.run(main())


def test_a_call_made_on_the_loop_stalls_a_behavior_that_waits_for_the_loop() -> None:
    loop_box: list[asyncio.AbstractEventLoop] = []

    class OnAppLoop:
        def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:  # noqa: ARG002
            return asyncio.run_coroutine_threadsafe(asyncio.sleep(0, "done"), loop_box[0]).result(0.3)

    async def main() -> None:
        loop_box.append(asyncio.get_running_loop())
        rt = await asyncio.to_thread(cf.Runtime.open, None, behaviors={"app": OnAppLoop})
        try:
            await asyncio.to_thread(rt.spawn, "a", behavior="app")
            with pytest.raises(cf.IpcHandlerError) as caught:
                rt.bus.request("main", "a", "q", timeout=WAIT)  # on the loop: the behavior's wait times out
            assert isinstance(caught.value.__cause__, TimeoutError)
        finally:
            await asyncio.to_thread(rt.close)

    asyncio.run(main())


def test_timeouts_share_one_class() -> None:
    assert asyncio.TimeoutError is TimeoutError
    assert issubclass(cf.ActorTimeoutError, TimeoutError)
    assert issubclass(cf.IpcTimeoutError, TimeoutError)


def test_close_from_the_loop_while_calls_are_in_flight() -> None:
    held = Held()

    async def main() -> None:
        config = {"runtime": {"call_timeout": 0.5}}
        rt = await asyncio.to_thread(cf.Runtime.open, None, behaviors={}, config=config)
        try:
            await asyncio.to_thread(rt.spawn, "h", behavior=held)
            asked = asyncio.create_task(asyncio.to_thread(rt.bus.request, "app", "h", "t", 1, timeout=WAIT))
            assert await asyncio.to_thread(held.entered.wait, WAIT)
            await asyncio.wait_for(asyncio.to_thread(rt.close), WAIT)  # gives the busy agent call_timeout
            with pytest.raises(cf.RuntimeClosedError):
                await asyncio.wait_for(asked, WAIT)
            with pytest.raises(cf.RuntimeClosedError):
                await asyncio.to_thread(rt.spawn, "late")
        finally:
            held.release.set()
            await asyncio.to_thread(rt.close)

    asyncio.run(main())


def test_a_runtime_left_open_when_asyncio_run_returns_is_closed_at_exit(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    child = textwrap.dedent(
        """
        import asyncio, sys
        import cogfabric as cf

        async def main() -> None:
            config = {"journal": {"durability": "batch"}}
            rt = await asyncio.to_thread(cf.Runtime.open, sys.argv[1], config=config)
            agent = await asyncio.to_thread(rt.spawn, "a")
            for i in range(50):
                await asyncio.to_thread(agent.set_private, f"k{i}", i)  # batch: not flushed

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", child, str(path)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    with cf.Runtime.open(path) as rt:
        agent = rt.agent("a")
        assert [agent.private(f"k{i}") for i in range(50)] == list(range(50))
