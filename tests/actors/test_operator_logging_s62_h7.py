"""What an operator's log pipeline gets: one record per incident, not one per agent (helper h7, s62)."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric.actors import (
    ActorTimeoutError,
    AgentContext,
    Config,
    FakeClock,
    JournalConfig,
    Runtime,
    ScriptedProvider,
)
from tests.actors.test_close_and_flush import _config
from tests.actors.test_runtime_pins import _hand_the_writer_a_stalled_commit
from tests.actors.test_supervision import _short_call_timeout
from tests.test_chat_sessions_s61_h4 import _Chat

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.events import IpcMessage

WAIT = 30.0
LOST = "events it applied were not journaled"


class _Held:
    """Holds its message until the gate opens (a long LLM call, say), counting the agents that hold one."""

    def __init__(self, entered: threading.Semaphore, gate: threading.Event) -> None:
        self.entered, self.gate = entered, gate

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
        self.entered.release()
        assert self.gate.wait(WAIT)


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_close_that_gives_up_on_busy_agents_warns_once_of_what_they_could_not_journal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, durability: str
) -> None:
    # Each busy agent finishes its message after the writer stopped, its delivery
    # record (and in batch durability its changes) journaled nowhere: one warning
    # says so, naming the first agent; the others' records are at DEBUG, each naming
    # its agent, not a warning for each of hundreds of agents.
    entered, gate = threading.Semaphore(0), threading.Event()
    busy = 4
    rt = Runtime.open(
        tmp_path / "j",
        config=_config(durability, call_timeout=0.2),
        clock=FakeClock(),
        behaviors={"held": lambda: _Held(entered, gate)},
    )
    agents = rt.spawn_many([{"agent_id": f"busy-{i}", "behavior": "held"} for i in range(busy)])
    held = [rt._entry(agent.id).ref for agent in agents]
    for agent in agents:
        rt.bus.send("x", agent.id, "work")
    assert all(entered.acquire(timeout=WAIT) for _ in agents)
    caplog.set_level(logging.DEBUG, logger="cogfabric")
    try:
        rt.close()
    finally:
        gate.set()
    assert all(ref.actor_stopped.wait(WAIT) for ref in held)
    lost = [r for r in caplog.records if LOST in r.getMessage()]
    assert sorted(r.getMessage().split(":")[0] for r in lost) == [f"agent busy-{i}" for i in range(busy)]
    [warned] = [r for r in lost if r.levelno == logging.WARNING]
    assert "later ones, of any agent, are logged at DEBUG" in warned.getMessage()
    assert [r.levelno for r in lost].count(logging.DEBUG) == busy - 1
    # logged on the caller's thread, whose name is not the runtime's: the record names it
    assert f"runtime 'j': {busy} agent actors did not stop within 0.2 s" in caplog.text


class _Idle:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        pass


def _needs_an_argument(setting: str) -> _Idle:  # noqa: ARG001 - a factory changed since: it needs an argument
    return _Idle()


@pytest.mark.parametrize(
    ("behaviors", "level", "why"),
    [
        ({}, logging.WARNING, "is not registered"),
        ({"idle": _needs_an_argument}, logging.ERROR, "could not be made"),
    ],
)
def test_a_reopen_that_leaves_many_agents_without_their_behavior_names_ten_and_counts_the_rest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, behaviors: dict[str, Any], level: int, why: str
) -> None:
    # An operator alerting on WARNING or ERROR gets eleven records for 25 agents, not 25
    # (nor 25 tracebacks): the first ten name their agent, and one names the others.
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"idle": _Idle}) as rt:
        rt.spawn_many([{"agent_id": f"a{i:02}", "behavior": "idle"} for i in range(25)])
    caplog.set_level(logging.DEBUG, logger="cogfabric")
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors=behaviors) as rt:
        assert not any(rt.agent(f"a{i:02}").has_behavior for i in range(25))
    said = [r for r in caplog.records if why in r.getMessage()]
    loud = [r for r in said if r.levelno >= logging.WARNING]
    assert [r.levelno for r in loud] == [level] * 11
    assert [r.getMessage().split(":")[0] for r in loud[:10]] == [f"agent 'a{i:02}'" for i in range(10)]
    assert (
        loud[10]
        .getMessage()
        .startswith(
            f"behavior 'idle' {why}: 15 more agents run without it than the 10 named above ('a10', 'a11', "
        )
    )
    assert (
        "'a19' and 5 more; each logged at DEBUG); their handles' has_behavior is False"
        in loud[10].getMessage()
    )
    assert [r.getMessage().split(":")[0] for r in said if r.levelno == logging.DEBUG] == [
        f"agent 'a{i:02}'" for i in range(10, 25)
    ]
    assert [bool(r.exc_info) for r in said] == [level == logging.ERROR] + [False] * 25


def test_the_error_of_a_close_that_leaves_the_writer_committing_names_the_runtime_and_its_journal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # An ERROR an operator is paged for, logged on the thread that called close() (not
    # one of the runtime's, whose name would say which): it says which journal.
    runtime = Runtime.open(
        tmp_path / "j", config=Config(journal=JournalConfig(durability="batch")), clock=FakeClock()
    )
    gate = threading.Event()
    try:
        _hand_the_writer_a_stalled_commit(runtime, gate)
        with (
            caplog.at_level(logging.ERROR, logger="cogfabric"),
            _short_call_timeout(runtime, 0.05, writer_too=True),
            pytest.raises(ActorTimeoutError, match="writer"),
        ):
            runtime.close()
    finally:
        gate.set()
        runtime.close()
    [error] = [r for r in caplog.records if "still committing" in r.getMessage()]
    assert error.getMessage() == (
        f"runtime 'j': close(): the journal writer is still committing; it closes the journal "
        f"({tmp_path / 'j'}) once it is done"
    )


@pytest.mark.parametrize("durability", ["sync", "batch"])
def test_a_run_in_which_nothing_fails_logs_nothing_on_cogfabric_at_info_or_above(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, durability: str
) -> None:
    # README ("Logging for operators"): an operator's pipeline stays quiet while all is
    # well. Agents spawned, messages, sessions and LLM turns, requests, a close, a reopen.
    caplog.set_level(logging.INFO, logger="cogfabric")
    for _ in range(2):
        with Runtime.open(
            tmp_path / "j",
            config=_config(durability),
            clock=FakeClock(),
            behaviors={"chat": _Chat},
            llm_provider=ScriptedProvider(["hello"]),
        ) as rt:
            if not rt.agents():
                rt.spawn_many([{"agent_id": f"c{i}", "behavior": "chat"} for i in range(5)])
            for i in range(5):
                rt.bus.send("web", f"c{i}", "line", "hi")
            assert rt.bus.request("web", "c0", "line", "and you?", timeout=WAIT).payload == "hello"
            rt.settle(timeout=WAIT)
            assert rt.stats().behavior_failures == 0
    assert [r.getMessage() for r in caplog.records if r.name.startswith("cogfabric")] == []
