"""``cogfabric bench``: a fixed set of workloads, each beside its reference in the same run.

References: raw LMDB batched append of pre-encoded values (the write limit of this
stack), a raw LMDB scan with typed decode (the read limit), and a bare Pykka tell loop
(the actor path). The ratio is the headline. No timing is asserted anywhere.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lmdb
import msgspec
import pykka

from cogfabric.actors import AgentContext, Config, FakeClock, IpcBus, JournalConfig, Runtime
from cogfabric.actors._state import apply_event, encode_snapshot
from cogfabric.events import AgentSpawned, AnyEvent, IpcMessage, PrivateSet
from cogfabric.store import Journal, Snapshot

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Sizes", "run_bench"]


@dataclass(frozen=True)
class Sizes:
    """How big each workload is."""

    events: int = 200_000
    single: int = 1_000
    ring_agents: int = 100
    ring_hops: int = 300
    sync_agents: int = 1_000
    sync_hops: int = 10
    handle_ops: int = 4_000
    requests: int = 2_000
    session_ops: int = 4_000
    spawn: int = 10_000
    recovery_agents: int = 1_000
    recovery_events: int = 1_000_000

    @classmethod
    def quick(cls) -> Sizes:
        """Small enough for CI: the whole run under a minute (2.6 s in a run on the development VM)."""
        return cls(
            events=20_000,
            single=100,
            ring_agents=20,
            ring_hops=50,
            sync_agents=50,
            sync_hops=5,
            handle_ops=500,
            requests=200,
            session_ops=300,
            spawn=300,
            recovery_agents=50,
            recovery_events=20_000,
        )


@dataclass
class Result:
    """One workload's samples (seconds) and what one run counts."""

    name: str
    count: int
    unit: str
    samples: list[float] = field(default_factory=list)
    reference: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        """Count per second at the median."""
        return self.count / statistics.median(self.samples)

    def ratio_to(self, reference: Result) -> float:
        """The rate over the reference's: the median of the rounds' paired ratios.

        Every round measures each workload once, in turn, so pairing by round cancels a
        slow spell of a shared machine that spans the round.
        """
        pairs = zip(self.samples, reference.samples, strict=False)
        return statistics.median((self.count / mine) / (reference.count / theirs) for mine, theirs in pairs)


def unwritable(path: Path) -> str | None:
    """Why a results file could not be written at ``path``; None when it could.

    Checked before minutes of measuring, by ``cogfabric bench --json`` and the bench/
    scripts alike.
    """
    if path.is_dir() or not path.name:
        return "is a directory"
    if not path.parent.is_dir():
        if path.parent.exists():
            return f"is under {path.parent}, which is no directory"
        return f"is in a directory that does not exist ({path.parent})"
    if path.exists():
        return None if os.access(path, os.W_OK) else "cannot be written"
    try:  # permissions alone do not say it: /proc and read-only mounts pass os.access (as root too)
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as exc:
        return f"cannot be created in {path.parent} ({exc.strerror or exc})"
    return None


def _events(n: int) -> list[PrivateSet]:
    return [PrivateSet(at=float(i), agent=f"a{i % 100}", key=f"k{i}", value="x" * 150) for i in range(n)]


def _timed(fn: Callable[[], object]) -> float:
    os.sync()  # the previous measurement's dirty pages are not this one's to write
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _raw_append(tmp: Path, values: list[bytes], per_txn: int) -> float:
    env = lmdb.open(str(tmp / "raw"), map_size=1 << 32, max_dbs=2)
    db = env.open_db(b"e")
    items = [(i.to_bytes(8, "big"), v) for i, v in enumerate(values)]

    def run() -> None:
        for s in range(0, len(items), per_txn):
            with env.begin(write=True, db=db) as txn:
                txn.cursor().putmulti(items[s : s + per_txn], append=True)

    try:
        return _timed(run)
    finally:
        env.close()


def _raw_scan(tmp: Path, values: list[bytes]) -> float:
    env = lmdb.open(str(tmp / "scan"), map_size=1 << 32, max_dbs=2)
    db = env.open_db(b"e")
    with env.begin(write=True, db=db) as txn:
        txn.cursor().putmulti([(i.to_bytes(8, "big"), v) for i, v in enumerate(values)], append=True)
    decode = msgspec.msgpack.Decoder(AnyEvent).decode

    def run() -> None:
        with env.begin(db=db) as txn:
            for value in txn.cursor().iternext(keys=False, values=True):
                decode(value)

    try:
        return _timed(run)
    finally:
        env.close()


