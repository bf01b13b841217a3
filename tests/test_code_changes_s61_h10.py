"""A developer whose behaviors' code changes between two runs on one journal (session 61, helper h10).

The journal keeps each agent's behavior by the name it was spawned with, its state and
its checkpoints; the code that reads them is the developer's of the day: a behavior
renamed, a factory that now fails or makes something else, state shapes that changed.
What such a developer must be told, and what must not take the other agents down:

- a factory whose product's own ``__getattr__`` raises (an attribute dict's ``KeyError``)
  failed the whole ``Runtime.open`` with a bare ``KeyError``, refused a spawn with it,
  and on a restart left the agent running the very instance that had just failed;
- an agent left without its behavior said only ``(no behavior)`` to a requester and in
  its dead letters, and the reopen's record and a spawn's ``unknown behavior`` named no
  registered name and no way back;
- ``recover`` given a checkpoint that was kept in a context layer (a dict by then) said
  only ``expected a CognitiveState, got dict``.

The rest pins what README's "Changing your code between runs" promises.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import logging
import uuid
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

import cogfabric as cf

if TYPE_CHECKING:
    from pathlib import Path

_CONFIG: Any = {"runtime": {"call_timeout": 5.0}}


class _Reviewer:
    """Counts its messages on the instance: what a restart and a reopen start afresh."""

    made = 0

    def __init__(self) -> None:
        type(self).made += 1
        self.count = 0

    def on_message(self, ctx: cf.AgentContext, message: cf.IpcMessage) -> object:
        if message.topic == "boom":
            msg = "boom"
            raise ValueError(msg)
        self.count += 1
        return {"count": self.count, "by": ctx.agent_id}


class _AttrDict(dict[str, Any]):
    """A configuration object a factory returns by mistake: its attribute lookup raises ``KeyError``."""

    def __getattr__(self, name: str) -> Any:
        return self[name]


def _open(path: Path | None, **behaviors: Any) -> cf.Runtime:
    return cf.Runtime.open(path, behaviors=behaviors, config=_CONFIG)


def _no_behavior(rt: cf.Runtime) -> list[str]:
    return [a for a in rt.agents() if rt.agent(a).behavior and not rt.agent(a).has_behavior]


# ------------------------------------------------------------------ a factory's product


def test_a_reopen_whose_factory_makes_an_attribute_dict_leaves_that_agent_alone_without_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _open(tmp_path / "j", reviewer=_Reviewer, lead=_Reviewer) as rt:
        rt.spawn("lead", behavior="lead")
        rt.spawn("rev", behavior="reviewer")
        rt.spawn("after", behavior="lead")

    with (
        caplog.at_level(logging.WARNING, logger="cogfabric"),
        _open(tmp_path / "j", reviewer=_AttrDict, lead=_Reviewer) as rt,
    ):
        assert _no_behavior(rt) == ["rev"]  # the agents spawned before and after it have theirs
        assert rt.bus.request("app", "after", "go", timeout=5).payload == {"count": 1, "by": "after"}
        with pytest.raises(cf.IpcNoHandlerError) as refused:
            rt.bus.request("app", "rev", "go", timeout=5)
    assert "'rev' cannot handle 'go' (no behavior: its behavior 'reviewer' could not be made" in str(
        refused.value
    )
    made = [r for r in caplog.records if "could not be made" in r.getMessage()]
    assert [r.getMessage() for r in made] == [
        "agent 'rev': behavior 'reviewer' could not be made: the agent runs without one"
    ]
    assert made[0].exc_info is not None
    assert isinstance(made[0].exc_info[1], KeyError)


def test_a_spawn_whose_behavior_cannot_say_its_on_message_is_refused_as_a_spawn_spec() -> None:
    with _open(None, config=_AttrDict) as rt:
        with pytest.raises(
            cf.InvalidSpawnSpecError, match=r"behavior 'config' could not be made: KeyError"
        ) as made:
            rt.spawn("a", behavior="config")
        assert isinstance(made.value.__cause__, KeyError)
        with pytest.raises(
            cf.InvalidSpawnSpecError, match=r"behavior _AttrDict: reading its on_message raised KeyError"
        ) as given:
            rt.spawn("b", behavior=_AttrDict())
        assert isinstance(given.value.__cause__, KeyError)
        assert rt.agents() == []


def test_a_restart_whose_factory_now_fails_that_way_drops_the_instance_that_failed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    made: list[object] = []

    def factory() -> object:
        # the first is a behavior; the one a restart makes, after the failure, is not
        made.append(_Reviewer() if not made else _AttrDict())
        return made[-1]

    with caplog.at_level(logging.WARNING, logger="cogfabric"), _open(None, r=factory) as rt:
        rt.spawn("a", behavior="r")
        assert rt.bus.request("app", "a", "go", timeout=5).payload == {"count": 1, "by": "a"}
        with pytest.raises(cf.IpcHandlerError):
            rt.bus.request("app", "a", "boom", timeout=5)
        rt.flush()  # waits for the restart
        assert (len(made), rt.agent("a").has_behavior) == (2, False)
        with pytest.raises(cf.IpcNoHandlerError, match="its behavior 'r' could not be made"):
            rt.bus.request("app", "a", "go", timeout=5)  # not the instance that failed, with its count
    assert "the restart failed too" not in caplog.text


# ------------------------------------------------------------------ a behavior renamed


def test_a_renamed_behavior_is_named_with_the_registered_ones_and_the_way_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _open(tmp_path / "j", reviewer=_Reviewer) as rt:
        rt.spawn("rev", behavior="reviewer")
        rt.spawn("idle")  # spawned without one

    with (
        caplog.at_level(logging.WARNING, logger="cogfabric"),
        _open(tmp_path / "j", critic=_Reviewer, lead=_Reviewer) as rt,
    ):
        assert (rt.agent("rev").behavior, rt.agent("rev").has_behavior) == ("reviewer", False)
        with pytest.raises(cf.IpcNoHandlerError) as refused:
            rt.bus.request("app", "rev", "go", timeout=5)
        rt.bus.send("app", "rev", "note")
        rt.bus.send("app", "idle", "note")
        with pytest.raises(cf.InvalidSpawnSpecError) as unknown:
            rt.spawn("rev2", behavior="reviewer")
        rt.flush()
        letters = [(d.recipient, d.reason, d.error) for d in rt.bus.dead_letters()]
    gone = "(no behavior: its behavior 'reviewer' is not registered; registered: 'critic', 'lead')"
    assert str(refused.value) == f"agentipc: no handler: 'rev' cannot handle 'go' {gone}"
    # each agent dead-letters on its own thread: rev's two in order, idle's before or after them
    assert [letter for letter in letters if letter[0] == "rev"] == [
        ("rev", "no behavior", f"agentipc: no handler: 'rev' cannot handle 'go' {gone}"),
        ("rev", "no behavior", f"agentipc: no handler: 'rev' cannot handle 'note' {gone}"),
    ]
    assert [letter for letter in letters if letter[0] != "rev"] == [
        (
            "idle",
            "no behavior",
            "agentipc: no handler: 'idle' cannot handle 'note' (no behavior: it was spawned without one)",
        ),
    ]
    assert str(unknown.value) == (
        "agentfabric: invalid spawn spec: unknown behavior 'reviewer' (registered: 'critic', 'lead'; "
        "Runtime.open(..., behaviors={name: factory}) registers them)"
    )
    said = (
        "agent 'rev': behavior 'reviewer' is not registered: the agent runs without one, and messages "
        "to it are dead-lettered (registered: 'critic', 'lead'); to give it one, open the journal with "
        "behaviors={'reviewer': factory}"
    )
    assert [r.getMessage() for r in caplog.records if "is not registered" in r.getMessage()] == [said]

    # the way back: the old name registered beside the new one (the new one first: a spawn
    # given the class journals the first name it is registered under)
    with _open(tmp_path / "j", critic=_Reviewer, reviewer=_Reviewer) as rt:
        assert _no_behavior(rt) == []
        assert rt.bus.request("app", "rev", "go", timeout=5).payload == {"count": 1, "by": "rev"}
        assert rt.spawn("new", behavior=_Reviewer).behavior == "critic"


def test_a_long_list_of_registered_names_is_cut() -> None:
    behaviors = {f"b{i:02}": _Reviewer for i in range(25)}
    with _open(None, **behaviors) as rt, pytest.raises(cf.InvalidSpawnSpecError) as unknown:
        rt.spawn("a", behavior="gone")
    shown = ", ".join(f"'b{i:02}'" for i in range(10))
    assert f"(registered: {shown} and 15 more; " in str(unknown.value)


# ------------------------------------------------------------------ instance state


def test_instance_state_starts_afresh_at_a_restart_and_a_reopen_the_journal_keeps_the_rest(
    tmp_path: Path,
) -> None:
    _Reviewer.made = 0
    with _open(tmp_path / "j", reviewer=_Reviewer) as rt:
        rt.spawn_many([{"agent_id": a, "behavior": "reviewer"} for a in ("a", "b")])
        rt.agent("a").set_private("count", 7)
        assert [rt.bus.request("app", "a", "go", timeout=5).payload["count"] for _ in range(2)] == [1, 2]
        with pytest.raises(cf.IpcHandlerError):
            rt.bus.request("app", "a", "boom", timeout=5)
        rt.flush()
        assert rt.bus.request("app", "a", "go", timeout=5).payload["count"] == 1  # a fresh instance
        assert _Reviewer.made == 3

    _Reviewer.made = 0
    with _open(tmp_path / "j", reviewer=_Reviewer) as rt:
        assert _Reviewer.made == 2  # once per live agent, before open returns
        assert rt.bus.request("app", "a", "go", timeout=5).payload["count"] == 1
        assert rt.agent("a").private("count") == 7


def test_a_factory_that_returns_one_object_shares_it_and_its_attributes() -> None:
    one = _Reviewer()
    with _open(None, reviewer=lambda: one) as rt:
        rt.spawn_many([{"agent_id": a, "behavior": "reviewer"} for a in ("a", "b")])
        assert rt.bus.request("app", "a", "go", timeout=5).payload["count"] == 1
        assert rt.bus.request("app", "b", "go", timeout=5).payload["count"] == 2
        with pytest.raises(cf.IpcHandlerError):
            rt.bus.request("app", "a", "boom", timeout=5)
        rt.flush()
        assert rt.bus.request("app", "a", "go", timeout=5).payload["count"] == 3


# ------------------------------------------------------------------ values and checkpoints


class _Colour(enum.Enum):
    RED = "red"


class _Level(enum.IntEnum):
    HIGH = 3


class _Point(msgspec.Struct):
    x: int
    y: int


@dataclasses.dataclass
class _Pair:
    a: int


_UTC_PLUS_2 = dt.timezone(dt.timedelta(hours=2))

# what README's "Changing your code between runs" lists: the value read back, live as after a reopen
_SHAPES: list[tuple[object, object]] = [
    ((1, (2, 3)), [1, [2, 3]]),
    ({1, 2}, [1, 2]),
    (frozenset({3}), [3]),
    (bytearray(b"x"), b"x"),
    (b"x", b"x"),
    (_Point(1, 2), {"x": 1, "y": 2}),
    (_Pair(1), {"a": 1}),
    (_Colour.RED, "red"),
    (_Level.HIGH, 3),
    (decimal.Decimal("1.10"), "1.10"),
    (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001"),
    (dt.date(2024, 1, 2), "2024-01-02"),
    (dt.time(1, 2), "01:02:00"),
    (dt.timedelta(seconds=5), "PT5S"),
    (dt.datetime(2024, 1, 2, 3, 4), "2024-01-02T03:04:00"),  # noqa: DTZ001 - a naive one is the point
    (
        dt.datetime(2024, 1, 2, 3, 4, tzinfo=_UTC_PLUS_2),
        dt.datetime(2024, 1, 2, 1, 4, tzinfo=dt.UTC),
    ),
    ({1: "int key", (1, 2): "tuple key"}, {1: "int key", (1, 2): "tuple key"}),
]


def test_values_read_back_in_msgpack_shapes_live_and_after_a_reopen(tmp_path: Path) -> None:
    with _open(tmp_path / "j") as rt:
        a = rt.spawn("a")
        for i, (given, _) in enumerate(_SHAPES):
            a.set_private(str(i), given)
        live = [a.private(str(i)) for i in range(len(_SHAPES))]
    with _open(tmp_path / "j") as rt:
        reopened = [rt.agent("a").private(str(i)) for i in range(len(_SHAPES))]
    expected = [shape for _, shape in _SHAPES]
    assert live == reopened == expected
    assert [type(v) for v in live] == [type(v) for v in reopened] == [type(v) for v in expected]
    # a Struct of the developer's own comes back with msgspec.convert, the types of its fields too
    assert msgspec.convert({"x": 1, "y": 2}, _Point) == _Point(1, 2)


def test_a_checkpoint_kept_in_a_context_layer_is_recovered_through_decode(tmp_path: Path) -> None:
    with _open(tmp_path / "j") as rt:
        a = rt.spawn("a")
        a.set_cognitive_state(cf.CognitiveState(working_memory=("step", 1), decision="ship"))
        a.set_private("saved", a.checkpoint_cognitive())
    with _open(tmp_path / "j") as rt:
        saved = rt.agent("a").private("saved")
        assert isinstance(saved, dict)
        rt.spawn("b")
        with pytest.raises(
            TypeError, match=r"got dict \(a checkpoint kept in a context layer.*decode_cognitive_state"
        ):
            rt.recover("b", saved)  # type: ignore[arg-type]  # what the old code kept: a dict
        rt.recover("b", cf.decode_cognitive_state(saved))
        assert rt.agent("b").cognitive_state().working_memory == ["step", 1]
        assert rt.last_checkpoint("a") == cf.decode_cognitive_state(saved)


def test_an_id_spawned_again_takes_the_new_spawns_all_but_its_checkpoints(tmp_path: Path) -> None:
    with _open(tmp_path / "j", old=_Reviewer, new=_Reviewer) as rt:
        rt.spawn_many([{"agent_id": "p1"}, {"agent_id": "p2"}])
        k = rt.spawn("k", behavior="old", task_id="tA", parent="p1", task_context={"goal": 1})
        k.set_private("kept", 1)
        k.set_cognitive_state(cf.CognitiveState(decision="first life"))
        k.checkpoint_cognitive()
        rt.kill("k")
        rt.spawn("k", behavior="new", task_id="tB", parent="p2")
    with _open(tmp_path / "j", new=_Reviewer) as rt:  # "old" is gone: k's first life needs it no more
        k = rt.agent("k")
        assert (k.behavior, k.has_behavior, k.task_id, k.parent) == ("new", True, "tB", "p2")
        assert k.context_view() == cf.ContextView(task_shared={}, private={})
        assert k.cognitive_state() == cf.CognitiveState()
        assert (rt.children("p1"), rt.children("p2")) == ([], ["k"])
        checkpoint = rt.last_checkpoint("k")
        assert checkpoint is not None
        assert checkpoint.decision == "first life"
