"""Benchmark the agent fabric end to end: ring simulations, the handle path, spawning, recovery.

What it measures (each measurement on a fresh temporary directory, timed with
``time.perf_counter``, repeated ``--repeat`` times in interleaved rounds; the table shows
the median):

* Ring, batch durability: 100 agents in a ring (``behavior="ring"``, the next agent's id
  in the task context). Each agent gets one token, all in one broadcast (the agents
  subscribe to its topic before the clock starts); each delivery sets the private key
  ``last`` and, while the token has hops left, sends it on. A delivery journals three
  events (``IpcMessage``, ``IpcDelivered``, ``PrivateSet``), but the broadcast is one
  message for all the first deliveries. Counted: the journal records appended
  (``last_seq`` after minus before), from the broadcast until ``runtime.flush()``
  returns. Reference, in the same round: raw LMDB append of
  the same event mix with msgspec encoding in the loop, ``putmulti`` of 1000 per synced
  write transaction (as in bench/journal_append.py). Target: >= 0.25x. Beside it, the
  same ring on a memory-only runtime (``Runtime.open(None)``: the same agents, messages
  and events, no journal), counting the events made: the ceiling of the actor path,
  which bounds what any journal could reach in this ring; its deliveries are also
  counted against a ring of as many plain Pykka actors (one token each, a tell to the
  next a delivery, no runtime), with the process's CPU time a delivery of both: what the
  runtime's agents cost beside the actor library's threads and mailboxes; and
  ``Journal.append`` of the ring's events alone (no agents, no writer; the raw
  reference's batches of 1000, ``sync=True``, ``validate=False`` as the writer appends),
  the journal's own share, with its thread's CPU time. The memory-only ring and the
  journal's append alone are the ring's ceilings from either side: on one GIL the
  journaled ring spends the CPU time of both, but for what can overlap the agents' work
  (the journal's waits for its syncs, the C parts of its puts and commits). Each run
  also reports how bunched its deliveries were: the share that found more mail already
  waiting in the agent's mailbox. In the runs seen, those where the tokens travel in
  convoys (near 100%) were the fast ones. The same journaled ring runs again under
  another GIL switch interval (``sys.setswitchinterval``, ``--switch-interval``, 50 ms
  unless told; Python's default is 5 ms), restored after each run: in the runs we made,
  the longer interval did away with the spread-out runs (docs/performance.md, "The batch
  ring and the GIL"). Beside each run, its CPU time (``getrusage``: the process's user
  and system time), the journal writer thread's own CPU time (its
  ``pthread_getcpuclockid`` clock), the cyclic garbage collector's passes (how many, how
  many full, their time), and the voluntary context switches per delivery: what the run
  spent, and on what.
* Ring, sync durability, 1,000 agents: acknowledged state changes per second (one
  ``PrivateSet`` per delivery, durable before the behavior goes on), and all journaled
  events per second. Target: >= 5,000 changes/s. Beside each run, its CPU time (as the
  batch ring's), the voluntary and involuntary context switches per delivery, and the
  journaled events per commit (the LMDB environment's write transactions over the run):
  how many changes shared each sync.
* Handle path: ``runtime.agent(id).set_private(k, v)`` from 1, 4 and 16 caller threads,
  each thread on its own agent, in both durabilities; timed until ``runtime.flush()``
  returns, so batch figures count durable changes too. Ratios are against one thread.
* Reading every agent after a round (``round-read``): 1,000 idle agents of one task, each
  with a task context and two private keys its behavior set in the round (one broadcast,
  then ``runtime.settle()``), memory-only and with a journal in batch durability. Side by
  side in the same runtime, ``--round-read-passes`` passes each, interleaved: the
  per-agent handle loop (``runtime.agent(a).context_view()`` for each agent) and
  ``runtime.context_views()``; the same for ``cognitive_state()`` and
  ``runtime.cognitive_states()``; and a handle loop of ``private(key)``. Each pass is
  checked to read what the round left. Ratios are against the handle loop.
* Spawning 10,000 agents with ``runtime.spawn_many`` (or ``runtime.spawn`` from 8 threads
  where it is missing; the row says which), sync durability: the time until it returns,
  and the growth of the peak RSS it causes (``VmHWM`` of /proc/self/status, not
  ``ru_maxrss``, which survives ``exec``), measured in a fresh child process per run so
  that earlier workloads do not mask it. A second row times the ``close()`` that follows:
  flush, stop every agent, close the journal.
* Fan-out, batch durability: one ``bus.broadcast`` to 1,000 and to 10,000 idle agents,
  timed until every behavior has handled it, and one ``publish_task_context`` to as
  many, timed until each has applied it; the 10,000 again under the longer GIL switch
  interval. Every recipient's thread wakes at once: how that scales with their number.
* Recovery: a journal of 1,000 agents and 1,000,000 ``PrivateSet`` events (built once per
  run, directly with ``Journal.open(path, sync=False)``; in a second copy with a snapshot
  every 200 events of each agent), reopened with ``Runtime.open(path, verify=...)``,
  ``"tail"`` and ``"full"``; timed until it returns (closing is not timed). The page
  cache is warm: the journals were just written. Target: with snapshots and ``"tail"``,
  under 2 s. Beside them, ``Journal.open(path, readonly=True)`` of the snapshots journal:
  what every open costs before it reads a record, nearly all of it the walk of every
  page of the file (store/_pages.py).

Run it from the repository root::

    .venv/bin/python bench/fabric.py               # full size
    .venv/bin/python bench/fabric.py --quick       # small counts, under a minute
    .venv/bin/python bench/fabric.py --only ring-batch,recovery --repeat 5 --json out.json
    .venv/bin/python bench/fabric.py --only round-read --repeat 5

A target is judged only at its workload's default size (the batch ring's 100 agents and
1,000 hops, the sync ring's 1,000 agents, the recovery's 1,000 agents and 1,000,000
events): a ``--quick`` run, or one with a size flag that changes these, shows none.

``--dir`` chooses where the temporary directories go: it must be a real disk (not tmpfs)
for synced commits to mean anything. Figures are noisy on shared machines; ratios
measured in one run hold better than absolute rates. To compare two commits, run this
script with another tree's ``PYTHONPATH``: the header and the JSON name the
``cogfabric`` imported (``cogfabric_source``, ``cogfabric_commit``) beside the script's
own commit (``commit``).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import queue
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import lmdb
import msgspec
import pykka
from _common import (
    directory,
    json_file,
    note_imported_cogfabric,
    positive,
    positive_seconds,
    subset_of,
    warn_if_tmpfs,
    write_json,
)
from _workloads import (
    RowSpec,
    Sample,
    Target,
    Timed,
    Workload,
    environment,
    format_table,
    median_extra,
    run_workloads,
)

from cogfabric._bench import start_ring
from cogfabric.actors import Config as RuntimeSettings
from cogfabric.actors import JournalConfig, Runtime, _agent
from cogfabric.actors._state import AgentSnapshot, apply_event, encode_snapshot
from cogfabric.events import AgentSpawned, Event, IpcDelivered, IpcMessage, PrivateSet, new_event_id
from cogfabric.store import Journal, Snapshot

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from cogfabric.actors import AgentContext

Durability = Literal["sync", "batch"]

MAP_SIZE: Final = 1 << 30
RAW_BATCH: Final = 1000
SNAPSHOT_EVERY: Final = 200
RECOVERY_BATCH: Final = 10_000
SPAWN_THREADS: Final = 8
HANDLE_THREADS: Final = (1, 4, 16)
GROUPS: Final = ("ring-batch", "ring-sync", "handle", "round-read", "spawn", "fanout", "recovery")

TARGET_RING_BATCH_RATIO: Final = 0.25
TARGET_RING_SYNC_RATE: Final = 5_000.0
TARGET_RECOVERY_SECONDS: Final = 2.0
# The sizes the issue sets each target at: a run of other sizes (--quick, a size flag)
# shows no target, since it says nothing of whether the target is met.
TARGET_RING_BATCH_SIZE: Final = (100, 1_000)  # agents, hops: --quick keeps the 100 agents
TARGET_RING_SYNC_AGENTS: Final = 1_000
TARGET_RECOVERY_SIZE: Final = (1_000, 1_000_000)  # agents, events

T0: Final = 1.7e9
# the runtime's fan-out window; 32 for a library from before FanOut (an A/B run's old side)
FANOUT_WINDOW: Final[int] = getattr(getattr(_agent, "FanOut", None), "WINDOW", 32)


# ---------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class Settings:
    """What to run: sizes, repeats, where the temporary directories go."""

    ring_batch_agents: int
    ring_batch_hops: int
    ring_sync_agents: int
    ring_sync_hops: int
    handle_ops: int
    handle_sync_ops: int
    round_read_agents: int
    round_read_passes: int
    spawn_agents: int
    fanout_agents: int
    recovery_agents: int
    recovery_events: int
    repeat: int
    timeout: float
    switch_interval: float
    only: tuple[str, ...]
    tmp_parent: str | None


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    add = p.add_argument
    add("--ring-batch-agents", type=positive, default=None, help="agents of the batch ring (100)")
    add("--ring-batch-hops", type=positive, default=None, help="deliveries per token, batch ring (1,000)")
    add("--ring-sync-agents", type=positive, default=None, help="agents of the sync ring (1,000)")
    add("--ring-sync-hops", type=positive, default=None, help="deliveries per token, sync ring (20)")
    add("--handle-ops", type=positive, default=None, help="set_private calls per batch run (40,000)")
    add("--handle-sync-ops", type=positive, default=None, help="set_private calls per sync run (3,000)")
    add("--round-read-agents", type=positive, default=None, help="idle agents read after a round (1,000)")
    add("--round-read-passes", type=positive, default=None, help="passes of each read per run (5)")
    add("--spawn-agents", type=positive, default=None, help="agents spawned at once (10,000)")
    add("--fanout-agents", type=positive, default=None, help="recipients of the largest fan-out (10,000)")
    add("--recovery-agents", type=positive, default=None, help="agents of the recovery journal (1,000)")
    add("--recovery-events", type=positive, default=None, help="PrivateSet events in it (1,000,000)")
    add("--repeat", type=positive, default=None, help="runs per measurement; median shown (3)")
    add(
        "--timeout",
        type=positive_seconds,
        default=600.0,
        help="seconds a ring may take before it counts as hung",
    )
    add(
        "--switch-interval",
        type=positive_seconds,
        default=0.05,
        help="the GIL switch interval (s) of the batch ring's extra row (0.05; the default is 0.005)",
    )
    add(
        "--only", type=subset_of(GROUPS), default=GROUPS, help=f"comma-separated subset of {','.join(GROUPS)}"
    )
    add("--quick", action="store_true", help="small counts and one run: a smoke test (< 1 minute)")
    add("--dir", type=directory, default=None, help="parent of the temporary directories (a real disk)")
    add("--json", type=json_file, default=None, metavar="FILE", help="also write the results here")
    # the spawn measurement runs in a child process of this script
    add("--spawn-child", type=Path, default=None, help=argparse.SUPPRESS)
    return p


def parse_args(argv: Sequence[str] | None = None) -> tuple[Settings, Path | None, Path | None]:
    args = _build_parser().parse_args(argv)
    quick = bool(args.quick)

    def pick(value: int | None, full: int, small: int) -> int:
        return value if value is not None else (small if quick else full)

    settings = Settings(
        ring_batch_agents=pick(args.ring_batch_agents, 100, 100),
        ring_batch_hops=pick(args.ring_batch_hops, 1_000, 40),
        ring_sync_agents=pick(args.ring_sync_agents, 1_000, 200),
        ring_sync_hops=pick(args.ring_sync_hops, 20, 5),
        handle_ops=pick(args.handle_ops, 40_000, 2_000),
        handle_sync_ops=pick(args.handle_sync_ops, 3_000, 200),
        round_read_agents=pick(args.round_read_agents, 1_000, 200),
        round_read_passes=pick(args.round_read_passes, 5, 2),
        spawn_agents=pick(args.spawn_agents, 10_000, 1_000),
        fanout_agents=pick(args.fanout_agents, 10_000, 500),
        recovery_agents=pick(args.recovery_agents, 1_000, 100),
        recovery_events=pick(args.recovery_events, 1_000_000, 50_000),
        repeat=pick(args.repeat, 3, 1),
        timeout=args.timeout,
        switch_interval=args.switch_interval,
        only=args.only,
        tmp_parent=args.dir,
    )
    return settings, args.json, args.spawn_child


def runtime_settings(durability: Durability) -> RuntimeSettings:
    return RuntimeSettings(journal=JournalConfig(durability=durability))


# ---------------------------------------------------------------------- measurements


class FabricBroken(RuntimeError):  # noqa: N818 - it names what it reports
    """The runtime hung or failed during a measurement (a finding, not a benchmark result)."""


def _clock(fn: Callable[[], dict[str, int]]) -> Sample:
    gc.collect()
    os.sync()  # the previous measurement's dirty pages are not this one's to write
    start = time.perf_counter()
    counts = fn()
    return Sample(time.perf_counter() - start, counts)


def spawn_agents(runtime: Runtime, specs: list[dict[str, Any]]) -> str:
    """Spawn ``specs``; return how (``spawn_many`` or ``spawn x8 threads``)."""
    spawn_many = getattr(runtime, "spawn_many", None)
    if spawn_many is not None:
        spawn_many(specs)
        return "spawn_many"
    errors: list[BaseException] = []

    def work(part: list[dict[str, Any]]) -> None:
        try:
            for spec in part:
                runtime.spawn(**spec)
        except BaseException as exc:  # noqa: BLE001 - re-raised by the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(specs[i::SPAWN_THREADS],)) for i in range(SPAWN_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return f"spawn x{SPAWN_THREADS} threads"


# ------------------------------------------------------------------ the ring


class RingTracker:
    """Counts tokens that finished their hops; records the first failure."""

    def __init__(self, tokens: int) -> None:
        self._lock = threading.Lock()
        self._left = tokens
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.behaviors: list[RingBehavior] = []

    def bunched(self) -> float:
        """The share of deliveries that found more mail already waiting behind them."""
        handled = sum(b.handled for b in self.behaviors)
        return sum(b.bunched for b in self.behaviors) / handled if handled else 0.0

    @property
    def left(self) -> int:
        with self._lock:
            return self._left

    def finished(self) -> None:
        with self._lock:
            self._left -= 1
            if self._left == 0:
                self.done.set()

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            if self.error is None:
                self.error = exc
        self.done.set()


class RingBehavior:
    """Record the token in the private layer; pass it on while it has hops left.

    The next agent's id is read from the task context once and kept (a fresh behavior,
    after a restart, reads it again).
    """

    def __init__(self, tracker: RingTracker) -> None:
        self._tracker = tracker
        self._next: str | None = None
        self.handled = 0
        self.bunched = 0  # deliveries with more mail waiting in this agent's mailbox
        tracker.behaviors.append(self)

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        self.handled += 1
        if ctx._actor.actor_inbox.qsize():  # noqa: SLF001 - a measurement of the run, not an API
            self.bunched += 1
        try:
            payload = message.payload
            ctx.set_private("last", payload)
            n = payload["n"]
            if n <= 0:
                self._tracker.finished()
                return
            if self._next is None:
                self._next = ctx.task_context()["next"]
            ctx.send(self._next, "tok", {"n": n - 1})
        except Exception as exc:
            self._tracker.failed(exc)
            raise


class CpuMeter:
    """Where a ring run's CPU time went: the process, its system share, the journal writer.

    ``getrusage`` for the whole process (user and system time, voluntary context
    switches) and the writer thread's own CPU clock (``pthread_getcpuclockid``), read
    around the timed run. The writer is the one live thread named after
    ``JournalWriterActor`` (Pykka names threads after their actor class) that did not
    exist before the runtime opened (``existing``: a stopped runtime's writer thread may
    still be finishing); without one (a memory-only runtime) its figure is left out.
    Beside them, Python's cyclic garbage collector: how many passes it made, how many of
    them full (the oldest generation, which scans every tracked object of the process),
    and the time they took (a ``gc.callbacks`` hook; passes never overlap).
    """

    def __init__(self, existing: set[int | None]) -> None:
        self._existing = existing
        self._usage: resource.struct_rusage | None = None
        self._writer_clock: int | None = None
        self._writer_start = 0.0
        self._figures: dict[str, float] = {}
        self._gc_began = 0.0
        self._gc = {"gc_passes": 0.0, "gc_full_passes": 0.0, "gc_seconds": 0.0}

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_began = time.perf_counter()
            return
        if not self._gc_began:
            return  # the end of a pass that began before the hook was added
        self._gc["gc_seconds"] += time.perf_counter() - self._gc_began
        self._gc_began = 0.0
        self._gc["gc_passes"] += 1
        if info["generation"] == 2:  # the oldest generation
            self._gc["gc_full_passes"] += 1

    def start(self) -> None:
        writers = [
            t
            for t in threading.enumerate()
            if t.name.startswith("JournalWriterActor") and t.ident not in self._existing
        ]
        self._writer_clock = None
        if len(writers) == 1 and writers[0].ident is not None:
            self._writer_clock = time.pthread_getcpuclockid(writers[0].ident)
            self._writer_start = time.clock_gettime(self._writer_clock)
        self._gc = dict.fromkeys(self._gc, 0.0)
        self._gc_began = 0.0
        gc.callbacks.append(self._on_gc)
        self._usage = resource.getrusage(resource.RUSAGE_SELF)

    def stop(self) -> None:
        after = resource.getrusage(resource.RUSAGE_SELF)
        self.detach()
        before = self._usage
        assert before is not None, "stop() before start()"
        system = after.ru_stime - before.ru_stime
        self._figures = {
            "cpu_seconds": after.ru_utime - before.ru_utime + system,
            "system_seconds": system,
            "voluntary_switches": float(after.ru_nvcsw - before.ru_nvcsw),
            "involuntary_switches": float(after.ru_nivcsw - before.ru_nivcsw),
        }
        self._figures.update(self._gc)
        if self._writer_clock is not None:
            self._figures["writer_cpu_seconds"] = time.clock_gettime(self._writer_clock) - self._writer_start

    def detach(self) -> None:
        """Stop counting the collector's passes (``stop`` does; a failed run must too)."""
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def figures(self, *, deliveries: int) -> dict[str, float]:
        """The figures of the last run, with context switches per delivery."""
        out = dict(self._figures)
        out["switches_per_delivery"] = out.pop("voluntary_switches") / deliveries
        out["involuntary_switches_per_delivery"] = out.pop("involuntary_switches") / deliveries
        return out


