"""The scripts in bench/ run end to end (tiny counts, no timing asserted), so an API
change cannot leave the published benchmarks broken."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"

TINY = {
    "journal_append.py": "--events 2000 --single-events 10 --hash-records 2000 --repeat 2 --ablate",
    "fabric.py": (
        "--ring-batch-agents 4 --ring-batch-hops 10 --ring-sync-agents 4 --ring-sync-hops 5"
        " --handle-ops 200 --handle-sync-ops 20 --round-read-agents 4 --spawn-agents 20 --fanout-agents 20"
        " --recovery-agents 4 --recovery-events 2000 --repeat 1 --timeout 120"
    ),
    "sessions.py": (
        "--sync-ops 20 --batch-ops 200 --memory-ops 200 --prompt-ops 50 --sessions 200"
        " --repeat 1 --timeout 120"
    ),
    "peers.py": "--events 500 --single-events 10 --read-checkpoints 50 --repeat 1",
    "lmdb_gil.py": "--items 50 --busy 0,1 --repeat 1",
    "audit.py": "--events 300 --agents 4 --repeat 2",
}


def _run(script: str, options: str, tmp_path: Path) -> tuple[str, list[dict[str, Any]]]:
    """Run ``script`` with ``options`` in ``tmp_path``: its output and its JSON's results."""
    out = tmp_path / "out.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *options.split(), "--dir", str(tmp_path), "--json", str(out)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout, json.loads(out.read_text(encoding="utf-8"))["results"]


Shared = Callable[[str, str], tuple[str, list[dict[str, Any]], dict[str, Any]]]
"""``shared_run``'s type: a script and its options to its output, results and JSON document."""


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory: pytest.TempPathFactory) -> Shared:
    """``shared_run(script, options)``: ``_run``'s output and results, and the whole JSON document.

    Each script and options run once a module: the tests that read the same run's report
    share it (read only), where each ran the script again (a second or more each).
    """
    runs: dict[tuple[str, str], tuple[str, list[dict[str, Any]], dict[str, Any]]] = {}

    def run(script: str, options: str) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
        if (script, options) not in runs:
            directory = tmp_path_factory.mktemp(script.removesuffix(".py"))
            stdout, results = _run(script, options, directory)
            runs[script, options] = (
                stdout,
                results,
                json.loads((directory / "out.json").read_text(encoding="utf-8")),
            )
        return runs[script, options]

    return run


@pytest.mark.parametrize("script", TINY)
def test_the_script_runs_and_writes_its_results(shared_run: Shared, script: str) -> None:
    stdout, results, _ = shared_run(script, TINY[script])

    assert results, script
    assert "workload" in stdout


_RING_RUN = re.compile(
    r"(\d+\.\d+) (\d+)% \(CPU (\d+\.\d+): system (\d+\.\d+)(?:, writer (\d+\.\d+))?, "
    r"gc (\d+\.\d+) in (\d+) passes, (\d+) full; (\d+\.\d+) switches/delivery\)"
)


_RING_BATCH = "--only ring-batch --ring-batch-agents 4 --ring-batch-hops 10 --repeat 2 --timeout 120"


def test_the_ring_reports_how_bunched_each_run_was_and_where_its_cpu_went(shared_run: Shared) -> None:
    # Ring runs are bimodal; each run's share of deliveries that found more mail waiting
    # tells a convoy run from a spread-out one, so the note must carry it per run, with
    # the run's CPU time, its system share, (with a journal) the writer thread's and the
    # garbage collector's passes.
    _, results, _ = shared_run("fabric.py", _RING_BATCH)

    notes = {row["workload"]: row["note"] for row in results}
    rings = {
        workload: note
        for workload, note in notes.items()
        if workload.startswith("ring 4 agents") and not workload.endswith(": deliveries")
    }
    assert len(rings) == 3  # journaled, journaled under another GIL switch interval, memory-only
    for workload, note in rings.items():
        runs = _RING_RUN.findall(note)
        assert len(runs) == 2, note
        for _seconds, bunched, cpu, _system, writer, _gc_seconds, passes, full, _switches in runs:
            assert 0 <= int(bunched) <= 100
            assert int(full) <= int(passes)
            journaled = "memory-only" not in workload
            assert bool(writer) == journaled, note  # the writer's own clock, with a journal only
            assert not writer or float(writer) <= float(cpu) + 0.01  # a part of the process's


_SYNC_RUN = re.compile(
    r"(\d+\.\d+) \(CPU (\d+\.\d+): system (\d+\.\d+), writer (\d+\.\d+); (\d+\.\d+) voluntary and "
    r"(\d+\.\d+) involuntary switches/delivery; (\d+\.\d+) events/commit\)"
)


