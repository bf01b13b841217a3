"""A ``ctx`` kept past ``close()`` changes nothing, whatever the durability, and says so.

Before, a kept ``ctx``'s change after close raised in a journaled runtime but applied
anyway in batch durability (``private`` then read the new value), and applied silently in
a memory-only runtime; the handle refused all three.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import pytest

import cogfabric as cf

if TYPE_CHECKING:
    from pathlib import Path


class _Keeps(cf.Behavior):
    """Keeps the ``ctx`` of each message it handles."""

    def __init__(self) -> None:
        self.kept: list[cf.AgentContext] = []

    def on_message(self, ctx: cf.AgentContext, _message: object) -> int:
        ctx.set_private("k", 1)
        self.kept.append(ctx)
        return 1


CHANGES: list[Any] = [
    pytest.param(lambda ctx: ctx.set_private("k", 2), id="set_private"),
    pytest.param(lambda ctx: ctx.set_task_context({"t": 1}), id="set_task_context"),
    pytest.param(lambda ctx: ctx.set_cognitive_state(cf.CognitiveState(context=1)), id="set_cognitive_state"),
    pytest.param(lambda ctx: ctx.checkpoint_cognitive(), id="checkpoint_cognitive"),
    pytest.param(lambda ctx: ctx.subscribe("news"), id="subscribe"),
    pytest.param(lambda ctx: ctx.unsubscribe("news"), id="unsubscribe"),
]


@pytest.mark.parametrize("durability", ["sync", "batch", None])
@pytest.mark.parametrize("change", CHANGES)
def test_a_kept_ctx_change_after_close_raises_and_changes_nothing(
    tmp_path: Path, durability: Literal["sync", "batch"] | None, change: Any
) -> None:
    behavior = _Keeps()
    path = None if durability is None else tmp_path / "j"
    config = cf.Config(journal=cf.JournalConfig(durability=durability or "sync"))
    with cf.Runtime.open(path, config=config, clock=cf.FakeClock()) as rt:
        rt.spawn("a", behavior=behavior)
        rt.spawn("asker")
        assert rt.bus.request("asker", "a", "go", None, timeout=10).payload == 1
    (ctx,) = behavior.kept

    said = "the runtime is closed" if durability is None else "the journal writer is stopped"
    with pytest.raises(cf.RuntimeClosedError, match=said):
        change(ctx)

    assert ctx.private("k") == 1  # its reads still answer, and nothing changed
    assert ctx.task_context() == {}
    assert ctx.cognitive_state() == cf.CognitiveState()