def _write_transactions(journal: Journal | None) -> int:
    """How many write transactions the journal's LMDB environment has committed (0 without one).

    Every group commit of the writer is one; the difference over a run is its commits.
    """
    if journal is None:
        return 0
    return int(journal._env.info()["last_txnid"])  # noqa: SLF001 - the LMDB journal's environment


def ring_ids(agents: int) -> list[str]:
    return [f"ring-{i:05d}" for i in range(agents)]


def run_ring(path: Path | None, agents: int, hops: int, durability: Durability, timeout: float) -> Sample:
    """One ring run: one token per agent, ``hops`` deliveries each.

    One broadcast to every agent starts all the tokens in one commit (``start_ring``).

    ``path=None`` runs it on a memory-only runtime: the same agents, behaviors, messages
    and events, with no journal; it counts the events made (``ring_events``).
    """
    tracker = RingTracker(agents)
    behaviors = {"ring": functools.partial(RingBehavior, tracker)}
    ids = ring_ids(agents)
    specs = [
        {"agent_id": a, "behavior": "ring", "task_context": {"next": ids[(i + 1) % agents]}}
        for i, a in enumerate(ids)
    ]
    where = None if path is None else path / "journal"
    existing = {t.ident for t in threading.enumerate()}
    with Runtime.open(where, config=runtime_settings(durability), behaviors=behaviors) as runtime:
        spawn_agents(runtime, specs)
        for agent_id in ids:
            runtime.bus.subscribe(agent_id, "tok")
        runtime.flush()
        journal = runtime._journal  # noqa: SLF001 - the count is the journal's own
        before = 0 if journal is None else journal.last_seq
        txns_before = _write_transactions(journal)
        bus = runtime.bus

        cpu = CpuMeter(existing)
        commits: list[int] = []

        def body() -> dict[str, int]:
            cpu.start()
            start_ring(bus, agents, hops)
            if not tracker.done.wait(timeout):
                at = "no journal" if journal is None else f"journal at seq {journal.last_seq}"
                msg = (
                    f"ring ({durability}, {agents} agents, {hops} hops) hung: {tracker.left} of {agents} "
                    f"tokens unfinished after {timeout} s; {at}"
                )
                raise FabricBroken(msg)
            if tracker.error is not None:
                msg = f"ring ({durability}) failed in a behavior: {tracker.error!r}"
                raise FabricBroken(msg) from tracker.error
            runtime.flush()
            cpu.stop()
            if journal is not None:
                commits.append(_write_transactions(journal) - txns_before)
            made = ring_events(agents, hops) if journal is None else journal.last_seq - before
            return {"events": made, "changes": agents * hops, "deliveries": agents * hops}

        try:
            sample = _clock(body)
        finally:
            cpu.detach()
        sample.extra["bunched"] = tracker.bunched()
        sample.extra.update(cpu.figures(deliveries=agents * hops))
        if commits and commits[0] > 0:
            sample.extra["commits"] = float(commits[0])
            sample.extra["events_per_commit"] = sample.counts["events"] / commits[0]
        dead = runtime.bus.dead_letters()
    if dead:
        msg = f"ring ({durability}) left {len(dead)} dead letters, the first: {dead[0]!r}"
        raise FabricBroken(msg)
    expected = ring_events(agents, hops)
    if sample.counts["events"] != expected:
        print(
            f"  note: ring ({durability}) journaled {sample.counts['events']:,} events, "
            f"expected {expected:,}",
            file=sys.stderr,
        )
    return sample