def test_the_sync_ring_reports_its_switches_and_how_many_events_shared_each_commit(tmp_path: Path) -> None:
    # What bounds the sync ring: each change waits for its commit, so the note gives
    # each run's context switches a delivery and the events a commit held; the JSON
    # keeps every run's figures beside its time.
    options = "--only ring-sync --ring-sync-agents 4 --ring-sync-hops 5 --repeat 2 --timeout 120"
    _, results = _run("fabric.py", options, tmp_path)

    rows = {row["workload"]: row for row in results}
    changes = rows["ring 4 agents x 5 hops, sync: acked state changes"]
    runs = _SYNC_RUN.findall(changes["note"])
    assert len(runs) == 2, changes["note"]
    assert len(changes["extras"]) == 2
    events = rows["ring 4 agents x 5 hops, sync: journaled events"]["count"]
    for (seconds, *_, per_commit), extra, took in zip(runs, changes["extras"], changes["runs"], strict=True):
        assert float(seconds) == pytest.approx(took, abs=0.006)  # the note's runs are the JSON's, in order
        assert extra["commits"] >= 1
        assert extra["events_per_commit"] * extra["commits"] == pytest.approx(events)
        assert float(per_commit) == pytest.approx(extra["events_per_commit"], abs=0.05)
        assert extra["involuntary_switches_per_delivery"] >= 0


def test_the_memory_only_ring_is_measured_against_a_ring_of_bare_pykka_actors(shared_run: Shared) -> None:
    # What the runtime's agents cost a delivery beside the actor library alone: the same
    # ring shape (4 actors, one token each, 10 hops) of plain Pykka actors, in the same run,
    # with the CPU time a delivery of both.
    _, results, _ = shared_run("fabric.py", _RING_BATCH)

    rows = {row["workload"]: row for row in results}
    bare = rows["bare Pykka ring 4 actors x 10 hops: deliveries"]
    agents = rows["ring 4 agents x 10 hops, memory-only (no journal): deliveries"]
    assert bare["count"] == agents["count"] == 40
    assert agents["reference"] == "bare Pykka ring 4 actors x 10 hops: deliveries"
    assert agents["ratio"] == pytest.approx(agents["rate"] / bare["rate"])
    for row in (bare, agents):
        cpu = re.match(r"(\d+\.\d) us of CPU a delivery \(median\)", row["note"])
        assert cpu is not None, row["note"]
        assert float(cpu.group(1)) > 0


def test_the_fan_out_reaches_every_agent_at_both_sizes_and_both_switch_intervals(tmp_path: Path) -> None:
    _, results = _run("fabric.py", "--only fanout --fanout-agents 30 --repeat 1 --timeout 120", tmp_path)

    rows = {row["workload"]: row["count"] for row in results}
    assert rows == {
        "bare Pykka: a tell to each of 3 idle actors, 32 at a time": 3,
        "bare Pykka: a tell to each of 30 idle actors, 32 at a time": 30,
        "bus.broadcast to 3 agents: until every behavior handled it": 3,
        "bus.broadcast to 30 agents: until every behavior handled it": 30,
        "bus.broadcast to 30 agents, switch interval 50 ms: until every behavior handled it": 30,
        "publish_task_context to 3 agents: until flush() returns": 3,
        "publish_task_context to 30 agents: until flush() returns": 30,
        "publish_task_context to 30 agents, switch interval 50 ms: until flush() returns": 30,
    }


def test_the_journal_bench_reports_cpu_and_bytes_written_per_event(shared_run: Shared) -> None:
    # What bounds a synced append is the Python work or the bytes its commits write: each
    # row carries both, per event, so the note can say which. (The tiny run above: its
    # --hash-records and --ablate add rows of their own.)
    _, results, _ = shared_run("journal_append.py", TINY["journal_append.py"])

    rows = {row["workload"]: row for row in results}
    raw = rows["raw append + encoding, 1000/txn"]
    journal = rows["Journal.append(validate=False), batch 1000"]
    for row in (raw, journal):
        assert len(row["cpu_runs"]) == 2
        assert row["cpu_us"] > 0
        assert 0 < row["bytes_per_event"] < 10_000
    # the journal stores each record's trailer and an id index beside it: more bytes a record
    assert journal["bytes_per_event"] > raw["bytes_per_event"]


