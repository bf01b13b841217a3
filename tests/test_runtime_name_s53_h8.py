"""A runtime's name in every thread it starts, so a log's ``%(threadName)s`` tells runtimes apart.

Helper h8, session 53: a process that hosts several runtimes (a job queue of
simulations) logged identical lines for two runtimes' agents of the same id; only
Pykka's process-wide thread counter (``AgentActor-3``, ``AgentActor-5``) differed, and a
line of the session ticker or the journal writer named no runtime at all.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

import pytest

import cogfabric as cf
from cogfabric.actors import FakeClock

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


class Boom:
    def on_message(self, ctx: object, message: object) -> None:  # noqa: ARG002 - a behavior's signature
        msg = "boom"
        raise RuntimeError(msg)


@pytest.fixture
def runtimes() -> Iterator[list[cf.Runtime]]:
    """The test's runtimes, each closed at its end."""
    opened: list[cf.Runtime] = []
    yield opened
    for rt in opened:
        rt.close()


def _fail(rt: cf.Runtime, agent_id: str) -> None:
    """Make ``agent_id``'s behavior raise once; its warning is logged before the requester learns it."""
    with pytest.raises(cf.IpcHandlerError, match="boom"):
        rt.bus.request("app", agent_id, "go", None, timeout=5)


def _settle(rt: cf.Runtime, agent_ids: list[str]) -> None:
    """Have each actor of ``rt`` handle a message: each has named its thread (it does so first)."""
    for agent_id in agent_ids:
        _fail(rt, agent_id)
    rt.memory.create_session("u")  # the session actor's
    rt.flush()  # the journal writer's


def _threads_since(before: set[threading.Thread]) -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t not in before and t.is_alive())


def test_two_runtimes_same_agent_id_log_lines_differ_by_thread_name(
    tmp_path: Path, runtimes: list[cf.Runtime], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cogfabric")
    runtimes.append(cf.Runtime.open(tmp_path / "sim-a", behaviors={"b": Boom}, clock=FakeClock()))
    runtimes.append(cf.Runtime.open(None, behaviors={"b": Boom}, clock=FakeClock()))
    for rt in runtimes:
        rt.spawn("researcher-001", behavior="b")
        _fail(rt, "researcher-001")

    failed = [r for r in caplog.records if r.getMessage().startswith("behavior of agent researcher-001")]

    assert len(failed) == 2
    first, second = (str(r.threadName) for r in failed)
    assert first != second
    assert first.startswith("AgentActor-")  # what found an actor's thread by its name still does
    assert first.endswith(" [sim-a] researcher-001")
    assert second.endswith(" [memory] researcher-001")


def test_every_thread_a_runtime_starts_carries_its_name(tmp_path: Path, runtimes: list[cf.Runtime]) -> None:
    before = set(threading.enumerate())
    # a real clock: the session ticker runs too
    rt = cf.Runtime.open(tmp_path / "j", behaviors={"b": Boom}, name="job-7")
    runtimes.append(rt)
    rt.spawn("a", behavior="b")
    rt.spawn("b", behavior="b")
    _settle(rt, ["a", "b"])

    names = _threads_since(before)

    assert rt.name == "job-7"
    assert len(names) == 5, names  # the writer, the session actor, its ticker, two agents
    assert all(" [job-7]" in name for name in names), names
    assert "cogfabric-session-ticker [job-7]" in names
    assert sum(n.startswith("JournalWriterActor-") for n in names) == 1
    assert sum(n.startswith("SessionActor-") for n in names) == 1
    assert sorted(n.split("] ")[-1] for n in names if n.startswith("AgentActor-")) == ["a", "b"]


def test_default_names(tmp_path: Path, runtimes: list[cf.Runtime]) -> None:
    runtimes.append(cf.Runtime.open(tmp_path / "runs" / "sim-42", clock=FakeClock()))
    runtimes.append(cf.Runtime.open(tmp_path / "runs" / "sim-43" / ".", clock=FakeClock()))
    runtimes.append(cf.Runtime.open(None, clock=FakeClock()))

    assert [rt.name for rt in runtimes] == ["sim-42", "sim-43", "memory"]
    with pytest.raises(AttributeError):
        runtimes[0].name = "other"  # type: ignore[misc]  # read-only


def test_a_hostile_directory_name_cannot_forge_a_log_line(tmp_path: Path, runtimes: list[cf.Runtime]) -> None:
    hostile = "sim\nERROR forged line\x1b[2K\u202e"
    before = set(threading.enumerate())
    rt = cf.Runtime.open(tmp_path / hostile, behaviors={"b": Boom}, clock=FakeClock())
    runtimes.append(rt)
    rt.spawn("agent\x1b[31m", behavior="b")  # an agent id holds no white space, but may an ESC
    _settle(rt, ["agent\x1b[31m"])

    names = _threads_since(before)

    assert rt.name == ascii(hostile)
    assert rt.name.isprintable()
    assert len(names) == 3, names  # the writer, the session actor, the agent
    assert all(name.isprintable() and f" [{hostile!a}]" in name for name in names), names
    assert any(name.endswith(" " + ascii("agent\x1b[31m")) for name in names), names


def test_a_name_of_a_str_subclass_is_kept_as_plain_text(runtimes: list[cf.Runtime]) -> None:
    class Label(str):
        __slots__ = ()

    runtimes.append(cf.Runtime.open(None, clock=FakeClock(), name=Label("job-8")))

    assert type(runtimes[0].name) is str
    assert runtimes[0].name == "job-8"


@pytest.mark.parametrize(
    ("name", "error", "match"),
    [
        (7, TypeError, "name is a str, got int 7"),
        (b"job", TypeError, "name is a str, got bytes"),
        ("", ValueError, "not blank"),
        ("   ", ValueError, "not blank"),
        ("x" * 65, ValueError, "at most 64 characters, got 65"),
        ("job\nERROR forged", ValueError, "not show as it is"),
        ("job\x1b[2K", ValueError, "not show as it is"),
        ("job\u202e", ValueError, "not show as it is"),  # a bidi override: a format character
    ],
)
def test_an_invalid_name_is_refused_before_anything_opens(
    tmp_path: Path, name: object, error: type[Exception], match: str
) -> None:
    before = set(threading.enumerate())

    with pytest.raises(error, match=match):
        cf.Runtime.open(tmp_path / "j", name=name)  # type: ignore[arg-type]

    assert not (tmp_path / "j").exists()
    assert _threads_since(before) == []
    with cf.Runtime.open(tmp_path / "j", clock=FakeClock(), name="x" * 64) as rt:  # the longest taken
        assert rt.name == "x" * 64


def test_a_long_directory_name_is_cut_to_the_longest_name_open_takes(
    tmp_path: Path, runtimes: list[cf.Runtime]
) -> None:
    """A directory's name may be 255 bytes; the default name is at most the 64 characters ``name=`` takes."""
    long_name = "sim-" + "x" * 200
    runtimes.append(cf.Runtime.open(tmp_path / long_name, clock=FakeClock()))
    runtimes.append(cf.Runtime.open(tmp_path / ("y" * 64), clock=FakeClock()))

    assert runtimes[0].name == long_name[:63] + "\N{HORIZONTAL ELLIPSIS}"
    assert runtimes[1].name == "y" * 64  # at the limit: kept whole
    runtimes.append(cf.Runtime.open(None, name=runtimes[0].name, clock=FakeClock()))  # a name open takes
    assert runtimes[2].name == runtimes[0].name
