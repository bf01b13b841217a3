"""``Runtime.context_views`` / ``cognitive_states`` under concurrent messages, lifecycle calls and kills.

An idle agent is read on the caller's thread under its lock (``AgentActor.read_now``),
not through its mailbox. These tests drive agents whose behaviors change their state
in several steps, keeping an invariant that holds only between two messages (private
``a == b``; cognitive ``working_memory == decision``), while other threads send,
publish, suspend, resume, recover, kill, spawn and change a kept ``ctx``, and readers
(a plain thread and an agent's behavior) read every agent in a loop. Every view must
satisfy the invariant, never go back behind a publication that returned before the
read began, and be a copy: a reader mutates what it got, and no later read shows it.
"""

from __future__ import annotations

import random
import sys
import threading
from typing import TYPE_CHECKING

import pytest

import cogfabric as cf
from tests.test_ask_kill_race_s56 import called_as_the_kill_ends_the_actor
from tests.test_rounds_s55_h10 import WAIT, _open

if TYPE_CHECKING:
    from pathlib import Path

SWITCH = 1e-5
"""The interpreter's switch interval during a storm (seconds; Python's default is 0.005)."""
STEADY = [f"p{i}" for i in range(6)]
"""Agents that live through the whole storm (task "t": publications reach them)."""


def _spin(n: int) -> int:
    """Some pure-Python work between two steps: the GIL switches threads meanwhile."""
    total = 0
    for i in range(n):
        total += i
    return total


class Pair:
    """Each message: ``a`` then ``b`` to the payload, and the cognitive state in two steps too."""

    kept: dict[str, cf.AgentContext] = {}  # noqa: RUF012 - the storm's control thread reads it

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:
        Pair.kept[ctx.agent_id] = ctx
        n = message.payload
        if n == "boom":
            msg = "fails before it changes anything"
            raise RuntimeError(msg)
        value = {"n": n, "items": [n, str(n)]}
        ctx.set_private("a", value)
        _spin(300)
        old = ctx.cognitive_state()
        ctx.set_cognitive_state(cf.CognitiveState(working_memory=value, decision=old.decision))
        _spin(300)
        ctx.set_private("b", value)
        ctx.set_cognitive_state(cf.CognitiveState(working_memory=value, decision=value))


class ReaderAgent:
    """Reads the steady agents from its behavior (another agent's thread) and checks them."""

    def __init__(self, storm: Storm) -> None:
        self.storm = storm

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> None:  # noqa: ARG002
        self.storm.read_once("behavior", STEADY)


class Storm:
    """The threads of one storm and what they found."""

    def __init__(self, rt: cf.Runtime, seed: int, messages: int) -> None:
        self.rt = rt
        self.seed = seed
        self.messages = messages
        self.floor = -1
        """The last round whose publication returned: a read begun after it shows it or a later one."""
        self.done = threading.Event()
        self.problems: list[str] = []
        self.victim = "v0"
        """The agent the control thread kills next (then spawns the next one)."""
        self.reads = 0
        self.lock = threading.Lock()
        self.read_done = threading.Condition(self.lock)

    def after_a_read(self) -> None:
        """Wait for the reader thread's next read: messages and reads interleave, whatever the speeds."""
        with self.lock:
            seen = self.reads
            self.read_done.wait_for(lambda: self.reads > seen or self.done.is_set(), WAIT)

    def problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text)

    def check_view(self, where: str, agent_id: str, view: cf.ContextView, floor: int) -> None:
        private = view.private
        if private.get("a") != private.get("b"):
            self.problem(f"{where}: {agent_id} private a != b: {dict(private)}")
        if agent_id in STEADY:
            shown = view.task_shared.get("round", -1)
            if shown < floor:
                self.problem(f"{where}: {agent_id} shows round {shown} after round {floor} was published")
        a = private.get("a")
        if isinstance(a, dict):
            a["items"].append("mutated by a reader")  # a copy: no later read may show it
            a["n"] = "mutated"
        view.task_shared.get("extra", {}).clear()

    def check_state(self, where: str, agent_id: str, state: cf.CognitiveState) -> None:
        if state.working_memory != state.decision:
            self.problem(f"{where}: {agent_id} working_memory != decision: {state!r}")
        if isinstance(state.working_memory, dict):
            state.working_memory["items"].append("mutated by a reader")

    def read_once(self, where: str, agent_ids: list[str] | None = None) -> None:
        floor = self.floor
        try:
            views = self.rt.context_views(agent_ids)
            states = self.rt.cognitive_states(agent_ids)
        except cf.RuntimeClosedError:
            return
        except Exception as exc:  # noqa: BLE001 - every unexpected error is a finding
            self.problem(f"{where}: {type(exc).__name__}: {exc}")
            return
        for agent_id, view in views.items():
            self.check_view(where, agent_id, view, floor)
        for agent_id, state in states.items():
            self.check_state(where, agent_id, state)
        if where == "reader":
            with self.lock:
                self.reads += 1
                self.read_done.notify_all()

    def drive(self) -> None:
        rng = random.Random(self.seed)
        bus = self.rt.bus
        try:
            for n in range(self.messages):
                if rng.random() < 0.4:
                    self.after_a_read()
                to = rng.choice([*STEADY, "v"])
                payload: object = "boom" if rng.random() < 0.03 else n
                try:
                    if to == "v":
                        bus.send("driver", self.victim, "m", payload)
                    else:
                        bus.send("driver", to, "m", payload)
                except cf.AgentNotFoundError:
                    pass  # the victim was killed meanwhile
                if n % 25 == 0:
                    bus.send("driver", "reader", "read", None)
        except Exception as exc:  # noqa: BLE001
            self.problem(f"driver: {type(exc).__name__}: {exc}")
        finally:
            self.done.set()

    def control(self) -> None:
        rng = random.Random(self.seed + 1)
        rt = self.rt
        lives = 0
        expected = (
            cf.AgentRunningError,  # a recover while its behavior runs
            cf.AgentNotSuspendedError,  # a resume refused at once while its behavior runs
            cf.AgentNotFoundError,  # the victim, killed meanwhile
        )
        try:
            rnd = 0
            while not self.done.is_set():
                self.after_a_read()
                what = rng.randrange(6)
                target = rng.choice(STEADY)
                try:
                    if what == 0:
                        rt.publish_task_context("t", {"round": rnd, "extra": {"k": [rnd]}})
                        self.floor = rnd
                        rnd += 1
                    elif what == 1:
                        rt.suspend(target)
                        rt.resume(target)
                    elif what == 2:
                        value = {"n": "recovered", "items": []}
                        rt.recover(target, cf.CognitiveState(working_memory=value, decision=value))
                    elif what == 3:
                        old = self.victim
                        lives += 1
                        rt.kill(old)
                        self.victim = f"v{lives}"
                        rt.spawn(self.victim, task_id="v", behavior="pair")
                    elif what == 4 and (ctx := Pair.kept.get(target)) is not None:
                        ctx.set_private("kept", rnd)  # one step: off a message, under the lock
                    else:
                        self.read_once("control")
                except expected:
                    pass
        except Exception as exc:  # noqa: BLE001
            self.problem(f"control: {type(exc).__name__}: {exc}")

    def read_loop(self) -> None:
        while not self.done.is_set():
            self.read_once("reader")
        self.read_once("reader")
        with self.lock:
            self.read_done.notify_all()