def test_the_audit_bench_times_each_export_of_every_record_through_the_command(shared_run: Shared) -> None:
    # The journal holds exactly --events records of the simulation's mix; each export row
    # is the command's run, every run checked to have written one line a record.
    _, results, document = shared_run("audit.py", TINY["audit.py"])  # --events 300 --agents 4 --repeat 2

    rows = {row["workload"]: row for row in results}
    assert set(rows) == {
        "read every record (typed decode)",
        "journal.verify()",
        "export -o FILE",
        "export --verifiable -o FILE",
        "export --no-verify -o FILE",
    }
    assert {row["count"] for row in results} == {300}
    assert document["journal"]["records"] == sum(document["journal"]["types"].values()) == 300
    assert document["environment"]["cogfabric_source"].endswith("cogfabric")
    plain, verifiable = rows["export -o FILE"], rows["export --verifiable -o FILE"]
    for row in (plain, verifiable, rows["export --no-verify -o FILE"]):
        assert len(row["runs"]) == len(row["extras"]) == 2
        assert row["reference"] == "read every record (typed decode)"
        assert all(extra["output_bytes"] > 0 for extra in row["extras"])
    # a verifiable line holds the record's stored bytes too
    assert verifiable["extras"][0]["output_bytes"] > plain["extras"][0]["output_bytes"]