def ring(
    agents: int,
    hops: int,
    durability: Durability,
    timeout: float,
    *,
    memory: bool = False,
    switch_interval: float | None = None,
) -> Timed:
    return functools.partial(
        _ring_in,
        agents=agents,
        hops=hops,
        durability=durability,
        timeout=timeout,
        memory=memory,
        switch_interval=switch_interval,
    )


def _ring_in(
    path: Path,
    *,
    agents: int,
    hops: int,
    durability: Durability,
    timeout: float,
    memory: bool,
    switch_interval: float | None,
) -> Sample:
    """One ring run; with ``switch_interval``, under that GIL switch interval (restored after)."""
    if switch_interval is None:
        return run_ring(None if memory else path, agents, hops, durability, timeout)
    default = sys.getswitchinterval()
    sys.setswitchinterval(switch_interval)
    try:
        return run_ring(None if memory else path, agents, hops, durability, timeout)
    finally:
        sys.setswitchinterval(default)


def ring_events(agents: int, hops: int) -> int:
    """How many events a ring run journals: three a delivery (the message, its delivery
    and the private value set), but one message, the broadcast, for all the first hops."""
    return 3 * agents * hops - agents + 1


def ring_event_mix(agents: int, hops: int) -> list[Event]:
    """The events the ring journals, in the order it journals them (roughly)."""
    ids = ring_ids(agents)
    events: list[Event] = []
    at = T0
    start = IpcMessage(
        at=at,
        sender="driver",
        recipient="",
        topic="tok",
        payload={"n": hops - 1},
        trace_id=new_event_id(),
        kind="broadcast",
    )
    events.append(start)
    for h in range(hops):
        payload = {"n": hops - 1 - h}
        for t in range(agents):
            frm, to = ids[(t + h - 1) % agents], ids[(t + h) % agents]
            at += 1e-5
            message = start
            if h:
                message = IpcMessage(
                    at=at, sender=frm, recipient=to, topic="tok", payload=payload, trace_id=new_event_id()
                )
                events.append(message)
            events.append(IpcDelivered(at=at, message_id=message.id, recipient=to))
            events.append(PrivateSet(at=at, agent=to, key="last", value=payload))
    return events


