"""A model-based test of the LMDB journal's linked stream index.

Random batches over streams that share a prefix (``a`` and ``aa``), with stored, new
and repeated ids, snapshot-only appends, refused batches and reopens, on a small map
that has to grow; the read chunk, the anchor stride and the head cache are shrunk so
that every boundary is crossed. After each step every stream read, ``stream_head``,
the head cache and ``verify`` must agree with the model.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cogfabric.events import PrivateSet
from cogfabric.store import InvalidStreamError, Snapshot
from cogfabric.store import _lmdb as lmdb_module
from cogfabric.store import _verify as verify_module
from cogfabric.store._lmdb import LmdbJournal

AGENTS = ("a", "b", "c", "aa")

Model = list[tuple[int, str, str]]  # (seq, stream, id)

_item = st.tuples(st.integers(0, 3), st.integers(0, 9), st.integers(0, 3))  # agent, id kind, size
_op = st.one_of(
    st.tuples(st.just("append"), st.lists(_item, min_size=1, max_size=40)),
    st.tuples(st.just("snapshot"), st.integers(0, 3)),
    st.tuples(st.just("refused"), st.integers(1, 5)),
    st.tuples(st.just("reopen"), st.none()),
)


def _check(journal: LmdbJournal, model: Model, data: st.DataObject) -> None:
    assert [(r.seq, r.stream, r.event.id) for r in journal.read()] == model
    last = len(model)
    for agent in AGENTS:
        stream = "agent/" + agent
        mine = [seq for seq, s, _ in model if s == stream]
        assert journal.stream_head(stream) == (mine[-1] if mine else 0)
        assert journal.stream_start(stream) == (mine[0] if mine else 0)
        drawn = data.draw(st.lists(st.integers(-1, last + 2), max_size=6))
        points = sorted({0, last, *mine[:3], *mine[-3:], *drawn})
        for after in points:
            for until in (None, *points):
                got = [r.seq for r in journal.read(stream=stream, after=after, until=until)]
                assert got == [q for q in mine if q > after and (until is None or q <= until)], (
                    stream,
                    after,
                    until,
                )
    with journal._env.begin() as txn:
        for stream, head in journal._heads.items():
            stored = head[1] + head[2].to_bytes(8, "big") + head[4]  # last | count | first
            assert txn.get(stream.encode(), db=journal._db_heads) == stored
    report = journal.verify(decode=True)
    assert report.ok, report
    if last > 3:
        assert journal.verify(after=last // 2).ok


class _Run:
    """The journal under test, the model it must match, and the ids stored so far."""

    def __init__(self, path: Path, data: st.DataObject) -> None:
        self.path = path
        self.data = data
        # sync=False: a commit's fsync is the disk's, not the index's (only a power cut tells them apart)
        self.journal = LmdbJournal.open(path, map_size=1 << 16, sync=False)
        self.model: Model = []
        self.ids: dict[str, int] = {}
        self.stored: dict[str, PrivateSet] = {}
        self.counter = itertools.count()

    def append(self, items: list[tuple[int, int, int]]) -> None:
        batch: list[PrivateSet] = []
        for agent, id_kind, size in items:
            # a stored or repeated id comes back as a retry: the same event (other content
            # under one id is a conflict, refused: the contract's own test)
            if id_kind == 0 and self.ids:
                batch.append(self.stored[self.data.draw(st.sampled_from(sorted(self.ids)))])
            elif id_kind == 1 and batch:
                batch.append(self.data.draw(st.sampled_from(batch)))
            else:
                value = "x" * (size * 700)
                event_id = f"id{next(self.counter)}"
                batch.append(PrivateSet(at=0.0, agent=AGENTS[agent], key="k", value=value, id=event_id))
        expected: list[int] = []
        seen: dict[str, int] = {}
        new: list[PrivateSet] = []
        for event in batch:
            if event.id not in self.ids and event.id not in seen:
                seen[event.id] = len(self.model) + len(new) + 1
                new.append(event)
            expected.append(self.ids.get(event.id) or seen[event.id])

        assert self.journal.append(batch) == expected

        for event in new:
            self.model.append((len(self.model) + 1, event.stream, event.id))
            self.ids[event.id] = len(self.model)
            self.stored[event.id] = event

    def step(self, kind: str, arg: Any) -> None:
        if kind == "append":
            self.append(arg)
        elif kind == "snapshot" and self.model:
            self.journal.append([], snapshots=[Snapshot("agent/" + AGENTS[arg], len(self.model), b"s")])
        elif kind == "refused":
            batch = [PrivateSet(at=0.0, agent=AGENTS[i % 4], key="k", value=1) for i in range(arg)]
            with pytest.raises(InvalidStreamError):
                self.journal.append([*batch, PrivateSet(at=0.0, agent="x\0y", key="k", value=1)])
        elif kind == "reopen":
            self.journal.close()
            self.journal = LmdbJournal.open(self.path, sync=False)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    ops=st.lists(_op, min_size=1, max_size=12),
    data=st.data(),
    chunk=st.sampled_from([1, 2, 3, 5, 1024]),
    stride=st.sampled_from([2, 4, 64]),
    cache=st.sampled_from([1, 2, 65536]),
)
def test_stream_reads_heads_and_verify_agree_with_a_model(
    ops: list[tuple[str, Any]], data: st.DataObject, chunk: int, stride: int, cache: int
) -> None:
    budget = data.draw(st.sampled_from([1, 300, 2000, 16 << 20]), label="read bytes")
    with pytest.MonkeyPatch.context() as patch, tempfile.TemporaryDirectory() as tmp:
        patch.setattr(lmdb_module, "_READ_CHUNK", chunk)
        patch.setattr(lmdb_module, "_READ_BYTES", budget)  # chunks cut by their bytes, too
        patch.setattr(lmdb_module, "_ANCHOR_EVERY", stride)
        patch.setattr(verify_module, "_ANCHOR_EVERY", stride)
        patch.setattr(lmdb_module, "_HEADS_CACHE", cache)
        run = _Run(Path(tmp) / "j", data)
        try:
            for kind, arg in ops:
                run.step(kind, arg)
                _check(run.journal, run.model, data)
        finally:
            run.journal.close()
