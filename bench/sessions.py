"""Benchmark session memory: adding messages, building prompts, sweeping and reopening.

What it measures (each measurement on a fresh temporary directory, timed with
``time.perf_counter``, repeated ``--repeat`` times in interleaved rounds; the table shows
the median):

* ``runtime.memory.add_message(session, "user", text)`` from 1 and 8 caller threads, each
  thread on its own session, in ``sync`` and ``batch`` durability
  (``Config(journal=JournalConfig(durability=...))``). Timed from the moment the threads
  are released until they have all returned and ``runtime.flush()`` has returned, so
  batch figures count durable messages too. Each run checks afterwards that every
  message is in its session and that the journal grew by exactly one record per message.
* ``runtime.memory.build_prompt_messages(session)`` from 1 and 8 threads, each thread on
  its own session holding 50 messages (the seed, then turns of a user message, an
  assistant message with tool calls, its tool result and an assistant answer), in both
  durabilities. The default window (``max_history`` 10) is cleaned turn by turn.
* The same two calls on a memory-only runtime (``Runtime.open()`` without a path): the
  in-process reference of the journaled rows. Its 8-thread rows are compared with its
  1-thread rows.
* Sweeping 100,000 sessions: a runtime on a ``FakeClock``, batch durability and
  ``MemoryConfig(max_sessions=200_000, session_ttl=100.0)``; 100,000 sessions are created
  from 8 threads (not part of the sweep's time, but reported as a row of its own, until
  ``runtime.flush()`` returns), the clock advances 101 s, and ``runtime.memory.sweep()`` is
  timed (it must return 100,000); a second row adds the ``runtime.flush()`` that makes
  the 100,000 ``SessionExpired`` events durable. The runtime is closed, and
  ``Runtime.open`` on the same journal (``verify="full"``, the default) is timed until
  it returns, and until the first memory call (``memory.size()``) answers: the session
  actor replays the session streams in its ``on_start``, after ``Runtime.open`` has
  returned. It must find no live session.

Run it from the repository root::

    .venv/bin/python bench/sessions.py               # full size
    .venv/bin/python bench/sessions.py --quick       # small counts, under a minute
    .venv/bin/python bench/sessions.py --only add,sweep --repeat 5 --json out.json

``--dir`` chooses where the temporary directories go: it must be a real disk (not tmpfs)
for synced commits to mean anything. Figures are noisy on shared machines; ratios
measured in one run hold better than absolute rates.
"""

from __future__ import annotations

import argparse
import functools
import gc
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Final, Literal

from _common import directory, json_file, positive, subset_of, warn_if_tmpfs, write_json
from _workloads import (
    RowSpec,
    Sample,
    Timed,
    Workload,
    environment,
    format_table,
    median_extra,
    run_workloads,
)