def run_storm(tmp_path: Path, mode: str, seed: int, messages: int) -> Storm:
    """One storm; returns what it found (``problems``) once every thread ended and the agents settled."""
    Pair.kept = {}
    switch = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH)  # threads switch within a message's steps, not only between messages
    try:
        return _storm(tmp_path, mode, seed, messages)
    finally:
        sys.setswitchinterval(switch)


def _storm(tmp_path: Path, mode: str, seed: int, messages: int) -> Storm:
    with _open(tmp_path, mode, behaviors={"pair": Pair}) as rt:
        storm = Storm(rt, seed, messages)
        rt.spawn_many([{"agent_id": a, "task_id": "t", "behavior": "pair"} for a in STEADY])
        rt.spawn("v0", task_id="v", behavior="pair")
        rt.spawn("reader", behavior=ReaderAgent(storm))
        threads = [
            threading.Thread(target=storm.drive, name="storm-driver"),
            threading.Thread(target=storm.control, name="storm-control"),
            threading.Thread(target=storm.read_loop, name="storm-reader"),
        ]
        try:
            for thread in threads:
                thread.start()
        finally:
            for thread in threads:
                thread.join(60)
        assert not any(thread.is_alive() for thread in threads)
        rt.settle(WAIT)
        views = rt.context_views()
        assert views == {a: rt.agent(a).context_view() for a in rt.agents()}
        for agent_id, view in views.items():
            storm.check_view("end", agent_id, view, storm.floor)
        assert storm.reads > 0
    return storm


@pytest.mark.parametrize("mode", ["memory", "batch", "sync"])
def test_every_view_read_while_agents_change_holds_the_between_messages_invariant_and_is_a_copy(
    tmp_path: Path, mode: str
) -> None:
    storm = run_storm(tmp_path, mode, seed=56, messages=120)
    assert storm.problems == []


@pytest.mark.parametrize("every", [True, False])
def test_a_read_asked_as_the_agents_kill_stops_its_actor_is_not_lost_behind_the_stop(
    monkeypatch: pytest.MonkeyPatch, every: bool
) -> None:
    """Pykka's ask checks that the actor lives, then queues: a stop between the two loses the message.

    Reproduced by holding the reader between the check and the queueing until the kill
    could end the actor. The read is queued while the agent is still its id's (under the
    runtime's lock, as ``_tell_current`` tells), before the kill's stop, and answered,
    rather than waited for until the timeout.
    """
    # the kill's own ask waits for the runtime's lock, which the read holds while it
    # queues (``_ask_current``): the read goes first and is answered, not lost
    rt, _, views = called_as_the_kill_ends_the_actor(
        monkeypatch,
        lambda rt, _handle: rt.context_views(timeout=2.0) if every else rt.context_views(["a"], timeout=2.0),
    )
    try:
        assert views == {"a": cf.ContextView({}, {})}
        assert rt.agents() == []
        rt.settle(WAIT)
    finally:
        rt.close()