def _bench_module(name: str) -> Any:
    """A module of bench/, imported as its scripts import each other (bench/ on the path)."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


def _refused(capsys: pytest.CaptureFixture[str], script: str, *args: str) -> tuple[object, str, str]:
    """``script``'s ``main(args)`` run in this process, expected to exit before measuring:
    its exit status, stdout and stderr.

    The refusals are its command line's parsing (argparse exits), the first thing ``main``
    does, so a process of its own checks nothing more and took a fresh interpreter's start
    and imports each time (the runs above start the scripts as processes, exit status 0).
    """
    main = _bench_module(script.removesuffix(".py")).main
    with pytest.raises(SystemExit) as info:
        main(list(args))
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


@pytest.mark.parametrize("script", TINY)
def test_a_json_path_that_cannot_be_written_is_refused_before_measuring(
    tmp_path: Path, script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing" / "out.json"
    code, stdout, stderr = _refused(capsys, script, "--quick", "--json", str(missing))

    assert code == 2
    assert "is in a directory that does not exist" in stderr
    assert stdout == ""  # nothing measured


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e300"])
def test_fabric_refuses_a_ring_timeout_that_is_no_positive_number_of_seconds(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, stdout, stderr = _refused(capsys, "fabric.py", "--quick", f"--timeout={value}")

    assert (code, stdout) == (2, "")
    assert f"--timeout: must be a positive number of seconds up to 1,000,000, got {value}" in stderr


def test_a_results_file_that_cannot_be_written_after_the_tables_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        _bench_module("_common").write_json(
            tmp_path / "gone" / "out.json", {"results": []}
        )  # its directory removed meanwhile

    captured = capsys.readouterr()
    assert info.value.code == 2
    assert captured.err.startswith(f"error: cannot write {tmp_path / 'gone' / 'out.json'}: No such file")
    assert "wrote" not in captured.out


def test_fabric_judges_no_target_on_workloads_smaller_than_the_targets(shared_run: Shared) -> None:
    # the tiny run above: every workload (ring-batch, ring-sync and recovery among them,
    # at 4 agents x 10 hops, 4 x 5 and 4 agents / 2,000 events) smaller than its target
    stdout, results, _ = shared_run("fabric.py", TINY["fabric.py"])

    assert [r for r in results if r.get("met") is not None] == []
    assert "MISSED" not in stdout


@pytest.mark.parametrize("script", TINY)
@pytest.mark.parametrize("where", ["missing", "a file"])
def test_a_dir_that_is_no_writable_directory_is_refused_before_measuring(
    tmp_path: Path, script: str, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "missing"
    if where == "a file":
        target = tmp_path / "file"
        target.write_text("", encoding="utf-8")
    code, stdout, stderr = _refused(capsys, script, "--quick", "--dir", str(target))

    assert code == 2
    assert ("does not exist" if where == "missing" else "is no directory") in stderr
    assert "Traceback" not in stderr
    assert stdout == ""  # nothing measured


def _plot(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH / "plot.py"), *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
        cwd=tmp_path,
    )


def test_plot_refuses_an_output_it_cannot_write_and_a_file_that_holds_no_results(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"results": [{"workload": "w", "rate": 10.0}]}), encoding="utf-8")
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]", encoding="utf-8")

    missing_dir = _plot(tmp_path, str(results), "-o", str(tmp_path / "missing" / "chart.png"))
    a_dir = _plot(tmp_path, str(results), "-o", str(tmp_path))
    not_results = _plot(tmp_path, str(listed), "-o", str(tmp_path / "chart.png"))

    assert (missing_dir.returncode, a_dir.returncode) == (2, 2)
    assert "is in a directory that does not exist" in missing_dir.stderr
    assert "is a directory" in a_dir.stderr
    assert not_results.returncode == 1
    assert "is no results file" in not_results.stderr
    for done in (missing_dir, a_dir, not_results):
        assert "Traceback" not in done.stderr
    assert not list(tmp_path.glob("*.png"))


def test_plot_writes_the_png_it_names(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")  # the bench extra
    results = tmp_path / "results.json"
    results.write_text(
        json.dumps({"results": [{"workload": "w", "rate": 10.0}, {"workload": "raw", "rate": 20.0}]}),
        encoding="utf-8",
    )

    done = _plot(tmp_path, str(results), "-o", "chart")

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "wrote chart.png (2 bars)"
    assert (tmp_path / "chart.png").read_bytes().startswith(b"\x89PNG")
    assert not (tmp_path / "chart").exists()


def _plot_module() -> Any:
    return _bench_module("plot")


def test_plot_reports_a_chart_it_could_not_write_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plot = _plot_module()
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"results": [{"workload": "w", "rate": 10.0}]}), encoding="utf-8")

    def disk_full(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(plot, "draw", disk_full)
    with pytest.raises(SystemExit) as info:
        plot.main([str(results), "-o", str(tmp_path / "chart.png")])

    assert info.value.code == 2
    assert f"cannot write {tmp_path / 'chart.png'}: No space left on device" in capsys.readouterr().err


def test_plot_titles_each_file_by_the_command_that_wrote_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plot = _plot_module()
    documents: dict[str, dict[str, Any]] = {
        "bench.json": {"machine": {"git_commit": "abc1234"}, "repeat": 3, "quick": True},
        "peers.json": {"benchmark": "peers", "environment": {"commit": "abc1234", "repeat": 5}},
        "fabric.json": {"environment": {"commit": "abc1234"}, "settings": {"repeat": 2}},
    }
    paths = []
    for name, document in documents.items():
        path = tmp_path / name
        path.write_text(
            json.dumps({**document, "results": [{"workload": "w", "rate": 10.0}]}), encoding="utf-8"
        )
        paths.append(str(path))
    titles: list[str] = []
    monkeypatch.setattr(plot, "draw", lambda _bars, _output, title: titles.append(title))

    assert plot.main([*paths, "-o", str(tmp_path / "chart.png")]) == 0

    assert len(titles) == 1
    assert titles[0].split("\n") == [
        "cogfabric bench --quick --repeat 3 at abc1234",
        "cogfabric vs peers: median of 5 at abc1234, durable on disk (fsync per commit)",
        "bench/fabric.py: median of 2 at abc1234",
    ]


@pytest.mark.parametrize("reference", ["bare_ring", "bare_fanout"])
def test_a_bare_pykka_reference_stops_the_actors_it_started_when_a_start_fails(
    monkeypatch: pytest.MonkeyPatch, reference: str
) -> None:
    # They were started in one list comprehension before the try: a failed start (a
    # process out of threads) left the others running, and the process never exited.
    import pykka  # noqa: PLC0415

    fabric = _bench_module("fabric")
    actor = fabric._BareRingActor if reference == "bare_ring" else fabric._BareActor
    started = 0
    real_start = actor.start

    def start(*args: Any, **kwargs: Any) -> Any:
        nonlocal started
        started += 1
        if started == 4:
            msg = "can't start new thread"
            raise RuntimeError(msg)
        return real_start(*args, **kwargs)

    monkeypatch.setattr(actor, "start", start)
    timed = fabric.bare_ring(10, 5, 10) if reference == "bare_ring" else fabric.bare_fanout(10, 10)

    with pytest.raises(RuntimeError, match="can't start new thread"):
        timed(None)

    assert [ref for ref in pykka.ActorRegistry.get_by_class(actor) if ref.is_alive()] == []


def test_a_results_path_under_a_file_is_refused_as_under_no_directory(tmp_path: Path) -> None:
    from cogfabric._bench import unwritable  # noqa: PLC0415

    a_file = tmp_path / "notes.txt"
    a_file.write_text("kept", encoding="utf-8")

    assert unwritable(a_file / "out.json") == f"is under {a_file}, which is no directory"
    assert unwritable(tmp_path / "missing" / "out.json") == (
        f"is in a directory that does not exist ({tmp_path / 'missing'})"
    )
    assert unwritable(tmp_path / "out.json") is None
    assert a_file.read_text(encoding="utf-8") == "kept"
