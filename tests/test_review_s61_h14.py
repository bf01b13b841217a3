"""Review of the code-change commit (session 61, helper h14): behavior names and a product's lookup.

- the registered names an error, a reopen's record and each dead letter list were the
  keys of ``behaviors`` as given, through their own ``__repr__``: a ``StrEnum`` member's
  showed as ``<Kind.REVIEW: 'review'>``, and one that raises failed the whole
  ``Runtime.open`` of a journal with an agent whose behavior is no longer registered;
- each dead letter of such an agent copied every registered name to list ten of them;
- a Ctrl-C raised by a factory's product's own attribute lookup, now checked inside the
  factory's ``try``: still raised to a spawn and a reopen, and at a restart (on the
  agent's thread) it leaves that agent alone without its behavior;
- README's value shapes: a frozenset used as a dict key reads back as a tuple.
"""

from __future__ import annotations

import enum
import logging
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf
from tests.test_code_changes_s61_h10 import _open, _Reviewer

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


class _Kind(enum.StrEnum):
    REVIEW = "review"


class _Hostile(str):
    """A name whose own ``__repr__`` raises: its text, not its ``repr``, is what gets listed."""

    __slots__ = ()

    def __repr__(self) -> str:
        msg = "a name's own repr"
        raise RuntimeError(msg)


class _Forged(str):
    """A name whose own ``__repr__`` forges a second log line."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'x'\nERROR forged"


@pytest.mark.parametrize("name", [_Kind.REVIEW, _Hostile("review"), _Forged("review")], ids=type)
def test_a_name_given_as_a_str_subclass_is_listed_by_its_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    with _open(tmp_path / "j", old=_Reviewer) as rt:
        rt.spawn("a", behavior="old")

    with (
        caplog.at_level(logging.WARNING, logger="cogfabric"),
        cf.Runtime.open(tmp_path / "j", behaviors={name: _Reviewer}) as rt,  # it failed here
    ):
        with pytest.raises(cf.IpcNoHandlerError) as refused:
            rt.bus.request("app", "a", "go", timeout=5)
        with pytest.raises(cf.InvalidSpawnSpecError) as unknown:
            rt.spawn("b", behavior="gone")
        assert rt.spawn("c", behavior=name).behavior == "review"
        assert rt.spawn("d", behavior=_Reviewer).behavior == "review"
    assert str(refused.value).endswith("its behavior 'old' is not registered; registered: 'review')")
    assert "(registered: 'review'; Runtime.open" in str(unknown.value)
    said = (
        "agent 'a': behavior 'old' is not registered: the agent runs without one, and messages to it "
        "are dead-lettered (registered: 'review'); to give it one, open the journal with "
        "behaviors={'old': factory}"
    )
    assert [r.getMessage() for r in caplog.records if "is not registered" in r.getMessage()] == [said]


class _CountingDict(dict[str, Any]):
    """The registered behaviors, counting the names read out of them in order."""

    read = 0

    def __iter__(self) -> Iterator[str]:
        for name in super().__iter__():
            type(self).read += 1
            yield name


def test_each_dead_letter_reads_only_the_names_it_lists(tmp_path: Path) -> None:
    with _open(tmp_path / "j", gone=_Reviewer) as rt:
        rt.spawn("a", behavior="gone")

    many = {f"b{i:05}": _Reviewer for i in range(10_000)}
    with cf.Runtime.open(tmp_path / "j", behaviors=many, config={"runtime": {"call_timeout": 5.0}}) as rt:
        rt._core.behaviors = _CountingDict(rt._core.behaviors)  # what each letter reads
        for _ in range(3):
            rt.bus.send("app", "a", "note")
        rt.flush()
        letters = rt.bus.dead_letters()
    assert [d.reason for d in letters] == ["no behavior"] * 3
    assert all(d.error.endswith("'b00009' and 9990 more)") for d in letters if d.error)
    assert _CountingDict.read <= 3 * 10  # the ten each lists, not the 10,000 each time


class _CtrlC:
    """A factory's product whose attribute lookup is where a Ctrl-C lands."""

    def __getattr__(self, name: str) -> Any:
        raise KeyboardInterrupt


def test_a_ctrl_c_in_the_products_lookup_stops_a_spawn_and_a_reopen(tmp_path: Path) -> None:
    with _open(tmp_path / "j", r=_CtrlC, ok=_Reviewer) as rt:
        with pytest.raises(KeyboardInterrupt):
            rt.spawn("a", behavior="r")
        with pytest.raises(KeyboardInterrupt):
            rt.spawn("a", behavior=_CtrlC())
        rt.spawn("b", behavior="ok")
        assert rt.agents() == ["b"]

    with pytest.raises(KeyboardInterrupt):
        _open(tmp_path / "j", ok=_CtrlC)
    with _open(tmp_path / "j", ok=_Reviewer) as rt:  # the interrupted open left nothing held
        assert rt.bus.request("app", "b", "go", timeout=5).payload == {"count": 1, "by": "b"}


def test_a_ctrl_c_in_the_products_lookup_at_a_restart_leaves_that_agent_alone_without_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    made: list[object] = []

    def factory() -> object:
        made.append(_Reviewer() if not made else _CtrlC())
        return made[-1]

    with caplog.at_level(logging.ERROR, logger="cogfabric"), _open(None, r=factory, ok=_Reviewer) as rt:
        rt.spawn_many([{"agent_id": "a", "behavior": "r"}, {"agent_id": "b", "behavior": "ok"}])
        with pytest.raises(cf.IpcHandlerError):
            rt.bus.request("app", "a", "boom", timeout=5)
        rt.flush()  # waits for the restart, on a's thread: a Ctrl-C there would stop every actor
        assert (len(made), rt.agent("a").has_behavior) == (2, False)
        with pytest.raises(cf.IpcNoHandlerError, match="its behavior 'r' could not be made"):
            rt.bus.request("app", "a", "go", timeout=5)
        assert rt.bus.request("app", "b", "go", timeout=5).payload == {"count": 1, "by": "b"}
    failed = [r for r in caplog.records if "could not be made" in r.getMessage()]
    assert [r.getMessage() for r in failed] == [
        "agent 'a': behavior 'r' could not be made: the agent runs without one"
    ]
    assert failed[0].exc_info is not None
    assert isinstance(failed[0].exc_info[1], KeyboardInterrupt)


def test_a_frozenset_used_as_a_dict_key_reads_back_as_a_tuple(tmp_path: Path) -> None:
    given = {frozenset({1}): "set key", ((1, 2), 3): "nested tuple key", "t": ((1, 2), frozenset({3}))}
    with _open(tmp_path / "j") as rt:
        rt.spawn("a").set_private("k", given)
        live = rt.agent("a").private("k")
    with _open(tmp_path / "j") as rt:
        reopened = rt.agent("a").private("k")
    assert live == reopened == {(1,): "set key", ((1, 2), 3): "nested tuple key", "t": [[1, 2], [3]]}