def _journal_append(tmp: Path, events: list[PrivateSet], batch: int, *, validate: bool = True) -> float:
    with Journal.open(tmp / "journal") as journal:
        return _timed(
            lambda: [
                journal.append(events[s : s + batch], validate=validate) for s in range(0, len(events), batch)
            ]
        )


def _journal_replay(tmp: Path, events: list[PrivateSet]) -> tuple[float, float]:
    """Seconds to read and decode every record, and to verify the whole chain."""
    with Journal.open(tmp / "journal", sync=False) as journal:
        for s in range(0, len(events), 10_000):
            journal.append(events[s : s + 10_000])
        replay = _timed(lambda: sum(1 for _ in journal.read()))
        verify = _timed(journal.verify)
        return replay, verify


class _Teller(pykka.ThreadingActor):
    def __init__(self, done: threading.Event, total: int) -> None:
        super().__init__()
        self._done, self._total, self._seen = done, total, 0

    def on_receive(self, message: object) -> None:  # noqa: ARG002 - only counted
        self._seen += 1
        if self._seen == self._total:
            self._done.set()


def _tell_loop(n: int) -> float:
    done = threading.Event()
    ref = _Teller.start(done, n)

    def tells() -> None:
        for i in range(n):
            ref.tell(i)
        done.wait(300)

    try:
        return _timed(tells)
    finally:
        ref.stop()


class _Ring:
    def __init__(self, finished: threading.Semaphore) -> None:
        self._finished = finished

    def on_message(self, ctx: AgentContext, message: IpcMessage) -> None:
        ctx.set_private("last", message.payload)
        n = message.payload["n"]
        if n > 0:
            ctx.send(ctx.task_context()["next"], "tok", {"n": n - 1})
        else:
            self._finished.release()


def start_ring(bus: IpcBus, agents: int, hops: int) -> None:
    """Start every agent's token of a ring with one broadcast (the agents subscribed to ``tok``).

    One commit starts them all, so every agent is in flight at once and they share each
    sync; sent one by one, in sync durability each send would wait for its own commit.
    ``cogfabric bench`` and bench/fabric.py start their rings so.

    Raises:
        RuntimeError: the broadcast reached another number of agents.

    """
    started = bus.broadcast("driver", "tok", {"n": hops - 1})
    if started != agents:
        msg = f"the ring's broadcast reached {started} of {agents} agents"
        raise RuntimeError(msg)


def _ring(tmp: Path, agents: int, hops: int, durability: str) -> tuple[float, int]:
    finished = threading.Semaphore(0)
    config = Config(journal=JournalConfig(durability=durability))  # type: ignore[arg-type]
    behaviors = {"ring": lambda: _Ring(finished)}
    with Runtime.open(tmp / "ring", config=config, clock=FakeClock(), behaviors=behaviors) as rt:
        rt.spawn_many(
            [
                {"agent_id": f"r{i}", "behavior": "ring", "task_context": {"next": f"r{(i + 1) % agents}"}}
                for i in range(agents)
            ]
        )
        for i in range(agents):
            rt.bus.subscribe(f"r{i}", "tok")
        journal = rt._journal  # noqa: SLF001 - the bench counts journal records
        assert journal is not None
        rt.flush()  # the spawns are committed before the clock starts, and not counted
        before = journal.last_seq

        def run() -> None:
            start_ring(rt.bus, agents, hops)
            for _ in range(agents):
                if not finished.acquire(timeout=300):
                    msg = "the ring stalled"
                    raise TimeoutError(msg)
            rt.flush()

        seconds = _timed(run)
        return seconds, journal.last_seq - before


