"""Review of the operator logging of 71ccff9 (helper h10, s62): what a quieter log must still say."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric
from cogfabric.actors import ActorTimeoutError, AgentContext, FakeClock, Runtime, RuntimeClosedError
from tests.actors.test_close_and_flush import _config
from tests.actors.test_operator_logging_s62_h7 import WAIT, _Held

if TYPE_CHECKING:
    from cogfabric.events import IpcMessage


class _Idle:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        pass


class _Deaf:
    """Something a factory made that handles no message."""


def test_a_factory_that_fails_for_some_agents_and_not_alike_names_each_cause_on_a_reopen(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A factory that reads per-tenant settings: for the first agent it makes something
    # unfit, for the next two it raises, each for a reason of its own. Only the first
    # failing agent's record carries a traceback; the others must still say why, or the
    # second cause (a KeyError of another tenant) is logged nowhere at all.
    made = iter([_Deaf(), KeyError("tenant-b"), KeyError("tenant-c")])

    def factory() -> Any:
        product = next(made, None)
        if isinstance(product, Exception):
            raise product
        return product or _Idle()

    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"t": _Idle}) as rt:
        rt.spawn_many([{"agent_id": f"a{i}", "behavior": "t"} for i in range(4)])
    caplog.set_level(logging.DEBUG, logger="cogfabric")
    with Runtime.open(tmp_path / "j", clock=FakeClock(), behaviors={"t": factory}) as rt:
        assert [rt.agent(f"a{i}").has_behavior for i in range(4)] == [False, False, False, True]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR and "without one" in r.getMessage()]
    assert [r.getMessage().split(":")[0] for r in errors] == ["agent 'a0'", "agent 'a1'", "agent 'a2'"]
    said = "\n".join(r.getMessage() + (repr(r.exc_info[1]) if r.exc_info else "") for r in errors)
    assert "tenant-b" in said
    assert "tenant-c" in said


def test_what_close_logs_on_its_callers_thread_about_the_session_actor_and_open_requests_names_the_runtime(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # README ("Logging for operators"): the caller's thread does not carry the
    # runtime's name, so what close() logs there says which runtime: the session
    # actor held past call_timeout, and the dead letters of requests open at close
    # that could not be made, as well as the agents' own records.
    entered, gate = threading.Semaphore(0), threading.Event()
    rt = Runtime.open(
        tmp_path / "j",
        name="billing",
        config=_config("batch", call_timeout=0.2),
        clock=FakeClock(),
        behaviors={"held": lambda: _Held(entered, gate)},
    )
    asked: list[BaseException] = []
    requester = threading.Thread(target=_ask, args=(rt, asked), daemon=True)
    try:
        rt.spawn("a", behavior="held")
        requester.start()
        assert entered.acquire(timeout=WAIT)  # the request is open, its agent busy with it
        real = rt.memory._op_sweep

        def stuck_sweep() -> int:
            assert gate.wait(WAIT)
            return real()

        monkeypatch.setattr(rt.memory, "_op_sweep", stuck_sweep)
        with pytest.raises(ActorTimeoutError):
            rt.memory.sweep()  # the session actor is held in it

        def no_letter(*_: object) -> None:
            msg = "the letter could not be made"
            raise RuntimeClosedError(msg)

        monkeypatch.setattr(rt.bus, "_letter", no_letter)
        with caplog.at_level(logging.WARNING, logger="cogfabric"):
            rt.close()
    finally:
        gate.set()
        rt.close()
        requester.join(WAIT)
    said = [r.getMessage() for r in caplog.records if r.threadName == threading.current_thread().name]
    runtime = "runtime 'billing': close(): "
    assert any(m.startswith(f"{runtime}the session actor did not stop in time") for m in said)
    assert any(m.startswith(f"{runtime}no dead letters for 1 request open") for m in said)


def _ask(rt: Runtime, asked: list[BaseException]) -> None:
    try:
        rt.bus.request("x", "a", "work", None, timeout=WAIT)
    except Exception as exc:  # noqa: BLE001 - the close fails it: kept for the test to see
        asked.append(exc)


def test_the_readme_names_every_logger_cogfabric_logs_on() -> None:
    # README ("Logging for operators") lists the loggers an operator may route or
    # silence one by one: each module that logs on a logger of its own is there.
    package = Path(cogfabric.__file__).parent
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    passage = readme.split("**Logging for operators.**", 1)[1].split("\n\n**", 1)[0]
    sources = [Path(top, name) for top, _, names in os.walk(package, followlinks=True) for name in names]
    logging_modules = sorted(
        "cogfabric." + ".".join(path.relative_to(package).with_suffix("").parts)
        for path in sources
        if path.suffix == ".py" and "getLogger(__name__)" in path.read_text(encoding="utf-8")
    )
    assert "cogfabric.actors._agent" in logging_modules
    assert [name for name in logging_modules if f"`{name}`" not in passage] == []
