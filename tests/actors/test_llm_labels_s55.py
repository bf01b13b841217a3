"""A provider's ``model`` or ``name`` that is a method is not journaled as its repr.

The repr of a bound method holds a memory address, different in every process: two
runs of one simulation journaled different records, and an audit read an address.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from cogfabric import Runtime
from cogfabric.events import LlmOutputRecorded

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

    from cogfabric.actors import AgentContext
    from cogfabric.events import IpcMessage


class _MethodLabels:
    def model(self) -> str:
        return "m-1"

    def name(self) -> str:
        return "vendor"

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002
        return "ok"


class _Asks:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ARG002
        return ctx.llm.generate("hello")


def test_a_method_label_records_the_fallback_and_warns_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="cogfabric"),
        Runtime.open(tmp_path / "j", behaviors={"asks": _Asks}, llm_provider=_MethodLabels()) as runtime,
    ):
        runtime.spawn("a", behavior="asks")
        for _ in range(3):
            assert runtime.bus.request("x", "a", "go", timeout=10).payload == "ok"
        runtime.flush()
        journal = runtime._journal
        assert journal is not None
        recorded = [r.event for r in journal.read() if isinstance(r.event, LlmOutputRecorded)]
    assert [(e.provider, e.model) for e in recorded] == [("_MethodLabels", "")] * 3
    warned = [r.getMessage() for r in caplog.records if "is a method, not a value" in r.getMessage()]
    assert len(warned) == 2  # once for name, once for model: not once a call
    assert any("model" in w for w in warned)
    assert all("0x" not in w for w in warned)
