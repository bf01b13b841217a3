"""``JournalContract``: the behaviour every journal backend must show, as pytest tests.

A backend's test module subclasses it and overrides the ``journal`` fixture (and,
for a persistent backend, ``reopen``)::

    class TestLmdbJournal(JournalContract):
        @pytest.fixture
        def journal(self, tmp_path: Path) -> Iterator[Journal]:
            with LmdbJournal.open(tmp_path / "j", map_size=1 << 24) as journal:
                yield journal

        def reopen(self, journal: Journal) -> Journal:
            assert isinstance(journal, LmdbJournal)  # the base class has no path
            journal.close()
            return LmdbJournal.open(journal.path)

The class has no ``Test`` prefix, so pytest never collects it on its own. This
module imports pytest; the package ``cogfabric.store`` does not import it.

What it does not check is each backend's own to test: that ``verify`` finds damage
(it verifies intact journals only: how to damage one depends on the backend), that a
read-only journal refuses appends, and ``open`` itself. Passing it does not let the
runtime use a backend: ``Runtime.open`` opens the LMDB journal only.
"""

from __future__ import annotations

import contextlib
import math
import threading
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from cogfabric.events import (
    AgentSpawned,
    CognitiveState,
    CognitiveStateSet,
    Event,
    EventVersionError,
    InvalidEventError,
    Message,
    PrivateSet,
    SessionCreated,
    SessionMessageAdded,
    TaskContextSet,
    UnencodableValueError,
)

from ._errors import InvalidStreamError, JournalClosedError, JournalConflictError
from ._journal import Journal, Snapshot

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["JournalContract", "make_events"]


def make_events(count: int, *, agents: int = 3, start: int = 0, value: Any = "v") -> list[PrivateSet]:  # noqa: ANN401
    """``count`` PrivateSet events spread over ``agents`` agents named ``a0``, ``a1``, ..."""
    return [
        PrivateSet(at=float(start + i), agent=f"a{(start + i) % agents}", key=f"k{start + i}", value=value)
        for i in range(count)
    ]