def _handle(tmp: Path, threads: int, ops: int, durability: str) -> float:
    config = Config(journal=JournalConfig(durability=durability))  # type: ignore[arg-type]
    with Runtime.open(tmp / "handle", config=config, clock=FakeClock()) as rt:
        agents = rt.spawn_many([{"agent_id": f"h{i}"} for i in range(threads)])
        barrier = threading.Barrier(threads + 1, timeout=60)
        failed: list[Exception] = []

        def work(i: int) -> None:
            barrier.wait()
            try:
                for n in range(ops // threads):
                    agents[i].set_private(f"k{n % 10}", n)
            except Exception as exc:  # noqa: BLE001 - raised by run(): the count would claim changes never made
                failed.append(exc)

        pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for t in pool:
            t.start()

        def run() -> None:
            barrier.wait()
            for t in pool:
                t.join(timeout=600)
            if failed:
                raise failed[0]
            rt.flush()

        return _timed(run)


class _Echo:
    def on_message(self, ctx: AgentContext, message: IpcMessage) -> Any:  # noqa: ANN401, ARG002
        return message.payload


def _requests(tmp: Path, n: int) -> float:
    with Runtime.open(tmp / "ipc", clock=FakeClock(), behaviors={"echo": _Echo}) as rt:
        rt.spawn("echo", behavior="echo")
        return _timed(lambda: [rt.bus.request("bench", "echo", "q", i, timeout=30) for i in range(n)])


def _sessions(tmp: Path, n: int) -> tuple[float, float]:
    with Runtime.open(tmp / "sessions", clock=FakeClock()) as rt:
        session = rt.memory.create_session("bench")

        def adds() -> None:
            for i in range(n):
                rt.memory.add_message(session, "user", f"message {i}")

        add = _timed(adds)
        build = _timed(lambda: [rt.memory.build_prompt_messages(session) for _ in range(n)])
    return add, build


def _status_bytes(field: str) -> int:
    """A memory figure of this process from /proc/self/status (Linux); 0 where missing."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _reset_peak() -> bool:
    """Reset this process's peak resident memory (``VmHWM``) to its current one (Linux >= 4.0)."""
    try:
        Path("/proc/self/clear_refs").write_text("5", encoding="ascii")
    except OSError:
        return False
    return True


def _spawn(tmp: Path, n: int) -> tuple[float, int]:
    """Seconds to spawn ``n`` agents, and the peak resident memory it added.

    The peak is ``VmHWM`` after, reset to the resident memory just before; where the
    reset is not allowed, the growth of the resident memory instead.
    """
    with Runtime.open(tmp / "spawn", clock=FakeClock()) as rt:
        peak = _reset_peak()
        before = _status_bytes("VmRSS")
        seconds = _timed(lambda: rt.spawn_many([{"agent_id": f"s{i}"} for i in range(n)]))
        return seconds, _status_bytes("VmHWM" if peak else "VmRSS") - before


def _build_recovery_journal(path: Path, agents: int, events: int, *, snapshots: bool) -> None:
    """Write spawns and PrivateSets straight to a journal.

    With ``snapshots``, the runtime's own fold and snapshot encoding run alongside and
    save a snapshot every 200 events of an agent.
    """
    spawned = [AgentSpawned(at=0.0, agent=f"a{i}", task_id="r") for i in range(agents)]
    states = {e.agent: apply_event(None, e) for e in spawned}
    with Journal.open(path, sync=False) as journal:
        journal.append(spawned)
        for start in range(0, events, 10_000):
            chunk = [
                PrivateSet(at=float(n), agent=f"a{n % agents}", key=f"k{n // agents % 16}", value=n)
                for n in range(start, min(start + 10_000, events))
            ]
            base = journal.last_seq
            saved: dict[str, Snapshot] = {}
            if snapshots:
                for offset, event in enumerate(chunk):
                    state = apply_event(states[event.agent], event)
                    if state is not None and state.events % 200 == 0:
                        state.snapshot_events = state.events
                        saved[event.stream] = Snapshot(
                            event.stream, base + offset + 1, encode_snapshot(state)
                        )
            journal.append(chunk, snapshots=list(saved.values()))


def _recovery(tmp: Path, agents: int, events: int, *, snapshots: bool) -> float:
    """Seconds until ``Runtime.open`` returns with every agent recovered and live.

    As ``bench/fabric.py`` times it: the ``close()`` after (stopping every agent's
    actor) is not recovery, and is left out (it was counted before 2026-12-03).
    """
    path = tmp / ("snapshots" if snapshots else "plain")
    _build_recovery_journal(path, agents, events, snapshots=snapshots)
    opened: list[Runtime] = []
    try:
        return _timed(lambda: opened.append(Runtime.open(path, clock=FakeClock(), verify="tail")))
    finally:
        for runtime in opened:
            runtime.close()


def filesystem_of(path: Path | str) -> str | None:
    """The mount type of the filesystem holding ``path`` (from /proc/mounts), or None.

    On ``tmpfs`` an fsync costs nothing, so the synced workloads would measure no disk.
    """
    try:
        mounts = Path("/proc/mounts").read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    except OSError:
        return None
    real = os.path.realpath(path)
    best, kind = "", None
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:  # noqa: PLR2004 - device, mount point, type
            continue
        point = parts[1].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, parts[2]
    return kind


def cpu_model() -> str | None:
    """The CPU's model name (Linux's /proc/cpuinfo; elsewhere what ``platform`` knows), or None."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def _machine(tmp_parent: Path | None = None) -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for name in ("cogfabric", "pykka", "msgspec", "lmdb"):
        try:
            versions[name] = version(name)
        except PackageNotFoundError:  # pragma: no cover
            versions[name] = None
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else None
    where = (tmp_parent or Path(tempfile.gettempdir())).resolve()
    return {
        "cores": os.cpu_count(),
        "cpu_model": cpu_model(),
        "memory": memory,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "package_versions": versions,
        "lmdb_library": ".".join(map(str, lmdb.version())),
        "git_commit": _commit(),
        "tmp_parent": str(where),
        "tmp_filesystem": filesystem_of(where),
    }


def _commit() -> str | None:
    """The source tree's commit, with ``+dirty`` when its files differ from it; None outside git.

    Only cogfabric's own checkout counts: an installed copy inside another repository
    (a virtual environment in a user's project) would report that project's commit.
    """
    where = Path(__file__).resolve().parent

    def git(*args: str) -> str:
        done = subprocess.run(  # noqa: S603 - git with our own fixed arguments
            ["git", *args],  # noqa: S607
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=10,
            check=False,
            cwd=where,
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    try:
        top = git("rev-parse", "--show-toplevel")
        if not top or (Path(top) / "src" / "cogfabric").resolve() != where:
            return None
        head = git("rev-parse", "--short", "HEAD")
        dirty = head and git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (head + ("+dirty" if dirty else "")) or None


def run_bench(
    sizes: Sizes,
    repeat: int,
    progress: Callable[[str], None] | None = None,
    *,
    tmp_parent: Path | None = None,
) -> tuple[list[Result], dict[str, Any]]:
    """Run every workload ``repeat`` times; return the results and the machine description.

    The journals go in temporary directories under ``tmp_parent`` (default: the system's
    temporary directory, ``TMPDIR``); the synced workloads measure that disk's fsync.
    """
    events = _events(sizes.events)
    encoder = msgspec.msgpack.Encoder()
    values = [encoder.encode(e) for e in events]
    single = events[: sizes.single]
    results: dict[str, Result] = {}

    def add(name: str, count: int, unit: str, seconds: float, reference: str | None = None) -> None:
        results.setdefault(name, Result(name, count, unit, reference=reference)).samples.append(seconds)

    write_ref = "raw LMDB append, pre-encoded, 1000/txn"
    read_ref = "raw LMDB scan + typed decode"
    actor_ref = "bare Pykka tell loop"

    def appends(t: Path) -> None:
        for b, n, e in ((1, sizes.single, single), (100, sizes.events, events), (1000, sizes.events, events)):
            add(f"Journal.append, batch {b}", n, "events", _journal_append(t / str(b), e, b), write_ref)
        # the runtime's writer: its events are built from values checked at the boundary
        seconds = _journal_append(t / "unvalidated", events, 1000, validate=False)
        add("Journal.append(validate=False), batch 1000", sizes.events, "events", seconds, write_ref)

    def handles(t: Path) -> None:
        for durability in ("batch", "sync"):
            for n in (1, 4, 16):
                seconds = _handle(t / f"{durability}{n}", n, sizes.handle_ops, durability)
                add(
                    f"handle set_private, {durability}, {n} threads",
                    sizes.handle_ops // n * n,
                    "changes",
                    seconds,
                    actor_ref,
                )

    def recoveries(t: Path) -> None:
        for label, flag in (("snapshots", True), ("no snapshots", False)):
            seconds = _recovery(t, sizes.recovery_agents, sizes.recovery_events, snapshots=flag)
            add(
                f"recovery of {sizes.recovery_agents:,} agents, {label}, verify=tail",
                sizes.recovery_events,
                "events",
                seconds,
                read_ref,
            )

    def replays(t: Path) -> None:
        replay, verify = _journal_replay(t, events)
        add("replay (read + decode)", sizes.events, "events", replay, read_ref)
        add("verify() (full chain)", sizes.events, "records", verify, read_ref)

    def spawns(t: Path) -> None:
        seconds, grown = _spawn(t, sizes.spawn)
        add(f"spawn_many {sizes.spawn:,} agents", sizes.spawn, "agents", seconds, actor_ref)
        results[f"spawn_many {sizes.spawn:,} agents"].extra.setdefault("peak_rss_growth_bytes", []).append(
            grown
        )

    steps: list[tuple[str, Callable[[Path], None]]] = [
        ("raw append", lambda t: add(write_ref, sizes.events, "events", _raw_append(t, values, 1000))),
        ("append", appends),
        ("raw scan", lambda t: add(read_ref, sizes.events, "events", _raw_scan(t, values))),
        ("replay", replays),
        ("tell loop", lambda _t: add(actor_ref, sizes.events, "messages", _tell_loop(sizes.events))),
        ("ring", lambda t: _ring_results(t, sizes, add)),
        ("handle", handles),
        (
            "ipc",
            lambda t: add(
                "IPC request/reply round trips",
                sizes.requests,
                "round trips",
                _requests(t, sizes.requests),
                actor_ref,
            ),
        ),
        ("sessions", lambda t: _session_results(t, sizes, add)),
        ("spawn", spawns),
        ("recovery", recoveries),
    ]
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="cogfabric-bench-", dir=tmp_parent) as raw:
            for label, step in steps:
                if progress is not None:
                    progress(label)
                where = Path(raw) / label.replace(" ", "-")
                where.mkdir(parents=True)
                step(where)
    return list(results.values()), _machine(tmp_parent)


def _ring_results(tmp: Path, sizes: Sizes, add: Callable[..., None]) -> None:
    seconds, count = _ring(tmp / "batch", sizes.ring_agents, sizes.ring_hops, "batch")
    add(
        f"ring {sizes.ring_agents:,} agents, batch: journaled events",
        count,
        "events",
        seconds,
        "raw LMDB append, pre-encoded, 1000/txn",
    )
    seconds, count = _ring(tmp / "sync", sizes.sync_agents, sizes.sync_hops, "sync")
    add(
        f"ring {sizes.sync_agents:,} agents, sync: acked changes",
        sizes.sync_agents * sizes.sync_hops,
        "changes",
        seconds,
        "bare Pykka tell loop",
    )


def _session_results(tmp: Path, sizes: Sizes, add: Callable[..., None]) -> None:
    adding, building = _sessions(tmp, sizes.session_ops)
    add(
        "session add_message (sync)",
        sizes.session_ops,
        "ops",
        adding,
        "raw LMDB append, pre-encoded, 1000/txn",
    )
    add("session build_prompt_messages", sizes.session_ops, "ops", building, "bare Pykka tell loop")


def to_json(results: list[Result], machine: dict[str, Any], *, repeat: int, quick: bool) -> str:
    """Every sample, the medians, the paired ratios and the machine, as one JSON document.

    ``machine``: ``cores``, ``cpu_model``, ``memory`` (physical, in bytes), ``python``,
    ``platform``, ``package_versions``, ``lmdb_library`` (the LMDB inside py-lmdb),
    ``git_commit`` (with ``+dirty`` when the tree differs from it), and where the journals
    were: ``tmp_parent`` and its ``tmp_filesystem`` (``tmpfs``: no fsync reached a disk).
    Files before 2026-12-03 name memory ``memory_bytes``; before 2026-12-06 they have no
    ``cpu_model``, ``tmp_parent`` or ``tmp_filesystem``. Each workload: ``samples``
    (seconds, one a run), their ``median``, ``min`` and ``max``; ``count`` items of
    ``unit`` a run; ``rate`` (per second, at the median); its ``reference`` workload and
    the ``ratio`` to it (the median of the runs' paired ratios).
    """
    by_name = {r.name: r for r in results}
    rows = [
        {
            "workload": r.name,
            "count": r.count,
            "unit": r.unit,
            "samples": r.samples,
            "median": statistics.median(r.samples),
            "min": min(r.samples),
            "max": max(r.samples),
            "rate": r.rate,
            "reference": r.reference,
            "ratio": r.ratio_to(by_name[r.reference]) if r.reference in by_name else None,
            **r.extra,
        }
        for r in results
    ]
    document = {"machine": machine, "repeat": repeat, "quick": quick, "time_unit": "s", "results": rows}
    return json.dumps(document, indent=2)