def raw_append_encoding(events: Sequence[Event]) -> Timed:
    """Raw LMDB: encode in the loop, ``putmulti`` 1000 per synced write transaction."""
    batches = [events[i : i + RAW_BATCH] for i in range(0, len(events), RAW_BATCH)]

    def run(path: Path) -> Sample:
        env = lmdb.open(
            str(path / "raw"), map_size=MAP_SIZE, subdir=True, sync=True, max_dbs=2, readahead=False
        )
        db = env.open_db(b"events", create=True)
        encode = msgspec.msgpack.Encoder().encode
        try:

            def body() -> dict[str, int]:
                seq = 0
                for chunk in batches:
                    items = []
                    for event in chunk:
                        seq += 1
                        items.append((seq.to_bytes(8, "big"), encode(event)))
                    with env.begin(write=True, db=db) as txn:
                        txn.cursor().putmulti(items, append=True)
                return {"events": seq}

            return _clock(body)
        finally:
            env.close()

    return run


def journal_append_mix(events: Sequence[Event]) -> Timed:
    """``Journal.append`` alone (no agents, no writer): the same events and batches as the raw append.

    ``sync=True`` and ``validate=False``, as the runtime's journal writer appends: the
    journal's own share of the journaled ring, the ceiling of that ring from its side.
    """
    batches = [list(events[i : i + RAW_BATCH]) for i in range(0, len(events), RAW_BATCH)]

    def run(path: Path) -> Sample:
        with Journal.open(path / "journal", sync=True) as journal:
            cpu = [0.0]

            def body() -> dict[str, int]:
                began = time.thread_time()
                for chunk in batches:
                    journal.append(chunk, validate=False)
                cpu[0] = time.thread_time() - began
                return {"events": journal.last_seq}

            sample = _clock(body)
            sample.extra["cpu_seconds"] = cpu[0]
            return sample

    return run


def _append_note(samples: list[Sample]) -> str:
    """What ``Journal.append`` alone spent: its thread's CPU time beside each run's time.

    The rest of a run's time is spent waiting for its commits' syncs, which the journaled
    ring can overlap with its agents' work; its CPU time it cannot.
    """
    runs = ", ".join(f"{s.seconds:.2f} (CPU {s.extra['cpu_seconds']:.2f})" for s in samples)
    return f"validate=False, as the writer appends: the journal's share alone; runs (s, CPU s): {runs}"


# ------------------------------------------------------------------ the handle path


