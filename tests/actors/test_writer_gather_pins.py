"""The journal writer's group commit where it skips work, pinned to what it did when it skipped none.

The writer reads an event's ``stream`` (a Python property) only when a snapshot of the
group needs it (``_StreamIndex``), looks for a published task context only among the
group's event types, and settles only the submissions that have an acknowledgement or a
post-commit action. Each test here holds what a group commit did when it read every
stream before its append, checked every event and settled every submission: an event
whose stream cannot be read refused alone, the seq each snapshot covers, the
publications it notes, the seqs each waiter gets.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cogfabric.actors._writer import JournalWriter, _StreamIndex
from cogfabric.events import PrivateSet, TaskContextPublished
from cogfabric.store import Journal, JournalFailedError, Snapshot

from .test_writer import WAIT, GatedJournal

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path

    from cogfabric.actors._writer import Ack
    from cogfabric.events import Event


class HeldJournal(GatedJournal):
    """The gated journal: what comes while its first append waits is one group; it can also
    return too few seqs (a broken journal)."""

    def __init__(self, journal: Journal) -> None:
        super().__init__(journal)
        self.short_by = 0

    def append(self, events: Sequence[Event], **kwargs: Any) -> list[int]:
        seqs = super().append(events, **kwargs)
        return seqs[: len(seqs) - self.short_by]


@pytest.fixture
def held(tmp_path: Path) -> Iterator[HeldJournal]:
    with Journal.open(tmp_path / "j") as journal:
        yield HeldJournal(journal)


@pytest.fixture
def writer(held: HeldJournal) -> Iterator[JournalWriter]:
    """A writer stuck in the append of ``z0`` (seq 1): what the test submits next is one group."""
    writer = JournalWriter(held, group_commit_max=1000, call_timeout=WAIT, backlog_max=1000)  # type: ignore[arg-type]
    try:
        writer.submit_nowait([change("z", 0)])
        assert held.entered.wait(WAIT)
        yield writer
    finally:
        held.gate.set()
        writer.stop(WAIT)


def change(agent: Any, i: int) -> PrivateSet:  # a bad agent too, on purpose
    return PrivateSet(at=1.0, agent=agent, key=f"{agent}{i}", value=i)


def keys(held: HeldJournal) -> list[str]:
    return [r.event.key for r in held.read()]


def release(held: HeldJournal, writer: JournalWriter) -> None:
    """End the group with a submission of no events; let the held append go on; wait for the group.

    The last submission's action runs once the group is over (committed, refused in
    parts or failed), after every other submission of the group was settled.
    """
    over = threading.Event()
    writer.submit((), want_ack=False, after=lambda _committed: over.set())
    held.gate.set()
    assert over.wait(WAIT)


def outcome(ack: Ack | None) -> object:
    assert ack is not None
    try:
        return ack.wait(WAIT)
    except Exception as exc:  # noqa: BLE001 - the outcome is what the test compares
        return exc


def snapshot(writer: JournalWriter) -> None:
    writer.submit_snapshot("agent/a", b"state")


@pytest.mark.parametrize("where", ["first", "before the snapshot", "last"])
def test_an_event_whose_stream_raises_a_type_error_is_refused_alone(
    held: HeldJournal, writer: JournalWriter, where: str
) -> None:
    # Its agent is no str, so its stream property raises TypeError: a refusal, which
    # bisects the group until it stands alone; the rest is stored.
    submit: dict[str, Callable[[], Ack | None]] = {
        "good": lambda: writer.submit([change("a", 1)]),
        "bad": lambda: writer.submit([change(5, 0)]),
        "snapshot": lambda: snapshot(writer),
    }
    order = {
        "first": ["bad", "good", "snapshot"],
        "before the snapshot": ["good", "bad", "snapshot"],
        "last": ["good", "snapshot", "bad"],
    }[where]
    acks = {name: submit[name]() for name in order}
    release(held, writer)

    assert outcome(acks["good"]) == [2]
    error = outcome(acks["bad"])
    assert isinstance(error, TypeError)
    assert "can only concatenate str" in str(error)
    assert writer.failure is None
    assert keys(held) == ["z0", "a1"]


def test_each_snapshot_covers_its_streams_last_event_wherever_the_group_holds_it(
    held: HeldJournal, writer: JournalWriter
) -> None:
    # Seq 1 is z0 (committed before). The group: c0 (2), a0 (3), b0 (4), e0..e19 (5..24), e20 (25).
    writer.submit_nowait([change("c", 0)])
    writer.submit_nowait([change("a", 0)])
    writer.submit_snapshot("agent/a", b"a")  # its event just before it
    writer.submit_nowait([change("b", 0)])
    writer.submit_nowait([change("e", i) for i in range(20)])
    writer.submit_snapshot("agent/b", b"b")  # its event 20 events back
    writer.submit_nowait([change("e", 20)])
    writer.submit_snapshot("agent/c", b"c")  # its event at the group's start
    writer.submit_snapshot("agent/z", b"z")  # none in the group: committed at seq 1
    writer.submit_snapshot("agent/nobody", b"n")  # none at all: not saved
    writer.submit_snapshot("agent/e", b"e")  # its event just before it, again
    release(held, writer)
    writer.flush(WAIT)  # the snapshots of the group's own events are saved with the next commit

    assert held.batches[:2] == [1, 24]  # one group
    assert held.load_snapshot("agent/a") == Snapshot("agent/a", 3, b"a")
    assert held.load_snapshot("agent/b") == Snapshot("agent/b", 4, b"b")
    assert held.load_snapshot("agent/c") == Snapshot("agent/c", 2, b"c")
    assert held.load_snapshot("agent/z") == Snapshot("agent/z", 1, b"z")
    assert held.load_snapshot("agent/nobody") is None
    assert held.load_snapshot("agent/e") == Snapshot("agent/e", 25, b"e")


class Item:
    __slots__ = ("stream",)

    def __init__(self, stream: str) -> None:
        self.stream = stream


STREAMS = ["a", "b", "c", "d"]


@given(
    st.lists(
        st.one_of(
            st.lists(st.sampled_from(STREAMS), max_size=25).map(lambda s: ("events", s)),
            st.sampled_from([*STREAMS, "e"]).map(lambda s: ("lookup", s)),
        ),
        max_size=12,
    )
)
def test_a_snapshots_lookup_answers_as_an_index_of_every_stream_read_in_order(
    steps: list[tuple[str, Any]],
) -> None:
    # The writer's own index, built by reading every event's stream into a dict in order.
    events: list[Any] = []
    index = _StreamIndex(events)
    for kind, what in steps:
        if kind == "events":
            events.extend(Item(s) for s in what)
            continue
        model: dict[str, int] = {}
        for i, item in enumerate(events):
            model[item.stream] = i
        assert index.last_of(what) == model.get(what)


def test_a_group_notes_its_publications_and_only_those_with_agents(
    held: HeldJournal, writer: JournalWriter
) -> None:
    def published(agents: tuple[str, ...]) -> TaskContextPublished:
        return TaskContextPublished(at=1.0, task_id="t", context={}, agents=agents)

    writer.submit_nowait([change("a", 1), published(("a", "b"))])  # seqs 2, 3
    writer.submit_nowait([published(())])  # 4: to nobody
    writer.submit_nowait([change("a", 2), published(("c",))])  # 5, 6
    release(held, writer)

    assert writer._publishes == {3: {"a", "b"}, 6: {"c"}}


def test_a_journal_that_returns_too_few_seqs_stops_the_writer(
    held: HeldJournal, writer: JournalWriter
) -> None:
    # The group's events and seqs are paired strictly, even in a group with no publication.
    held.short_by = 1
    writer.submit_nowait([change("a", 1), change("a", 2)])
    held.gate.set()
    assert writer._ended.wait(WAIT)

    assert isinstance(writer.failure, JournalFailedError)
    assert "zip() argument 2 is shorter than argument 1" in str(writer.failure)


def test_in_a_group_each_waiter_gets_its_own_seqs_past_submissions_nobody_waits_for(
    held: HeldJournal, writer: JournalWriter
) -> None:
    told: list[tuple[str, bool]] = []
    writer.submit_nowait([change("a", 1), change("a", 2)])  # 2, 3: no ack, no action
    first = writer.submit([change("a", 3)])  # 4
    writer.submit_nowait([change("a", 4)])  # 5
    writer.submit_nowait(
        [change("a", 5), change("a", 6)], after=lambda ok: told.append(("after", ok))
    )  # 6, 7
    both = writer.submit([change("a", 7)], after=lambda ok: told.append(("both", ok)))  # 8
    writer.submit_nowait([change("a", 8)])  # 9
    release(held, writer)

    assert outcome(first) == [4]
    assert outcome(both) == [8]
    assert told == [("after", True), ("both", True)]
    assert held.batches == [1, 8]  # one group