class JournalContract:
    """The journal contract. Subclass it and override ``journal`` (and ``reopen``)."""

    is_persistent = True
    """Whether data survives ``close()`` and ``reopen``."""

    @pytest.fixture
    def journal(self) -> Iterator[Journal]:
        """An empty, open journal; backends must override this fixture."""
        msg = "backend test classes must override the `journal` fixture"
        raise NotImplementedError(msg)

    def reopen(self, journal: Journal) -> Journal:
        """Close ``journal`` and open the same journal again (persistent backends)."""
        raise NotImplementedError

    # --------------------------------------------------------------- appending

    def test_an_empty_journal_has_no_records(self, journal: Journal) -> None:
        assert journal.last_seq == 0
        assert list(journal.read()) == []
        assert journal.verify().ok

    def test_append_returns_gapless_seqs_from_one(self, journal: Journal) -> None:
        first = journal.append(make_events(3))
        second = journal.append(make_events(2, start=3))

        assert first == [1, 2, 3]
        assert second == [4, 5]
        assert journal.last_seq == 5

    def test_appending_nothing_writes_nothing(self, journal: Journal) -> None:
        assert journal.append([]) == []
        assert journal.last_seq == 0

    def test_records_come_back_in_order_with_their_events(self, journal: Journal) -> None:
        events = make_events(5, value={"nested": [1, 2, {"x": None}]})
        journal.append(events)

        records = list(journal.read())

        assert [r.seq for r in records] == [1, 2, 3, 4, 5]
        assert [r.event for r in records] == events
        assert [r.stream for r in records] == [e.stream for e in events]

    def test_retrying_an_append_with_the_same_ids_writes_nothing_twice(self, journal: Journal) -> None:
        events = make_events(4)
        journal.append(events[:2])

        seqs = journal.append(events)

        assert seqs == [1, 2, 3, 4]
        assert journal.last_seq == 4
        assert [r.event.id for r in journal.read()] == [e.id for e in events]

    def test_an_id_repeated_within_one_batch_is_stored_once(self, journal: Journal) -> None:
        event = make_events(1)[0]

        seqs = journal.append([event, event])

        assert seqs == [1, 1]
        assert journal.last_seq == 1

    def test_another_event_under_a_stored_or_repeated_id_is_a_conflict_not_a_retry(
        self, journal: Journal
    ) -> None:
        stored = make_events(1)[0]
        journal.append([stored])
        impostor = msgspec.structs.replace(stored, value="other")  # the same id, other content
        fresh = make_events(1, start=1)[0]

        with pytest.raises(JournalConflictError, match="stored at seq 1") as info:
            journal.append([fresh, impostor])
        with pytest.raises(JournalConflictError, match="given twice in the batch"):
            journal.append([fresh, msgspec.structs.replace(fresh, value="other")])

        assert (info.value.event_id, info.value.seq) == (stored.id, 1)
        assert journal.last_seq == 1  # nothing of either batch is stored
        assert journal.append([fresh, stored]) == [2, 1]  # a true retry is still acknowledged

    def test_a_retry_equal_to_the_stored_event_is_acknowledged_whatever_its_bytes(
        self, journal: Journal
    ) -> None:
        # the stored copy read back (an int time reads as a float) and a mapping in
        # another key order encode to other bytes, yet are the same event
        first = PrivateSet(id="e-int-time", at=0, agent="a0", key="k", value={"x": 1, "y": 2})
        second = PrivateSet(id="e-keys", at=1.0, agent="a0", key="k", value={"x": 1, "y": 2})
        assert journal.append([first, second]) == [1, 2]
        read_back = next(iter(journal.read())).event

        assert journal.append([read_back]) == [1]
        assert journal.append([msgspec.structs.replace(second, value={"y": 2, "x": 1})]) == [2]
        assert journal.append([second, msgspec.structs.replace(second, value={"y": 2, "x": 1})]) == [2, 2]
        assert journal.last_seq == 2
        with pytest.raises(JournalConflictError, match="stored at seq 2"):
            journal.append([msgspec.structs.replace(second, value={"y": 2, "x": 2})])
        # equal by == but not the same value: True is not 1, 1.0 is not 1, -0.0 is not 0.0
        third = msgspec.structs.replace(second, id="e-zero", value={"z": 0.0})
        assert journal.append([third]) == [3]
        for equal_by_eq in ({"x": True, "y": 2}, {"x": 1.0, "y": 2}):
            with pytest.raises(JournalConflictError, match="stored at seq 2"):
                journal.append([msgspec.structs.replace(second, value=equal_by_eq)])
        with pytest.raises(JournalConflictError, match="stored at seq 3"):
            journal.append([msgspec.structs.replace(third, value={"z": -0.0})])
        # keys msgspec cannot sort (not str): the same mapping read back is still a retry
        keyed = PrivateSet(id="e-keyed", at=0, agent="a0", key="k", value={None: 1, 2: "b"})
        assert journal.append([keyed]) == [4]
        keyed_back = next(iter(journal.read(after=3))).event
        assert journal.append([keyed_back]) == [4]
        with pytest.raises(JournalConflictError, match="stored at seq 4"):
            journal.append([msgspec.structs.replace(keyed, value={None: 1, 2: "c"})])

    def test_a_batch_with_an_unencodable_event_writes_nothing(self, journal: Journal) -> None:
        good = make_events(2)
        bad = PrivateSet(at=0.0, agent="a0", key="k", value=object())

        with pytest.raises(UnencodableValueError):
            journal.append([*good, bad])

        assert journal.last_seq == 0
        assert journal.append(good) == [1, 2]

    def test_an_event_not_at_its_types_current_version_writes_nothing(self, journal: Journal) -> None:
        # it could never be read back: msgspec checks ``v`` only when it decodes
        with pytest.raises(EventVersionError):
            journal.append([*make_events(2), PrivateSet(at=0.0, agent="a0", key="k", v=2)])

        assert journal.last_seq == 0

    @pytest.mark.parametrize(
        "bad",
        [
            PrivateSet(at=0.0, agent="a0", key=5),  # type: ignore[arg-type]
            PrivateSet(at="now", agent="a0", key="k"),  # type: ignore[arg-type]
            TaskContextSet(at=0.0, agent="a0", context={1: "x"}),  # type: ignore[dict-item]
            CognitiveStateSet(at=0.0, agent="a0", state=CognitiveState(schema_version=2)),
        ],
        ids=["int key", "str time", "int context key", "future cognitive state"],
    )
    def test_an_event_whose_fields_would_not_read_back_writes_nothing(
        self, journal: Journal, bad: Event
    ) -> None:
        # msgspec checks field types when it decodes, not when an event is built: stored,
        # this event would stop every later read of the journal at its seq
        with pytest.raises(
            InvalidEventError, match=f"event 2 \\({type(bad).__name__}\\) would not read back"
        ):
            journal.append([*make_events(2), bad])

        assert journal.last_seq == 0
        assert journal.append(make_events(2)) == [1, 2]
        assert [r.seq for r in journal.read()] == [1, 2]

    @pytest.mark.parametrize("at", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
    def test_an_event_whose_time_is_not_finite_writes_nothing(self, journal: Journal, at: float) -> None:
        # it would read back, but no session expires by it, and strict JSON has no such number
        good = make_events(2)
        bad = PrivateSet(at=at, agent="a0", key="k")
        with pytest.raises(InvalidEventError, match=r"event 2 \(PrivateSet\): its time `at` must be finite"):
            journal.append([*good, bad])

        assert journal.last_seq == 0  # the batch is refused whole
        assert journal.append(good) == [1, 2]  # and the journal is still usable

    @pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
    @pytest.mark.parametrize("where", ["message", "seed", "priority"])
    def test_an_event_whose_message_time_or_priority_is_not_finite_writes_nothing(
        self, journal: Journal, where: str, number: float
    ) -> None:
        # the runtime refuses each as it is given it; stored, an export shows null
        bad: Event
        if where == "message":
            message = Message(role="user", content="x", time=number)
            bad = SessionMessageAdded(at=0.0, session="s", message=message)
            rule = "its message's time must be finite seconds"
        elif where == "seed":
            seed = Message(role="system", content="x", time=number)
            bad = SessionCreated(at=0.0, session="s", user_id="u", seed=seed)
            rule = "its message's time must be finite seconds"
        else:
            bad = AgentSpawned(at=0.0, agent="a0", priority=number)
            rule = "its priority must be a finite number"
        good = make_events(2)
        with pytest.raises(InvalidEventError) as refused:
            journal.append([*good, bad])

        assert str(refused.value) == f"event 2 ({type(bad).__name__}): {rule}, got {number!r}"
        assert journal.last_seq == 0  # the batch is refused whole
        assert journal.append(good) == [1, 2]  # and the journal is still usable

    def test_an_event_whose_stream_cannot_be_stored_is_refused(self, journal: Journal) -> None:
        with pytest.raises(InvalidStreamError):
            journal.append([PrivateSet(at=0.0, agent="x" * 300, key="k")])
        with pytest.raises(InvalidStreamError):
            journal.append([PrivateSet(at=0.0, agent="nul\0", key="k")])
        for bad_name in ("nul\0", "x" * 300, "lone \udc80"):
            with pytest.raises(InvalidStreamError):
                list(journal.read(stream=bad_name))
            with pytest.raises(InvalidStreamError):
                journal.load_snapshot(bad_name)

        assert journal.last_seq == 0

    def test_concurrent_appends_get_distinct_gapless_seqs(self, journal: Journal) -> None:
        threads = 4
        barrier = threading.Barrier(threads, timeout=10)
        results: list[list[int]] = []
        lock = threading.Lock()

        def worker(n: int) -> None:
            barrier.wait()
            for i in range(10):
                seqs = journal.append(make_events(5, start=n * 1000 + i * 5))
                with lock:
                    results.append(seqs)

        pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(timeout=30)

        assert not any(t.is_alive() for t in pool)
        assert sorted(s for seqs in results for s in seqs) == list(range(1, 201))
        assert all(seqs == list(range(seqs[0], seqs[0] + 5)) for seqs in results)

    # --------------------------------------------------------------- reading

    def test_read_after_and_until_select_a_slice(self, journal: Journal) -> None:
        journal.append(make_events(10))

        assert [r.seq for r in journal.read(after=7)] == [8, 9, 10]
        assert [r.seq for r in journal.read(until=2)] == [1, 2]
        assert [r.seq for r in journal.read(after=3, until=5)] == [4, 5]
        assert [r.seq for r in journal.read(after=4, until=5)] == [5]
        assert list(journal.read(after=5, until=5)) == []
        assert list(journal.read(after=6, until=2)) == []
        assert list(journal.read(after=10)) == []

    def test_read_of_a_stream_returns_only_its_records(self, journal: Journal) -> None:
        journal.append(make_events(9, agents=3))

        assert [r.seq for r in journal.read(stream="agent/a1")] == [2, 5, 8]
        assert [r.seq for r in journal.read(stream="agent/a1", after=2, until=7)] == [5]
        assert list(journal.read(stream="agent/nobody")) == []

    @pytest.mark.parametrize(("after", "until"), [(0, None), (1, 300), (63, 200), (127, 129), (250, None)])
    def test_stream_reads_agree_with_a_filtered_full_read(
        self, journal: Journal, after: int, until: int | None
    ) -> None:
        # Uneven batches and streams of uneven lengths, longer than any index stride.
        for start, size in ((0, 1), (1, 70), (71, 3), (74, 200), (274, 56)):
            journal.append(make_events(size, agents=1 + start % 4, start=start))
        everything = list(journal.read())

        for stream in journal.streams():
            expected = [
                r.seq
                for r in everything
                if r.stream == stream and r.seq > after and (until is None or r.seq <= until)
            ]
            assert [r.seq for r in journal.read(stream=stream, after=after, until=until)] == expected

    def test_a_stream_longer_than_one_chunk_reads_whole(self, journal: Journal) -> None:
        journal.append(make_events(2600, agents=2))

        seqs = [r.seq for r in journal.read(stream="agent/a1")]

        assert seqs == list(range(2, 2601, 2))
        assert [r.seq for r in journal.read(stream="agent/a1", after=2000, until=2011)] == list(
            range(2002, 2011, 2)
        )

    def test_read_sees_the_journal_as_it_was_when_called(self, journal: Journal) -> None:
        journal.append(make_events(3))
        records = journal.read()

        journal.append(make_events(3, start=3))

        assert [r.seq for r in records] == [1, 2, 3]

    def test_read_streams_more_records_than_one_chunk(self, journal: Journal) -> None:
        journal.append(make_events(2500))

        assert sum(1 for _ in journal.read()) == 2500
        assert [r.seq for r in journal.read(after=2498)] == [2499, 2500]

    def test_task_context_events_round_trip_with_nested_values(self, journal: Journal) -> None:
        event = TaskContextSet(at=1.5, agent="a", context={"goal": "g", "deps": [1, 2.5, None, True]})

        journal.append([event])

        assert next(iter(journal.read())).event == event

    def test_stream_head_is_the_seq_of_a_streams_newest_record(self, journal: Journal) -> None:
        journal.append(make_events(8, agents=3))
        journal.append(make_events(1, agents=3, start=8))

        assert journal.stream_head("agent/a0") == 7
        assert journal.stream_head("agent/a2") == 9
        assert journal.stream_head("agent/nobody") == 0

    @pytest.mark.parametrize("before", [None, 0, 1, 2, 64, 65, 130, 200, 255, 256, 274, 330, 331, 10_000])
    def test_read_back_is_a_streams_read_newest_first(self, journal: Journal, before: int | None) -> None:
        # Streams longer than any index stride, of uneven lengths, in uneven batches.
        for start, size in ((0, 1), (1, 70), (71, 3), (74, 200), (274, 56)):
            journal.append(make_events(size, agents=1 + start % 4, start=start))

        for stream in journal.streams():
            until = None if before is None else before - 1
            expected = list(journal.read(stream=stream, until=until)) if until is None or until > 0 else []
            assert list(journal.read_back(stream, before=before)) == expected[::-1]

    def test_read_back_stops_where_its_caller_does_and_knows_no_other_stream(self, journal: Journal) -> None:
        journal.append(make_events(2600, agents=2))

        newest = journal.read_back("agent/a1")
        assert [next(newest).seq for _ in range(3)] == [2600, 2598, 2596]
        assert list(journal.read_back("agent/nobody")) == []
        with pytest.raises(InvalidStreamError):
            journal.read_back("agent/a\0b")

    def test_record_intact_checks_one_record_and_refuses_a_missing_one(self, journal: Journal) -> None:
        journal.append(make_events(5))

        assert [journal.record_intact(seq) for seq in range(7)] == [
            False,
            True,
            True,
            True,
            True,
            True,
            False,
        ]

    def test_stream_start_is_the_seq_of_a_streams_first_record(self, journal: Journal) -> None:
        journal.append(make_events(2, agents=1, start=0))  # a0 at seqs 1, 2
        journal.append(make_events(300, agents=3, start=0))  # a0, a1, a2 in turn: seqs 3..302

        assert journal.stream_start("agent/a0") == 1
        assert journal.stream_start("agent/a1") == 4
        assert journal.stream_start("agent/a2") == 5
        assert journal.stream_start("agent/nobody") == 0

    def test_streams_lists_each_stream_once_by_prefix(self, journal: Journal) -> None:
        journal.append(make_events(9, agents=3))
        journal.append([TaskContextSet(at=0.0, agent="b", context={})])

        assert journal.streams() == ["agent/a0", "agent/a1", "agent/a2", "agent/b"]
        assert journal.streams("agent/a") == ["agent/a0", "agent/a1", "agent/a2"]
        assert journal.streams("session/") == []

    # --------------------------------------------------------------- snapshots

    def test_a_stream_without_snapshot_loads_none(self, journal: Journal) -> None:
        assert journal.load_snapshot("agent/a0") is None

    def test_the_latest_snapshot_of_a_stream_is_loaded(self, journal: Journal) -> None:
        journal.append(make_events(6))
        journal.save_snapshot(Snapshot("agent/a0", 1, b"one"))
        journal.save_snapshot(Snapshot("agent/a0", 4, b"four"))
        journal.save_snapshot(Snapshot("agent/a1", 5, b"five"))

        assert journal.load_snapshot("agent/a0") == Snapshot("agent/a0", 4, b"four")
        assert journal.load_snapshot("agent/a1") == Snapshot("agent/a1", 5, b"five")

    def test_snapshots_saved_with_an_append_are_atomic_with_it(self, journal: Journal) -> None:
        seqs = journal.append(make_events(2), snapshots=[Snapshot("agent/a0", 2, b"s")])

        assert seqs == [1, 2]
        assert journal.load_snapshot("agent/a0") == Snapshot("agent/a0", 2, b"s")

    def test_a_snapshot_past_the_last_seq_is_refused(self, journal: Journal) -> None:
        journal.append(make_events(2))

        with pytest.raises(ValueError):  # noqa: PT011 - Journal.append names the type, not its message
            journal.save_snapshot(Snapshot("agent/a0", 3, b"s"))
        with pytest.raises(ValueError):  # noqa: PT011 - past the batch's last seq: nothing of it is stored
            journal.append(make_events(2, start=2), snapshots=[Snapshot("agent/a0", 5, b"s")])

        assert journal.load_snapshot("agent/a0") is None
        assert journal.last_seq == 2

    # --------------------------------------------------------------- integrity

    def test_verify_passes_on_an_untouched_journal(self, journal: Journal) -> None:
        journal.append(make_events(50))
        journal.save_snapshot(Snapshot("agent/a0", 10, b"x"))

        report = journal.verify(decode=True)

        assert report.ok
        assert report.checked == 50
        assert report.head_seq == 50
        assert report.first_bad_seq is None

    def test_verify_of_a_tail_checks_only_records_after_it(self, journal: Journal) -> None:
        journal.append(make_events(20))

        report = journal.verify(after=15)

        assert report.ok
        assert report.checked == 5

    # --------------------------------------------------------------- lifecycle

    def test_close_is_idempotent_and_use_after_close_raises(self, journal: Journal) -> None:
        journal.append(make_events(1))

        journal.close()
        journal.close()

        assert journal.closed
        with pytest.raises(JournalClosedError):
            journal.append(make_events(1, start=1))
        with pytest.raises(JournalClosedError):
            list(journal.read())
        with pytest.raises(JournalClosedError):
            journal.verify()

    def test_every_method_that_reads_or_writes_raises_after_close(self, journal: Journal) -> None:
        journal.append(make_events(2))
        journal.save_snapshot(Snapshot("agent/a0", 1, b"snap"))
        journal.close()

        calls: dict[str, Callable[[], object]] = {
            "last_seq": lambda: journal.last_seq,
            "read_back": lambda: list(journal.read_back("agent/a0")),
            "stream_head": lambda: journal.stream_head("agent/a0"),
            "stream_start": lambda: journal.stream_start("agent/a0"),
            "streams": journal.streams,
            "load_snapshot": lambda: journal.load_snapshot("agent/a0"),
            "save_snapshot": lambda: journal.save_snapshot(Snapshot("agent/a0", 2, b"snap")),
            "record_intact": lambda: journal.record_intact(1),
        }
        answered = {}
        for name, call in calls.items():
            with contextlib.suppress(JournalClosedError):
                answered[name] = call()
        assert answered == {}, "these answered after close() instead of raising JournalClosedError"
        assert journal.closed

    def test_reopening_keeps_every_record_and_snapshot(self, journal: Journal) -> None:
        if not self.is_persistent:
            pytest.skip("the backend is not persistent")
        events = make_events(30)
        journal.append(events)
        journal.save_snapshot(Snapshot("agent/a2", 30, b"snap"))

        reopened = self.reopen(journal)
        try:
            assert [r.event for r in reopened.read()] == events
            assert reopened.load_snapshot("agent/a2") == Snapshot("agent/a2", 30, b"snap")
            assert reopened.append(make_events(1, start=30)) == [31]
            assert reopened.verify().ok
        finally:
            reopened.close()