def handle_path(durability: Durability, threads: int, ops: int) -> Timed:
    def run(path: Path) -> Sample:
        ids = [f"caller-{i:02d}" for i in range(threads)]
        per_thread = max(1, ops // threads)
        with Runtime.open(path / "journal", config=runtime_settings(durability)) as runtime:
            spawn_agents(runtime, [{"agent_id": a} for a in ids])
            runtime.flush()
            handles = [runtime.agent(a) for a in ids]
            ready = threading.Barrier(threads + 1)
            errors: list[BaseException] = []

            def work(index: int) -> None:
                handle = handles[index]
                ready.wait()
                try:
                    for i in range(per_thread):
                        handle.set_private(f"k{i % 16:02d}", {"n": i})
                except BaseException as exc:  # noqa: BLE001 - re-raised by the main thread
                    errors.append(exc)

            workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
            for worker in workers:
                worker.start()
            gc.collect()
            ready.wait()
            start = time.perf_counter()
            for worker in workers:
                worker.join()
            runtime.flush()
            seconds = time.perf_counter() - start
        if errors:
            msg = f"handle path ({durability}, {threads} threads) failed: {errors[0]!r}"
            raise FabricBroken(msg) from errors[0]
        return Sample(seconds, {"changes": per_thread * threads})

    return run


# ------------------------------------------------------------------ reading after a round


class RoundBehavior:
    """One round's work: the round and who called it, in two private keys."""

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        ctx.set_private("round", message.payload)
        ctx.set_private("last", {"topic": message.topic, "from": message.sender})


ROUND_READS: Final = ("handle_views", "context_views", "handle_states", "cognitive_states", "handle_private")
"""The reads ``round_read`` times, each a pass over every agent (``ROUND_READ_LABELS``)."""

ROUND_READ_LABELS: Final = {
    "handle_views": "runtime.agent(a).context_view() each",
    "context_views": "runtime.context_views()",
    "handle_states": "runtime.agent(a).cognitive_state() each",
    "cognitive_states": "runtime.cognitive_states()",
    "handle_private": "runtime.agent(a).private(key) each",
}


def round_read(agents: int, passes: int, *, memory: bool, timeout: float) -> Timed:
    """Every agent's state read after a round: the handle loop and the runtime's bulk reads.

    ``agents`` agents of one task, each with a task context; one broadcast has each
    behavior set two private keys, then ``settle()``: every agent idle, its mailbox
    empty. Then ``passes`` rounds of reads, each read a pass over every agent, in
    ``ROUND_READS`` order within a round, each timed alone after a ``gc.collect()``
    (extras ``<read>_seconds``, summed over the rounds). The sample's own seconds are their sum. Each pass's
    answers are checked against what the round left.
    """

    def run(path: Path) -> Sample:
        ids = [f"r{i:05d}" for i in range(agents)]
        context = {"goal": {"text": "find X", "deadline": "friday"}, "peers": ids[:8]}
        specs = [{"agent_id": a, "task_id": "sim", "behavior": "round", "task_context": context} for a in ids]
        where = None if memory else path / "journal"
        behaviors = {"round": RoundBehavior}
        with Runtime.open(where, config=runtime_settings("batch"), behaviors=behaviors) as runtime:
            spawn_agents(runtime, specs)
            for agent_id in ids:
                runtime.bus.subscribe(agent_id, "round")
            runtime.bus.broadcast("driver", "round", 1)
            runtime.settle(timeout)
            reads: dict[str, Callable[[], object]] = {
                "handle_views": lambda: {a: runtime.agent(a).context_view() for a in ids},
                "context_views": runtime.context_views,
                "handle_states": lambda: {a: runtime.agent(a).cognitive_state() for a in ids},
                "cognitive_states": runtime.cognitive_states,
                "handle_private": lambda: {a: runtime.agent(a).private("round") for a in ids},
            }
            seconds = dict.fromkeys(ROUND_READS, 0.0)
            for _ in range(passes):
                answers: dict[str, object] = {}
                for name in ROUND_READS:
                    gc.collect()  # the garbage of the read before is not this one's to collect
                    start = time.perf_counter()
                    answers[name] = reads[name]()
                    seconds[name] += time.perf_counter() - start
                _check_round(answers, ids)
        return Sample(
            sum(seconds.values()),
            {"reads": agents * passes},
            {f"{name}_seconds": took for name, took in seconds.items()},
        )

    return run


def _check_round(answers: dict[str, Any], ids: list[str]) -> None:
    """Raise ``FabricBroken`` unless every read of a pass found what the round left, in ``ids`` order."""
    views, states = answers["context_views"], answers["cognitive_states"]
    last = {"topic": "round", "from": "driver"}
    wrong = (
        list(views) != ids
        or views != answers["handle_views"]
        or states != answers["handle_states"]
        or any(dict(view.private) != {"round": 1, "last": last} for view in views.values())
        or set(answers["handle_private"].values()) != {1}
    )
    if wrong:
        msg = "round read: a read did not show what the round left"
        raise FabricBroken(msg)


def round_read_workloads(s: Settings) -> list[Workload]:
    """The reads after a round, memory-only and journaled: one workload each, a row a read."""
    out: list[Workload] = []
    n = s.round_read_agents
    for memory in (True, False):
        kind = "memory-only" if memory else "batch"
        base = f"round read, {n:,} idle agents, {kind}"
        rows = []
        for name in ROUND_READS:
            reference = ""
            if name == "context_views":
                reference = f"{base}: {ROUND_READ_LABELS['handle_views']}"
            elif name == "cognitive_states":
                reference = f"{base}: {ROUND_READ_LABELS['handle_states']}"
            label = f"{base}: {ROUND_READ_LABELS[name]}"
            rows.append(RowSpec(label, "reads", reference, seconds=f"{name}_seconds"))
        timed = round_read(n, s.round_read_passes, memory=memory, timeout=s.timeout)
        out.append(Workload(base, "round-read", timed, tuple(rows)))
    return out


# ------------------------------------------------------------------ spawning


def peak_rss_kib() -> int:
    """This process image's peak RSS in KiB: ``VmHWM`` (Linux), else ``ru_maxrss``.

    ``ru_maxrss`` survives ``exec``: a child started from a big parent would report the
    parent's peak. ``VmHWM`` belongs to the child's own address space.
    """
    try:
        status = Path("/proc/self/status").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def spawn_child(directory: Path, count: int) -> dict[str, Any]:
    """In the child process: spawn ``count`` agents at once; time it and the peak-RSS growth."""
    specs: list[dict[str, Any]] = [{"agent_id": f"spawned-{i:05d}", "task_id": "bench"} for i in range(count)]
    with Runtime.open(directory / "journal", config=runtime_settings("sync")) as runtime:
        gc.collect()
        rss_before = peak_rss_kib()
        start = time.perf_counter()
        method = spawn_agents(runtime, specs)
        seconds = time.perf_counter() - start
        rss_after = peak_rss_kib()
        live = len(runtime.agents())
        closing = time.perf_counter()
    close_seconds = time.perf_counter() - closing
    return {
        "seconds": seconds,
        "method": method,
        "live": live,
        "peak_rss_delta_kib": rss_after - rss_before,
        "close_seconds": close_seconds,
        "threads_left": threading.active_count() - 1,
    }


def spawning(count: int, methods: list[str]) -> Timed:
    def run(path: Path) -> Sample:
        command = [sys.executable, str(Path(__file__).resolve()), "--spawn-child", str(path)]
        command += ["--spawn-agents", str(count)]
        done = subprocess.run(command, capture_output=True, text=True, encoding="utf-8", check=False)
        if done.returncode != 0:
            msg = f"the spawn child failed ({done.returncode}):\n{done.stderr[-4000:]}"
            raise FabricBroken(msg)
        result = json.loads(done.stdout.strip().splitlines()[-1])
        if result["live"] != count:
            msg = f"spawned {count} agents but {result['live']} are live"
            raise FabricBroken(msg)
        if result["threads_left"]:
            print(f"  note: {result['threads_left']} threads left after close", file=sys.stderr)
        methods.append(result["method"])
        extra = {
            "peak_rss_mib": result["peak_rss_delta_kib"] / 1024,
            "close_seconds": result["close_seconds"],
        }
        return Sample(result["seconds"], {"agents": count}, extra)

    return run


# ------------------------------------------------------------------ fan-out


class Counted:
    """Counts the messages its agents handled; ``done`` once ``expected`` were."""

    def __init__(self, expected: int) -> None:
        self._lock = threading.Lock()
        self._left = expected
        self.done = threading.Event()

    def handled(self) -> None:
        with self._lock:
            self._left -= 1
            if self._left == 0:
                self.done.set()


class CountingBehavior:
    def __init__(self, counted: Counted) -> None:
        self._counted = counted

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:  # noqa: ARG002
        self._counted.handled()


class _BareActor(pykka.ThreadingActor):
    """A plain Pykka actor: each message counted, and its window place given back.

    Its mailbox is the C ``SimpleQueue`` the agents' actors use (``AgentActor``), not
    Pykka's default ``queue.Queue``, which costs several times as much a message: the
    reference is the actor library as the runtime uses it.
    """

    _create_actor_inbox = staticmethod(queue.SimpleQueue)

    def __init__(self, counted: Counted) -> None:
        super().__init__()
        self._counted = counted

    def on_receive(self, message: Any) -> None:  # noqa: ANN401 - Pykka's signature
        self._counted.handled()
        message.release()


def _stop_all(refs: list[pykka.ActorRef[Any]], timeout: float) -> None:
    """Stop bare actors together: every stop asked first, then each waited for."""
    for ref in refs:
        ref.stop(block=False)
    for ref in refs:
        ref.actor_stopped.wait(timeout)


def bare_fanout(actors: int, timeout: float) -> Timed:
    """The fan-out's limit on this stack: one tell to each of ``actors`` idle plain Pykka
    actors, ``FANOUT_WINDOW`` of them at a time (the runtime's pacing, without the runtime),
    timed until each has handled it. One thread per actor, as the agents: what waking a
    thread costs bounds both."""

    def run(_path: Path) -> Sample:
        counted = Counted(actors)
        refs: list[pykka.ActorRef[Any]] = []
        try:
            # one by one into the list: those started are stopped below if a later start fails
            refs.extend(_BareActor.start(counted) for _ in range(actors))

            def body() -> dict[str, int]:
                window = threading.Semaphore(FANOUT_WINDOW)
                for ref in refs:
                    window.acquire(timeout=timeout)
                    ref.tell(window)
                if not counted.done.wait(timeout):
                    msg = f"bare fan-out to {actors} actors: not all handled in {timeout} s"
                    raise FabricBroken(msg)
                return {"agents": actors}

            return _clock(body)
        finally:
            _stop_all(refs, timeout)

    return run


class _BareRingActor(pykka.ThreadingActor):
    """A plain Pykka actor of a ring: it tells the next actor the token, less one hop.

    Its mailbox is the agents' ``SimpleQueue``, as ``_BareActor``'s.
    """

    _create_actor_inbox = staticmethod(queue.SimpleQueue)

    def __init__(self, tracker: RingTracker) -> None:
        super().__init__()
        self._tracker = tracker
        self.next: pykka.ActorRef[Any] | None = None

    def on_receive(self, message: Any) -> None:  # noqa: ANN401 - Pykka's signature
        if isinstance(message, pykka.ActorRef):
            self.next = message
            return
        if message <= 0:
            self._tracker.finished()
            return
        assert self.next is not None, "a token before the ring was closed"
        self.next.tell(message - 1)


def bare_ring(actors: int, hops: int, timeout: float) -> Timed:
    """The ring's actor path on this stack: ``actors`` plain Pykka actors, one token each,
    each delivery a tell to the next, ``hops`` deliveries a token. The same threads and
    the same convoy of tokens as the agents' ring, without a runtime: no state, no
    events, no bus. Counted: deliveries."""

    def run(_path: Path) -> Sample:
        tracker = RingTracker(actors)
        refs: list[pykka.ActorRef[Any]] = []
        try:
            # one by one into the list: those started are stopped below if a later start fails
            refs.extend(_BareRingActor.start(tracker) for _ in range(actors))
            for i, ref in enumerate(refs):
                ref.ask(refs[(i + 1) % actors], timeout=timeout)

            cpu = CpuMeter(set())

            def body() -> dict[str, int]:
                cpu.start()
                for ref in refs:
                    ref.tell(hops - 1)
                if not tracker.done.wait(timeout):
                    left = tracker.left
                    msg = f"bare Pykka ring of {actors} actors: {left} tokens unfinished after {timeout} s"
                    raise FabricBroken(msg)
                cpu.stop()
                return {"deliveries": actors * hops}

            try:
                sample = _clock(body)
            finally:
                cpu.detach()
            sample.extra.update(cpu.figures(deliveries=actors * hops))
            return sample
        finally:
            _stop_all(refs, timeout)

    return run


FanoutKind = Literal["broadcast", "publish"]


def fanout(kind: FanoutKind, agents: int, timeout: float, switch_interval: float | None) -> Timed:
    """One message to ``agents`` idle agents at once, batch durability: until every one has it.

    ``broadcast``: ``runtime.bus.broadcast`` to every agent (each subscribed to the topic),
    timed until each agent's behavior has handled it. ``publish``:
    ``runtime.publish_task_context`` to the task of every agent, timed until
    ``flush()`` returns: each agent has applied it by then, since the flush asks every
    agent that still has mail, after the publication in its mailbox order (each
    agent's task layer is read after the timing, to check). With ``switch_interval``,
    under that GIL switch interval (restored after).
    """

    def run(path: Path) -> Sample:
        counted = Counted(agents)
        behaviors = {"count": functools.partial(CountingBehavior, counted)}
        ids = [f"f{i:05d}" for i in range(agents)]
        specs = [{"agent_id": a, "task_id": "fan", "behavior": "count"} for a in ids]
        default = sys.getswitchinterval()
        with Runtime.open(path / "journal", config=runtime_settings("batch"), behaviors=behaviors) as runtime:
            spawn_agents(runtime, specs)
            for agent_id in ids:
                runtime.bus.subscribe(agent_id, "news")
            runtime.flush()

            def body() -> dict[str, int]:
                if kind == "broadcast":
                    delivered = runtime.bus.broadcast("driver", "news", {"n": 1})
                    if delivered != agents or not counted.done.wait(timeout):
                        msg = f"broadcast to {agents}: {delivered} delivered, not all handled in {timeout} s"
                        raise FabricBroken(msg)
                else:
                    reached = runtime.publish_task_context("fan", {"round": 1})
                    runtime.flush()
                    if len(reached) != agents:
                        msg = f"publish to {agents} agents: {len(reached)} reached"
                        raise FabricBroken(msg)
                return {"agents": agents}

            if switch_interval is not None:
                sys.setswitchinterval(switch_interval)
            try:
                sample = _clock(body)
            finally:
                sys.setswitchinterval(default)
            if kind == "publish":
                applied = sum(runtime.agent(a).task_context() == {"round": 1} for a in ids)
                if applied != agents:
                    msg = f"publish to {agents} agents: {applied} applied it"
                    raise FabricBroken(msg)
            return sample

    return run


# ------------------------------------------------------------------ recovery


def build_recovery_journal(path: Path, agents: int, events: int, *, snapshots: bool) -> int:
    """Write ``agents`` spawns and ``events`` PrivateSets round-robin; return the record count.

    With ``snapshots``, each agent's state is folded alongside (with the runtime's own
    ``apply_event``) and saved every ``SNAPSHOT_EVERY`` of its events, in the same append
    as the event it covers, as the runtime's agents do.
    """
    ids = [f"agent-{i:05d}" for i in range(agents)]
    filler = "abcdefghijklmnopqrstuvwxyz0123456789" * 3
    with Journal.open(path, sync=False) as journal:
        spawned = [
            AgentSpawned(at=T0, agent=a, task_id="recovery", task_context={"role": "bench", "index": i})
            for i, a in enumerate(ids)
        ]
        journal.append(spawned)
        states: dict[str, AgentSnapshot] = {}
        snapshot_at: dict[str, int] = {}
        if snapshots:
            for spawn in spawned:
                state = apply_event(None, spawn)
                assert state is not None
                states[spawn.agent] = state
                snapshot_at[spawn.agent] = 0  # as the runtime counts: the spawn is the first event
        for start in range(0, events, RECOVERY_BATCH):
            chunk = [
                PrivateSet(
                    at=T0 + n * 1e-4,
                    agent=ids[n % agents],
                    key=f"k{(n // agents) % 16:02d}",
                    value={"step": n, "note": filler},
                )
                for n in range(start, min(start + RECOVERY_BATCH, events))
            ]
            saved: dict[str, Snapshot] = {}
            base = journal.last_seq
            if snapshots:
                for offset, event in enumerate(chunk):
                    state = apply_event(states[event.agent], event)
                    assert state is not None
                    if state.events - snapshot_at[event.agent] >= SNAPSHOT_EVERY:
                        snapshot_at[event.agent] = state.snapshot_events = state.events
                        data = encode_snapshot(state)
                        saved[event.stream] = Snapshot(event.stream, base + offset + 1, data)
            seqs = journal.append(chunk, snapshots=list(saved.values()))
            if seqs[-1] != base + len(chunk):  # the snapshots' seqs were computed ahead
                msg = f"appended seqs end at {seqs[-1]}, expected {base + len(chunk)}"
                raise FabricBroken(msg)
        return journal.last_seq


def recovery(path: Path, agents: int, records: int, verify: Literal["tail", "full"]) -> Timed:
    def run(_: Path) -> Sample:
        gc.collect()
        start = time.perf_counter()
        with Runtime.open(path, verify=verify) as runtime:
            seconds = time.perf_counter() - start
            live = len(runtime.agents())
        if live != agents:
            msg = f"recovered {live} agents from {path}, expected {agents}"
            raise FabricBroken(msg)
        return Sample(seconds, {"records": records})

    return run


def journal_open(path: Path, records: int) -> Timed:
    """``Journal.open`` read-only and ``close``: mostly the walk of every page (store/_pages.py)."""

    def run(_: Path) -> Sample:
        gc.collect()
        start = time.perf_counter()
        with Journal.open(path, readonly=True) as journal:
            seconds = time.perf_counter() - start
            held = journal.last_seq
        if held != records:
            msg = f"{path} holds {held} records, expected {records}"
            raise FabricBroken(msg)
        return Sample(seconds, {"records": records})

    return run


# ---------------------------------------------------------------------- rows and workloads


def _bunching(samples: list[Sample]) -> str:
    """Each run's time and the share of its deliveries that had more mail waiting behind them.

    Near 100%, the tokens travel in convoys: an agent hands on a run of them before its
    mailbox empties, so its thread seldom sleeps. Lower, they are spread out, and more
    deliveries find an empty mailbox behind them, so the agent's thread sleeps and the
    next message must wake it.
    """
    return "runs (s, bunched, CPU s): " + ", ".join(_run_figures(s) for s in samples)


def _run_figures(sample: Sample) -> str:
    """One ring run: its time, bunching, CPU (system, the writer's, the collector's), switches a delivery."""
    x = sample.extra
    writer = f", writer {x['writer_cpu_seconds']:.2f}" if "writer_cpu_seconds" in x else ""
    return (
        f"{sample.seconds:.2f} {x['bunched']:.0%} "
        f"(CPU {x['cpu_seconds']:.2f}: system {x['system_seconds']:.2f}{writer}, "
        f"gc {x['gc_seconds']:.2f} in {x['gc_passes']:.0f} passes, {x['gc_full_passes']:.0f} full; "
        f"{x['switches_per_delivery']:.2f} switches/delivery)"
    )


def _sync_figures(samples: list[Sample]) -> str:
    """Each sync ring run: its time, CPU, context switches a delivery and events a commit.

    In sync durability each delivery's change waits for its commit: the agent's thread
    sleeps until the writer wakes it, then sleeps again on its mailbox until the next
    token wakes it; and the more changes wait together, the more events share a commit.
    """
    return "runs (s, CPU s, switches a delivery, events a commit): " + ", ".join(
        _sync_run_figures(s) for s in samples
    )


def _sync_run_figures(sample: Sample) -> str:
    x = sample.extra
    writer = f", writer {x['writer_cpu_seconds']:.2f}" if "writer_cpu_seconds" in x else ""
    per_commit = f"; {x['events_per_commit']:.1f} events/commit" if "events_per_commit" in x else ""
    return (
        f"{sample.seconds:.2f} (CPU {x['cpu_seconds']:.2f}: system {x['system_seconds']:.2f}{writer}; "
        f"{x['switches_per_delivery']:.2f} voluntary and {x['involuntary_switches_per_delivery']:.2f} "
        f"involuntary switches/delivery{per_commit})"
    )


def _cpu_per_delivery(samples: list[Sample]) -> str:
    """The process's CPU time a delivery, median of the runs."""
    per = statistics.median(x.extra["cpu_seconds"] / x.counts["deliveries"] * 1e6 for x in samples)
    return f"{per:.1f} us of CPU a delivery (median)"


def fanout_workloads(s: Settings) -> list[Workload]:
    """A broadcast and a publication to a tenth of ``fanout_agents``, to all, and to all
    under the longer switch interval: how a message to every agent scales. Each beside
    bare Pykka actors told one message each, a window at a time, at its size."""
    out: list[Workload] = []
    small = max(1, s.fanout_agents // 10)
    ms = f"{s.switch_interval * 1000:g} ms"
    bare: dict[int, str] = {}
    for n in (small, s.fanout_agents):
        bare[n] = f"bare Pykka: a tell to each of {n:,} idle actors, {FANOUT_WINDOW} at a time"
        out.append(Workload(bare[n], "fanout", bare_fanout(n, s.timeout), (RowSpec(bare[n], "agents"),)))
    kinds: tuple[tuple[FanoutKind, str, str], ...] = (
        ("broadcast", "bus.broadcast", "until every behavior handled it"),
        ("publish", "publish_task_context", "until flush() returns"),
    )
    for kind, call, what in kinds:
        cases: list[tuple[int, float | None, str]] = [(small, None, ""), (s.fanout_agents, None, "")]
        cases.append((s.fanout_agents, s.switch_interval, f", switch interval {ms}"))
        for n, interval, suffix in cases:
            label = f"{call} to {n:,} agents{suffix}: {what}"
            row = RowSpec(label, "agents", bare[n])
            out.append(Workload(label, "fanout", fanout(kind, n, s.timeout, interval), (row,)))
    return out


def ring_batch_workloads(s: Settings) -> list[Workload]:
    """The batch ring and what bounds it: the raw append, the journal alone, the ring at
    two GIL switch intervals, a ring of bare Pykka actors, the memory-only ring."""
    out: list[Workload] = []
    n = s.ring_batch_agents
    raw = f"raw LMDB append + encoding, {RAW_BATCH}/txn (ring mix)"
    mix = ring_event_mix(n, s.ring_batch_hops)
    out.append(Workload(raw, "ring-batch", raw_append_encoding(mix), (RowSpec(raw, "events"),)))
    # Journal.append of the same events alone: the journal's side of the ring's
    # ceiling, as the memory-only ring below is the actors' side. On one GIL the
    # journaled ring spends the CPU time of both shares.
    alone = f"Journal.append of the ring's events, {RAW_BATCH}/txn (no agents)"
    row = RowSpec(
        alone,
        "events",
        raw,
        note=_append_note,
    )
    out.append(Workload(alone, "ring-batch", journal_append_mix(mix), (row,)))
    label = f"ring {n:,} agents x {s.ring_batch_hops:,} hops, batch: journaled events"
    judged = (n, s.ring_batch_hops) == TARGET_RING_BATCH_SIZE
    target = Target("ratio", TARGET_RING_BATCH_RATIO) if judged else None
    timed = ring(n, s.ring_batch_hops, "batch", s.timeout)
    row = RowSpec(label, "events", raw, target, note=_bunching)
    out.append(Workload(label, "ring-batch", timed, (row,)))
    # The same ring under another GIL switch interval (a process-wide setting a
    # simulation may choose), side by side: in ad-hoc runs it decided whether the
    # tokens travelled in convoys.
    ms = f"{s.switch_interval * 1000:g} ms"
    hops = f"{s.ring_batch_hops:,} hops"
    longer = f"ring {n:,} agents x {hops}, batch, switch interval {ms}: journaled events"
    timed = ring(n, s.ring_batch_hops, "batch", s.timeout, switch_interval=s.switch_interval)
    out.append(Workload(longer, "ring-batch", timed, (RowSpec(longer, "events", raw, note=_bunching),)))
    # The same ring with no journal at all: the ceiling of the actor path, so the
    # table shows how much of the gap to the target the journal could ever close.
    # And the same ring of plain Pykka actors: what the actor library's threads and
    # mailboxes cost a delivery, beside what the runtime's agents cost.
    pykka_ring = f"bare Pykka ring {n:,} actors x {s.ring_batch_hops:,} hops: deliveries"
    timed = bare_ring(n, s.ring_batch_hops, s.timeout)
    row = RowSpec(pykka_ring, "deliveries", note=_cpu_per_delivery)
    out.append(Workload(pykka_ring, "ring-batch", timed, (row,)))
    bare = f"ring {n:,} agents x {s.ring_batch_hops:,} hops, memory-only (no journal)"
    timed = ring(n, s.ring_batch_hops, "batch", s.timeout, memory=True)
    rows = (
        RowSpec(
            f"{bare}: events made",
            "events",
            raw,
            note=lambda runs: "the actor path alone: the ceiling of the row above; " + _bunching(runs),
        ),
        RowSpec(f"{bare}: deliveries", "deliveries", pykka_ring, note=_cpu_per_delivery),
    )
    out.append(Workload(bare, "ring-batch", timed, rows))
    return out


def build_workloads(settings: Settings, methods: list[str], recovery_dir: Path | None) -> list[Workload]:
    s = settings
    out: list[Workload] = []
    if "ring-batch" in s.only:
        out.extend(ring_batch_workloads(s))
    if "ring-sync" in s.only:
        n = s.ring_sync_agents
        base = f"ring {n:,} agents x {s.ring_sync_hops:,} hops, sync"
        at_size = Target("rate", TARGET_RING_SYNC_RATE) if n == TARGET_RING_SYNC_AGENTS else None
        rows = (
            RowSpec(f"{base}: acked state changes", "changes", "", at_size, note=_sync_figures),
            RowSpec(f"{base}: journaled events", "events"),
        )
        out.append(Workload(base, "ring-sync", ring(n, s.ring_sync_hops, "sync", s.timeout), rows))
    if "handle" in s.only:
        durabilities: tuple[Durability, ...] = ("batch", "sync")
        for durability in durabilities:
            ops = s.handle_ops if durability == "batch" else s.handle_sync_ops
            one = f"handle set_private, {durability}, 1 thread"
            for threads in HANDLE_THREADS:
                label = f"handle set_private, {durability}, {threads} thread{'s' if threads > 1 else ''}"
                ref = "" if threads == 1 else one
                timed = handle_path(durability, threads, ops)
                out.append(Workload(label, "handle", timed, (RowSpec(label, "changes", ref),)))
    if "round-read" in s.only:
        out.extend(round_read_workloads(s))
    if "spawn" in s.only:
        label = f"spawn {s.spawn_agents:,} agents, sync"

        def spawn_note(samples: list[Sample]) -> str:
            how = methods[0] if methods else "?"
            return f"{how}; peak RSS +{median_extra(samples, 'peak_rss_mib'):,.0f} MiB (VmHWM, child)"

        row = RowSpec(label, "agents", note=spawn_note)
        closing = RowSpec(f"close() of those {s.spawn_agents:,} agents", "agents", seconds="close_seconds")
        out.append(Workload(label, "spawn", spawning(s.spawn_agents, methods), (row, closing)))
    if "fanout" in s.only:
        out.extend(fanout_workloads(s))
    if "recovery" in s.only:
        assert recovery_dir is not None
        out.extend(recovery_workloads(settings, recovery_dir))
    return out


def recovery_workloads(settings: Settings, recovery_dir: Path) -> list[Workload]:
    agents, events = settings.recovery_agents, settings.recovery_events
    out = []
    for snapshots in (False, True):
        path = recovery_dir / ("snapshots" if snapshots else "plain")
        started = time.perf_counter()
        records = build_recovery_journal(path, agents, events, snapshots=snapshots)
        print(
            f"  built {path.name} journal: {records:,} records in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        kind = "snapshots" if snapshots else "no snapshots"
        if snapshots:
            label = f"Journal.open, read-only, of the {kind} journal (the walk of its pages)"
            timed = journal_open(path, records)
            out.append(Workload(label, "recovery", timed, (RowSpec(label, "records"),)))
        modes: tuple[Literal["tail", "full"], ...] = ("tail", "full")
        for verify in modes:
            label = f"recovery {agents:,} agents / {events:,} events, {kind}, verify={verify}"
            judged = (agents, events) == TARGET_RECOVERY_SIZE and snapshots and verify == "tail"
            target = Target("seconds", TARGET_RECOVERY_SECONDS) if judged else None
            timed = recovery(path, agents, records, verify)
            out.append(Workload(label, "recovery", timed, (RowSpec(label, "records", target=target),)))
    return out


# ---------------------------------------------------------------------- reporting


def main(argv: Sequence[str] | None = None) -> int:
    settings, json_path, child_dir = parse_args(argv)
    if child_dir is not None:
        print(json.dumps(spawn_child(child_dir, settings.spawn_agents)))
        return 0
    env_info = environment(repeat=settings.repeat, tmp_parent=settings.tmp_parent)
    note_imported_cogfabric(env_info)
    warn_if_tmpfs(env_info)
    methods: list[str] = []
    print(
        f"fabric bench: {', '.join(settings.only)}; median of {settings.repeat}; "
        f"temp dirs under {env_info['tmp_parent']} ({env_info['tmp_filesystem']})",
        file=sys.stderr,
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="cogfabric-recovery-", dir=settings.tmp_parent) as rec:
        workloads = build_workloads(settings, methods, Path(rec) if "recovery" in settings.only else None)
        rows = run_workloads(
            workloads, repeat=settings.repeat, tmp_parent=settings.tmp_parent, prefix="cogfabric-fabric-"
        )
    print()
    print(
        f"cogfabric fabric at {env_info['cogfabric_commit']}: median of {settings.repeat} "
        f"(Python {env_info['python']}, pykka "
        f"{env_info['pykka']}, lmdb {env_info['lmdb']}, msgspec {env_info['msgspec']}, "
        f"{env_info['cpus']} CPUs); fsync on; handle threads each own an agent"
    )
    print()
    print(format_table(rows))
    if json_path is not None:
        document = {
            "environment": env_info,
            "settings": asdict(settings),
            "results": [asdict(row) for row in rows],
        }
        write_json(json_path, document)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