from cogfabric import (
    Config,
    FakeClock,
    JournalConfig,
    MemoryConfig,
    Message,
    Runtime,
    ToolCall,
    ToolCallFunction,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

Durability = Literal["sync", "batch"]
Mode = Literal["sync", "batch", "memory"]
"""A journaled runtime in one durability, or a memory-only runtime."""

THREADS: Final = (1, 8)
MODES: Final[tuple[Mode, ...]] = ("sync", "batch", "memory")
CREATE_THREADS: Final = 8
PROMPT_MESSAGES: Final = 50
"""Messages a prompt session holds, its seed included."""
SWEEP_TTL: Final = 100.0
SWEEP_MAX_SESSIONS: Final = 200_000
GROUPS: Final = ("add", "prompt", "sweep")

USER_TEXT: Final = (
    "Please look at the failing test in tests/actors/test_memory.py and tell me why the "
    "session expires early."
)


# ---------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class Settings:
    """What to run: sizes, repeats, where the temporary directories go."""

    sync_ops: int
    batch_ops: int
    memory_ops: int
    prompt_ops: int
    sessions: int
    repeat: int
    timeout: float
    only: tuple[str, ...]
    tmp_parent: str | None


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n", 1)[0])
    add = p.add_argument
    add("--sync-ops", type=positive, default=None, help="add_message calls per sync run (4,000)")
    add("--batch-ops", type=positive, default=None, help="add_message calls per batch run (40,000)")
    add("--memory-ops", type=positive, default=None, help="add_message calls per memory-only run (40,000)")
    add("--prompt-ops", type=positive, default=None, help="build_prompt_messages calls per run (20,000)")
    add("--sessions", type=positive, default=None, help="sessions created, then swept (100,000)")
    add("--repeat", type=positive, default=None, help="runs per measurement; median shown (3)")
    add("--timeout", type=float, default=600.0, help="seconds a run may take before it counts as hung")
    add(
        "--only", type=subset_of(GROUPS), default=GROUPS, help=f"comma-separated subset of {','.join(GROUPS)}"
    )
    add("--quick", action="store_true", help="small counts and one run: a smoke test (< 1 minute)")
    add("--dir", type=directory, default=None, help="parent of the temporary directories (a real disk)")
    add("--json", type=json_file, default=None, metavar="FILE", help="also write the results here")
    return p


def parse_args(argv: Sequence[str] | None = None) -> tuple[Settings, Path | None]:
    args = _build_parser().parse_args(argv)
    quick = bool(args.quick)

    def pick(value: int | None, full: int, small: int) -> int:
        return value if value is not None else (small if quick else full)

    settings = Settings(
        sync_ops=pick(args.sync_ops, 4_000, 400),
        batch_ops=pick(args.batch_ops, 40_000, 4_000),
        memory_ops=pick(args.memory_ops, 40_000, 4_000),
        prompt_ops=pick(args.prompt_ops, 20_000, 2_000),
        sessions=pick(args.sessions, 100_000, 10_000),
        repeat=pick(args.repeat, 3, 1),
        timeout=args.timeout,
        only=args.only,
        tmp_parent=args.dir,
    )
    return settings, args.json


def runtime_config(mode: Mode) -> Config:
    durability: Durability = "batch" if mode == "memory" else mode
    return Config(journal=JournalConfig(durability=durability))


def open_runtime(path: Path, mode: Mode) -> Runtime:
    """A runtime on a fresh journal under ``path``, or a memory-only one."""
    if mode == "memory":
        return Runtime.open(config=runtime_config(mode))
    return Runtime.open(path / "journal", config=runtime_config(mode))


def journal_seq(runtime: Runtime) -> int:
    journal = runtime._journal  # noqa: SLF001 - the count is the journal's own
    return 0 if journal is None else journal.last_seq


# ---------------------------------------------------------------------- measurements


class SessionsBroken(RuntimeError):  # noqa: N818 - it names what it reports
    """The runtime hung or failed during a measurement (a finding, not a benchmark result)."""


def run_threads(
    threads: int, work: Callable[[int], None], finish: Callable[[], None], *, timeout: float
) -> float:
    """Run ``work(i)`` on ``threads`` threads released together, then ``finish()``; return the seconds.

    Raises:
        SessionsBroken: a thread raised, or they had not all returned within ``timeout``.

    """
    barrier = threading.Barrier(threads + 1)
    errors: list[BaseException] = []

    def body(index: int) -> None:
        try:
            barrier.wait()
            work(index)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller's thread
            errors.append(exc)

    pool = [
        threading.Thread(target=body, args=(i,), name=f"bench-caller-{i}", daemon=True)
        for i in range(threads)
    ]
    for thread in pool:
        thread.start()
    gc.collect()
    barrier.wait()
    start = time.perf_counter()
    deadline = start + timeout
    for thread in pool:
        thread.join(max(0.0, deadline - time.perf_counter()))
    alive = sum(thread.is_alive() for thread in pool)
    if alive:
        msg = f"{alive} of {threads} caller threads had not returned after {timeout} s"
        raise SessionsBroken(msg)
    if errors:
        msg = f"a caller thread failed: {errors[0]!r}"
        raise SessionsBroken(msg) from errors[0]
    finish()
    return time.perf_counter() - start


# ------------------------------------------------------------------ add_message


def add_messages(path: Path, *, mode: Mode, threads: int, ops: int, timeout: float) -> Sample:
    """``ops`` add_message calls spread over ``threads`` threads, each on its own session."""
    per_thread = max(1, ops // threads)
    with open_runtime(path, mode) as runtime:
        memory = runtime.memory
        sessions = [memory.create_session(f"user-{i}") for i in range(threads)]
        runtime.flush()
        before = journal_seq(runtime)

        def work(index: int) -> None:
            add, session = memory.add_message, sessions[index]
            for _ in range(per_thread):
                add(session, "user", USER_TEXT)

        seconds = run_threads(threads, work, runtime.flush, timeout=timeout)
        journaled = journal_seq(runtime) - before
        held = [len(memory.get_messages(s)) for s in sessions]
    if any(n != 1 + per_thread for n in held):
        msg = f"add_message ({mode}, {threads} threads): sessions hold {held}, expected {1 + per_thread} each"
        raise SessionsBroken(msg)
    if mode != "memory" and journaled != per_thread * threads:
        msg = (
            f"add_message ({mode}, {threads} threads): journaled {journaled}, expected {per_thread * threads}"
        )
        raise SessionsBroken(msg)
    return Sample(seconds, {"ops": per_thread * threads})


# ------------------------------------------------------------------ build_prompt_messages


_TOOLS: Final = (
    (
        "file_tools",
        '{"operation": "read", "path": "actors/_memory.py"}',
        "def _expire_all(self) -> int:\n...",
    ),
    (
        "code_runner",
        '{"command": "pytest -q tests/actors/test_memory.py"}',
        "3 passed in 0.41s\nexit_code: 0",
    ),
    ("http_request", '{"method": "GET", "url": "https://example.com/api"}', "HTTP/1.1 200 OK\n{}"),
    ("knowledge_search", '{"query": "session ttl"}', '{"results": [{"id": 1}, {"id": 2}]}'),
)


def conversation(count: int) -> list[Message]:
    """``count`` messages in turns of user, assistant with a tool call, tool result, answer."""
    out: list[Message] = []
    turn = 0
    while len(out) < count:
        name, arguments, result = _TOOLS[turn % len(_TOOLS)]
        call_id = f"call-{turn}"
        call = ToolCall(id=call_id, function=ToolCallFunction(name=name, arguments=arguments))
        out.extend(
            (
                Message(role="user", content=f"Step {turn}: {USER_TEXT}"),
                Message(
                    role="assistant",
                    content=f"I will use {name} to check that. Then I will summarise what I found.",
                    tool_calls=(call,),
                ),
                Message(role="tool_result", content=result, tool_call_id=call_id),
                Message(
                    role="assistant",
                    content=(
                        f"Turn {turn} done: the session's accessed_at is refreshed on every read, "
                        "so it cannot expire early; see ```python\nstate.accessed_at = now\n``` above."
                    ),
                ),
            )
        )
        turn += 1
    return out[:count]


def build_prompts(path: Path, *, mode: Mode, threads: int, ops: int, timeout: float) -> Sample:
    """``ops`` build_prompt_messages calls over ``threads`` threads, each on its own 50-message session."""
    per_thread = max(1, ops // threads)
    history = conversation(PROMPT_MESSAGES - 1)  # the seed is the first message
    with open_runtime(path, mode) as runtime:
        memory = runtime.memory
        sessions = [memory.create_session(f"user-{i}") for i in range(threads)]
        for session in sessions:
            for message in history:
                memory.add_structured_message(session, message)
        runtime.flush()
        window = memory.build_prompt_messages(sessions[0])
        if not window or len(memory.get_messages(sessions[0])) != PROMPT_MESSAGES:
            msg = f"build_prompt_messages ({mode}): an empty window or a wrong history"
            raise SessionsBroken(msg)

        def work(index: int) -> None:
            build, session = memory.build_prompt_messages, sessions[index]
            for _ in range(per_thread):
                build(session)

        seconds = run_threads(threads, work, runtime.flush, timeout=timeout)
    return Sample(seconds, {"ops": per_thread * threads}, {"window": float(len(window))})


# ------------------------------------------------------------------ sweep and reopen


def sweep_and_reopen(path: Path, *, sessions: int, timeout: float) -> Sample:
    """Create ``sessions`` sessions, expire them all, time the sweep, then time reopening."""
    clock = FakeClock()
    config = Config(
        journal=JournalConfig(durability="batch"),
        memory=MemoryConfig(max_sessions=max(SWEEP_MAX_SESSIONS, sessions), session_ttl=SWEEP_TTL),
    )
    journal_path = path / "journal"
    per_thread = -(-sessions // CREATE_THREADS)
    with Runtime.open(journal_path, config=config, clock=clock) as runtime:
        memory = runtime.memory

        def work(index: int) -> None:
            create = memory.create_session
            for n in range(index * per_thread, min(sessions, (index + 1) * per_thread)):
                create(f"user-{n}")

        create_seconds = run_threads(CREATE_THREADS, work, runtime.flush, timeout=timeout)
        live = memory.size()
        if live != sessions:
            msg = f"created {sessions:,} sessions, but memory.size() says {live:,}"
            raise SessionsBroken(msg)
        clock.advance(SWEEP_TTL + 1)
        gc.collect()
        start = time.perf_counter()
        swept = memory.sweep()
        sweep_seconds = time.perf_counter() - start
        runtime.flush()
        durable_seconds = time.perf_counter() - start
        records = journal_seq(runtime)
        start = time.perf_counter()
    close_seconds = time.perf_counter() - start
    if swept != sessions:
        msg = f"sweep() returned {swept:,} after {sessions:,} sessions expired"
        raise SessionsBroken(msg)
    gc.collect()
    start = time.perf_counter()
    with Runtime.open(journal_path, config=config, clock=clock) as runtime:
        reopen_seconds = time.perf_counter() - start
        # Runtime.open replays the session streams before it returns; the first memory
        # call is timed too, to show nothing is left to wait for.
        left = runtime.memory.size()
        recovered_seconds = time.perf_counter() - start
        reopened_records = journal_seq(runtime)
    if left != 0 or reopened_records != records:
        msg = (
            f"reopened with {left:,} live sessions and {reopened_records:,} records (expected 0, {records:,})"
        )
        raise SessionsBroken(msg)
    return Sample(
        sweep_seconds,
        {"sessions": sessions, "records": records},
        {
            "create_seconds": create_seconds,
            "durable_seconds": durable_seconds,
            "close_seconds": close_seconds,
            "reopen_seconds": reopen_seconds,
            "recovered_seconds": recovered_seconds,
        },
    )


# ---------------------------------------------------------------------- rows and workloads


def _mode_name(mode: Mode) -> str:
    return "memory-only" if mode == "memory" else mode


def _threads_name(threads: int) -> str:
    return f"{threads} thread{'s' if threads > 1 else ''}"


def call_workloads(settings: Settings, call: str) -> list[Workload]:
    """add_message or build_prompt_messages, every mode and thread count."""
    s = settings
    out: list[Workload] = []
    group = "add" if call == "add_message" else "prompt"
    for mode in MODES:
        for threads in THREADS:
            label = f"{call}, {_mode_name(mode)}, {_threads_name(threads)}"
            if mode == "memory":
                reference = "" if threads == 1 else f"{call}, memory-only, 1 thread"
            else:
                reference = f"{call}, memory-only, {_threads_name(threads)}"
            if call == "add_message":
                ops = {"sync": s.sync_ops, "batch": s.batch_ops, "memory": s.memory_ops}[mode]
                timed: Timed = functools.partial(
                    add_messages, mode=mode, threads=threads, ops=ops, timeout=s.timeout
                )
                note = None
            else:
                timed = functools.partial(
                    build_prompts, mode=mode, threads=threads, ops=s.prompt_ops, timeout=s.timeout
                )

                def note(samples: list[Sample]) -> str:
                    return f"{PROMPT_MESSAGES} messages, window {median_extra(samples, 'window'):.0f}"

            row = RowSpec(label, "ops", reference=reference, note=note)
            out.append(Workload(label, group, timed, (row,)))
    return out


def sweep_workloads(settings: Settings) -> list[Workload]:
    n = settings.sessions
    name = f"sweep {n:,} sessions"
    timed = functools.partial(sweep_and_reopen, sessions=n, timeout=settings.timeout)

    def close_note(samples: list[Sample]) -> str:
        return f"then close {median_extra(samples, 'close_seconds'):.2f} s"

    rows = (
        RowSpec(
            f"create {n:,} sessions, batch, {CREATE_THREADS} threads (setup)",
            "sessions",
            seconds="create_seconds",
            note=lambda _: "FakeClock; until runtime.flush()",
        ),
        RowSpec(f"sweep {n:,} expired sessions: sweep() returns", "sessions"),
        RowSpec(
            f"sweep {n:,} expired sessions: + flush (durable)",
            "sessions",
            seconds="durable_seconds",
            note=close_note,
        ),
        RowSpec(
            "reopen after the sweep: Runtime.open returns",
            "records",
            seconds="reopen_seconds",
            note=lambda _: "verify=full; sessions recovered before it returns",
        ),
        RowSpec(
            "reopen after the sweep: + first memory call answers",
            "records",
            seconds="recovered_seconds",
            note=lambda _: f"{n:,} session streams, none live (each read once: its last record ends it)",
        ),
    )
    return [Workload(name, "sweep", timed, rows)]


def build_workloads(settings: Settings) -> list[Workload]:
    out: list[Workload] = []
    if "add" in settings.only:
        out.extend(call_workloads(settings, "add_message"))
    if "prompt" in settings.only:
        out.extend(call_workloads(settings, "build_prompt_messages"))
    if "sweep" in settings.only:
        out.extend(sweep_workloads(settings))
    return out


# ---------------------------------------------------------------------- reporting


def main(argv: Sequence[str] | None = None) -> int:
    settings, json_path = parse_args(argv)
    env_info = environment(repeat=settings.repeat, tmp_parent=settings.tmp_parent)
    warn_if_tmpfs(env_info)
    print(
        f"sessions bench: {', '.join(settings.only)}; median of {settings.repeat}; "
        f"temp dirs under {env_info['tmp_parent']} ({env_info['tmp_filesystem']})",
        file=sys.stderr,
        flush=True,
    )
    rows = run_workloads(
        build_workloads(settings),
        repeat=settings.repeat,
        tmp_parent=settings.tmp_parent,
        prefix="cogfabric-sessions-",
    )
    print()
    print(
        f"cogfabric sessions at {env_info['commit']}: median of {settings.repeat} "
        f"(Python {env_info['python']}, pykka {env_info['pykka']}, lmdb {env_info['lmdb']}, "
        f"msgspec {env_info['msgspec']}, {env_info['cpus']} CPUs); fsync on; "
        "each caller thread owns a session"
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
