"""Property: no operation sequence makes a private value leak, and reopening reproduces every view."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, ClassVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cogfabric.actors import AgentContext, AgentState, Config, FakeClock, JournalConfig, Runtime
from cogfabric.events import CognitiveState, IpcMessage

AGENTS = ("a0", "a1", "a2")


class Inbox:
    """Keeps every IPC payload any agent receives."""

    payloads: ClassVar[list[Any]] = []

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
        Inbox.payloads.append(message.payload)


agent = st.sampled_from(AGENTS)
public = st.recursive(
    st.integers(-5, 5) | st.sampled_from(["goal", "plan", ""]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["x", "y"]), inner, max_size=2)
    ),
    max_leaves=6,
)
operation = st.one_of(
    st.tuples(st.just("private"), agent, st.integers(0, 2)),
    st.tuples(st.just("cognitive"), agent),
    st.tuples(st.just("task"), agent, public),
    st.tuples(st.just("publish"), public),
    st.tuples(st.just("send"), agent, agent, public),
    st.tuples(st.just("suspend"), agent),
)


def _views(runtime: Runtime) -> dict[str, tuple[dict[str, Any], dict[str, Any], CognitiveState, AgentState]]:
    out = {}
    for agent_id in runtime.agents():
        handle = runtime.agent(agent_id)
        view = handle.context_view()
        out[agent_id] = (
            dict(view.task_shared),
            dict(view.private),
            handle.cognitive_state(),
            handle.lifecycle,
        )
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation, max_size=20), st.sampled_from(["sync", "batch"]))
def test_private_values_never_leak_and_reopening_reproduces_every_view(
    operations: list[tuple[Any, ...]], durability: str
) -> None:
    Inbox.payloads = []
    # fsync: false, as in the runtime model: only a power cut tells it apart, and it is most of the time
    config = Config(journal=JournalConfig(durability=durability, snapshot_interval=4, fsync=False))  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "j"
        with Runtime.open(path, config=config, clock=FakeClock(), behaviors={"inbox": Inbox}) as runtime:
            for agent_id in AGENTS:
                runtime.spawn(agent_id, task_id="t", behavior="inbox")
            for n, op in enumerate(operations):
                match op:
                    case ("private", who, key):
                        runtime.agent(who).set_private(f"k{key}", f"SECRET-{who}-{n}")
                    case ("cognitive", who):
                        runtime.agent(who).set_cognitive_state(
                            CognitiveState(working_memory=f"SECRET-{who}-{n}")
                        )
                    case ("task", who, value):
                        runtime.agent(who).set_task_context({"v": value})
                    case ("publish", value):
                        runtime.publish_task_context("t", {"p": value})
                    case ("send", frm, to, value):
                        runtime.bus.send(frm, to, "note", value)
                    case ("suspend", who):
                        runtime.suspend(who)
            runtime.flush()
            before = _views(runtime)

        for agent_id, (task, private, cognitive, _) in before.items():
            assert "SECRET" not in repr(task)
            foreign = [v for v in private.values() if not v.startswith(f"SECRET-{agent_id}-")]
            assert foreign == []
            assert cognitive.working_memory is None or cognitive.working_memory.startswith(
                f"SECRET-{agent_id}-"
            )
        assert "SECRET" not in repr(Inbox.payloads)

        with Runtime.open(path, config=config, clock=FakeClock(), behaviors={"inbox": Inbox}) as reopened:
            assert _views(reopened) == before
