"""``cogfabric bench``'s figures: what each workload counts, which reference it is paired
with, and how its samples reach the JSON and the table (from a mutation test of _bench.py).

The runs here are tiny; no timing is asserted.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lmdb
import pytest
from click.testing import CliRunner

import cogfabric._bench
from cogfabric._bench import (
    Result,
    Sizes,
    _build_recovery_journal,
    _events,
    _handle,
    _journal_append,
    _machine,
    _raw_append,
    _requests,
    _spawn,
    run_bench,
    to_json,
)
from cogfabric.actors import ActorTimeoutError, Agent
from cogfabric.cli import main
from cogfabric.store import Journal

if TYPE_CHECKING:
    from collections.abc import Callable

WRITE = "raw LMDB append, pre-encoded, 1000/txn"
READ = "raw LMDB scan + typed decode"
ACTOR = "bare Pykka tell loop"

# every count differs from the others' (50 set_private calls: 48 over 16 threads)
TINY = Sizes(
    events=300,
    single=7,
    ring_agents=3,
    ring_hops=4,
    sync_agents=5,
    sync_hops=2,
    handle_ops=50,
    requests=6,
    session_ops=9,
    spawn=11,
    recovery_agents=3,
    recovery_events=400,
)


@pytest.fixture(scope="module")
def tiny_run() -> tuple[list[Result], dict[str, Any]]:
    return run_bench(TINY, 2)


def test_every_workload_counts_what_it_did_beside_the_reference_readme_names(
    tiny_run: tuple[list[Result], dict[str, Any]],
) -> None:
    results, _ = tiny_run
    # README's Performance table: each workload's count and reference
    expected = {
        WRITE: (300, "events", None),
        "Journal.append, batch 1": (7, "events", WRITE),
        "Journal.append, batch 100": (300, "events", WRITE),
        "Journal.append, batch 1000": (300, "events", WRITE),
        "Journal.append(validate=False), batch 1000": (300, "events", WRITE),
        READ: (300, "events", None),
        "replay (read + decode)": (300, "events", READ),
        "verify() (full chain)": (300, "records", READ),
        ACTOR: (300, "messages", None),
        # a delivery journals its message, its delivery and one change; one broadcast starts all
        "ring 3 agents, batch: journaled events": (3 * 4 * 3 - 3 + 1, "events", WRITE),
        "ring 5 agents, sync: acked changes": (5 * 2, "changes", ACTOR),
        **{
            f"handle set_private, {durability}, {n} threads": (50 // n * n, "changes", ACTOR)
            for durability in ("batch", "sync")
            for n in (1, 4, 16)
        },
        "IPC request/reply round trips": (6, "round trips", ACTOR),
        "session add_message (sync)": (9, "ops", WRITE),
        "session build_prompt_messages": (9, "ops", ACTOR),
        "spawn_many 11 agents": (11, "agents", ACTOR),
        "recovery of 3 agents, snapshots, verify=tail": (400, "events", READ),
        "recovery of 3 agents, no snapshots, verify=tail": (400, "events", READ),
    }

    assert {r.name: (r.count, r.unit, r.reference) for r in results} == expected


def test_every_workload_is_measured_once_in_each_round(tiny_run: tuple[list[Result], dict[str, Any]]) -> None:
    results, _ = tiny_run

    assert [len(r.samples) for r in results] == [2] * len(results)
    spawn = next(r for r in results if r.name.startswith("spawn_many"))
    assert len(spawn.extra["peak_rss_growth_bytes"]) == 2


def _journaled(path: Path) -> collections.Counter[str]:
    with Journal.open(path) as journal:
        return collections.Counter(type(record.event).__name__ for record in journal.read())


def test_each_journal_append_writes_every_event_it_is_credited_with(tmp_path: Path) -> None:
    events = _events(250)
    for batch in (1, 100, 1000):
        _journal_append(tmp_path / str(batch), events, batch)

        assert _journaled(tmp_path / str(batch) / "journal") == {"PrivateSet": 250}, batch


def test_the_raw_append_reference_writes_every_value(tmp_path: Path) -> None:
    values = [bytes([i % 256]) * 10 for i in range(2_500)]

    _raw_append(tmp_path, values, 1000)

    env = lmdb.open(str(tmp_path / "raw"), max_dbs=2, readonly=True)
    try:
        with env.begin(db=env.open_db(b"e", create=False)) as txn:
            assert list(txn.cursor().iternext(keys=False, values=True)) == values
    finally:
        env.close()


@pytest.mark.parametrize(
    ("workload", "directory", "expected"),
    [
        (lambda t: _handle(t, 4, 50, "batch"), "handle", {"AgentSpawned": 4, "PrivateSet": 48}),
        (lambda t: _requests(t, 6), "ipc", {"AgentSpawned": 1, "IpcMessage": 12, "IpcDelivered": 12}),
        (lambda t: _spawn(t, 11), "spawn", {"AgentSpawned": 11}),
    ],
    ids=["handle", "requests", "spawn"],
)
def test_a_runtime_workload_journals_what_its_count_says(
    tmp_path: Path, workload: Callable[[Path], object], directory: str, expected: dict[str, int]
) -> None:
    workload(tmp_path)

    assert _journaled(tmp_path / directory) == expected  # a request and its reply a round trip


@pytest.mark.parametrize("snapshots", [True, False])
def test_the_recovery_journal_holds_every_event_and_snapshots_only_when_asked(
    tmp_path: Path, snapshots: bool
) -> None:
    _build_recovery_journal(tmp_path / "j", 3, 1_000, snapshots=snapshots)

    with Journal.open(tmp_path / "j") as journal:
        assert journal.last_seq == 3 + 1_000
        saved = [journal.load_snapshot(f"agent/a{i}") for i in range(3)]
    # a snapshot every 200 events of an agent: each of the three has 333 or more
    assert [s is not None for s in saved] == [snapshots] * 3


def _three_rounds() -> list[Result]:
    reference = Result(WRITE, 100, "events", samples=[1.0, 2.0, 1.0])
    measured = Result(
        "journal",
        300,
        "events",
        samples=[6.0, 1.5, 3.0],
        reference=WRITE,
        extra={"peak_rss_growth_bytes": [1, 2, 3]},
    )
    return [reference, measured]


def test_the_json_keeps_every_sample_and_their_median_min_max_rate_and_paired_ratio() -> None:
    document = json.loads(to_json(_three_rounds(), {"cores": 2}, repeat=3, quick=False))
    row = document["results"][1]

    assert (document["machine"], document["repeat"], document["quick"]) == ({"cores": 2}, 3, False)
    assert row["samples"] == [6.0, 1.5, 3.0]  # in the order of the rounds
    assert (row["median"], row["min"], row["max"]) == (3.0, 1.5, 6.0)
    assert row["rate"] == 100.0  # 300 at the median
    assert row["ratio"] == 1.0  # rounds: 50/100, 200/50, 100/100
    assert row["peak_rss_growth_bytes"] == [1, 2, 3]
    assert document["results"][0]["ratio"] is None


def test_the_table_shows_the_median_min_max_and_the_median_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    machine = {"cores": 2, "python": "3.11", "git_commit": "abc1234"}
    results = _three_rounds()
    results[1].extra = {"peak_rss_growth_bytes": [2**20, 30 * 2**20, 5 * 2**20]}
    monkeypatch.setattr(cogfabric._bench, "run_bench", lambda *_, **__: (results, machine))

    output = CliRunner().invoke(main, ["bench", "--repeat", "3"]).output
    row = next(line for line in output.splitlines() if line.startswith("journal "))

    assert row.split() == ["journal", "300", "3.000", "1.500", "6.000", "100", "1.00x", *WRITE.split()]
    assert "journal: peak resident memory +5 MiB (median)" in output


@pytest.mark.parametrize(
    ("options", "quick", "runs"),
    [
        ([], False, 3),
        (["--quick"], True, 1),
        (["--repeat", "2"], False, 2),
        (["--quick", "--repeat", "4"], True, 4),
    ],
)
def test_quick_sizes_only_with_quick_and_repeat_sets_the_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: list[str], quick: bool, runs: int
) -> None:
    asked: list[tuple[Sizes, int]] = []

    def measures_nothing(sizes: Sizes, repeat: int, **_: object) -> tuple[list[Result], dict[str, Any]]:
        asked.append((sizes, repeat))
        return [], {"cores": 2, "python": "3.11", "git_commit": None}

    monkeypatch.setattr(cogfabric._bench, "run_bench", measures_nothing)
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(main, ["bench", *options, "--json", str(out)])

    assert result.exit_code == 0, result.output
    assert asked == [(Sizes.quick() if quick else Sizes(), runs)]
    assert Sizes.quick() != Sizes()
    assert all(getattr(Sizes.quick(), f.name) < getattr(Sizes(), f.name) for f in fields(Sizes))
    assert {k: json.loads(out.read_text(encoding="utf-8"))[k] for k in ("repeat", "quick")} == {
        "repeat": runs,
        "quick": quick,
    }
    assert f"median of {runs} " in result.output


@pytest.mark.skipif(not Path("/proc/meminfo").is_file(), reason="needs /proc/meminfo")
def test_the_machines_memory_is_its_physical_memory_in_bytes() -> None:
    total = next(
        line
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines()
        if line.startswith("MemTotal:")
    )
    kib = int(total.split()[1])

    assert 0.9 < _machine()["memory"] / (kib * 1024) < 1.1


def _git(project: Path, *args: str) -> str:
    done = subprocess.run(
        [
            "git",
            "-C",
            str(project),
            "-c",
            "user.email=u@x",
            "-c",
            "user.name=u",
            "-c",
            "commit.gpgsign=false",
            *args,
        ],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_the_machine_names_the_checkouts_commit_and_dirty_only_for_its_tracked_files(tmp_path: Path) -> None:
    project = tmp_path / "cogfabric"
    source = Path(cogfabric._bench.__file__).parent
    shutil.copytree(source, project / "src" / "cogfabric", ignore=shutil.ignore_patterns("__pycache__"))
    _git(project, "init", "-q")
    _git(project, "add", "src")
    _git(project, "commit", "-q", "-m", "c")
    head = _git(project, "rev-parse", "--short", "HEAD")

    def commit() -> str:
        code = "import cogfabric._bench as b; print(b._machine()['git_commit'])"
        return subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONPATH": str(project / "src"), "PYTHONDONTWRITEBYTECODE": "1"},
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
            check=True,
        ).stdout.strip()

    clean = commit()
    (project / "notes.txt").write_text("untracked", encoding="utf-8")
    untracked = commit()
    with (project / "src" / "cogfabric" / "_bench.py").open("a", encoding="utf-8") as tracked:
        tracked.write("# changed\n")
    changed = commit()

    assert (clean, untracked, changed) == (head, head, head + "+dirty")


def test_a_handle_thread_that_fails_fails_the_workload_not_its_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a thread that stopped early (a call timing out on a loaded machine) left the
    # workload credited with every change of ``ops``: a faster rate, and only a traceback
    set_private = Agent.set_private

    def times_out_once(agent: Agent, key: str, value: object) -> None:
        if value == 3:
            msg = "agent 'h0' did not answer within 30 s"
            raise ActorTimeoutError(msg)
        set_private(agent, key, value)

    monkeypatch.setattr(Agent, "set_private", times_out_once)

    with pytest.raises(ActorTimeoutError, match="did not answer"):
        _handle(tmp_path, 4, 40, "batch")
