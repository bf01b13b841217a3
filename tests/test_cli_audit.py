"""The main job and the audit commands, through click's runner (and once as a console script)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import lmdb
import pytest
from click.testing import CliRunner

import cogfabric._audit
from cogfabric.cli import main
from cogfabric.store import FORMAT_VERSION, Journal

if TYPE_CHECKING:
    from collections.abc import Callable


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sim") / "journal"
    result = CliRunner().invoke(main, ["simulate", "--agents", "10", "--turns", "40", "--journal", str(path)])
    assert result.exit_code == 0, result.output
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256((path / "data.mdb").read_bytes()).hexdigest()


def _copy(journal: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    target.mkdir()
    shutil.copyfile(journal / "data.mdb", target / "data.mdb")
    return target


def _tampered_copy(journal: Path, tmp_path: Path, seq: int, break_link: Callable[[Path, int], None]) -> Path:
    """A copy of ``journal`` whose record ``seq`` has its last byte (its chain link's) changed."""
    copy = _copy(journal, tmp_path)
    break_link(copy, seq)
    return copy


def _without_id_entry(journal: Path, tmp_path: Path, seq: int | None) -> tuple[Path, int]:
    """A copy of ``journal`` whose id index lacks record ``seq``'s entry (None: the last's); its last seq."""
    with Journal.open(journal, readonly=True) as opened:
        last = opened.last_seq
        at = last if seq is None else seq
        event_id = next(iter(opened.read(after=at - 1, until=at))).event.id
    copy = _copy(journal, tmp_path)
    env = lmdb.open(str(copy), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"ids")) as txn:
        assert txn.delete(event_id.encode())
    env.close()
    return copy, last


def test_simulate_reports_and_a_second_run_continues(tmp_path: Path) -> None:
    path = tmp_path / "j"
    runner = CliRunner()

    first = runner.invoke(
        main, ["simulate", "--agents", "6", "--turns", "12", "--journal", str(path), "--seed", "3"]
    )
    second = runner.invoke(
        main, ["simulate", "--turns", "12", "--journal", str(path), "--durability", "batch", "--seed", "3"]
    )

    assert first.exit_code == 0, first.output
    assert first.output.startswith("ran 12 turns of 6 agents")
    assert "audit it: cogfabric inspect" in first.output
    assert second.exit_code == 0, second.output
    assert second.output.startswith("continued 12 turns of 6 agents")
    with Journal.open(path, readonly=True) as journal:
        assert journal.verify(decode=True).ok


def test_simulate_takes_a_yaml_config_and_names_a_bad_key(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("journal:\n  durability: batch\nmemory:\n  max_history: 4\n", encoding="utf-8")
    bad = tmp_path / "bad.yaml"
    bad.write_text("memory:\n  max_histroy: 4\n", encoding="utf-8")
    runner = CliRunner()

    ok = runner.invoke(
        main,
        [
            "simulate",
            "--agents",
            "4",
            "--turns",
            "4",
            "--journal",
            str(tmp_path / "j"),
            "--config",
            str(good),
        ],
    )
    refused = runner.invoke(main, ["simulate", "--journal", str(tmp_path / "k"), "--config", str(bad)])

    assert ok.exit_code == 0, ok.output
    assert refused.exit_code == 2
    assert "max_histroy" in refused.output


def test_audit_commands_never_change_the_data_file(simulated: Path) -> None:
    before = _digest(simulated)
    runner = CliRunner()

    results = [
        runner.invoke(main, ["verify", str(simulated)]),
        runner.invoke(main, ["inspect", str(simulated)]),
        runner.invoke(main, ["replay", str(simulated), "--agent", "researcher-000"]),
        runner.invoke(main, ["export", str(simulated)]),
        runner.invoke(main, ["trace", str(simulated), "--seq", "100"]),
    ]

    assert [r.exit_code for r in results] == [0, 0, 0, 0, 0]
    assert _digest(simulated) == before


def test_inspect_counts_records_types_and_streams(simulated: Path) -> None:
    result = CliRunner().invoke(main, ["inspect", str(simulated), "--json"])

    summary = json.loads(result.output)
    with Journal.open(simulated, readonly=True) as journal:
        assert summary["records"] == journal.last_seq
    assert summary["format"] == FORMAT_VERSION
    assert sum(summary["types"].values()) == summary["records"]
    assert {"agent", "bus", "session", "runtime"} <= set(summary["stream_kinds"])
    with Journal.open(simulated, readonly=True) as journal:
        streams = journal.streams()
        assert summary["streams"] == {s: sum(1 for _ in journal.read(stream=s)) for s in streams}
    assert summary["stream_count"] == len(streams)
    assert sum(summary["streams"].values()) == summary["records"]

    text = CliRunner().invoke(main, ["inspect", str(simulated)]).output
    for stream, count in summary["streams"].items():  # every stream, with its count
        assert re.search(rf"^ +{count:,}  {re.escape(stream)}$", text, re.MULTILINE), stream


def test_export_has_one_line_per_record_with_stable_fields(simulated: Path, tmp_path: Path) -> None:
    out = tmp_path / "all.jsonl"

    result = CliRunner().invoke(main, ["export", str(simulated), "--output", str(out)])

    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    with Journal.open(simulated, readonly=True) as journal:
        assert len(lines) == journal.last_seq
    assert result.exit_code == 0
    assert set(lines[0]) == {"seq", "time", "stream", "layer", "layers", "type", "version", "data", "chain"}
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))


def test_export_filters_by_layer_stream_and_after(simulated: Path) -> None:
    runner = CliRunner()

    private = runner.invoke(main, ["export", str(simulated), "--layer", "agent_private"])
    stream = runner.invoke(
        main, ["export", str(simulated), "--stream", "agent/researcher-000", "--after", "5"]
    )

    kept = [json.loads(x) for x in private.output.splitlines()]
    assert all("AGENT_PRIVATE" in line["layers"] for line in kept)
    # a spawn holds the agent's first cognitive state, a kill its last: private both
    assert {line["layer"] for line in kept} == {"AGENT_PRIVATE", "TASK_SHARED"}
    assert {line["type"] for line in kept if line["layer"] != "AGENT_PRIVATE"} == {"AgentSpawned"}
    rows = [json.loads(x) for x in stream.output.splitlines()]
    assert rows
    assert {r["stream"] for r in rows} == {"agent/researcher-000"}
    assert min(r["seq"] for r in rows) > 5


def test_replay_at_two_points_shows_the_change(simulated: Path) -> None:
    with Journal.open(simulated, readonly=True) as journal:
        change = next(
            r.seq
            for r in journal.read(stream="agent/researcher-000")
            if type(r.event).__name__ == "PrivateSet" and r.event.key == "hypothesis"  # type: ignore[attr-defined]
        )
    runner = CliRunner()

    before = json.loads(
        runner.invoke(
            main, ["replay", str(simulated), "--agent", "researcher-000", "--at", str(change - 1), "--json"]
        ).output
    )
    after = json.loads(
        runner.invoke(
            main, ["replay", str(simulated), "--agent", "researcher-000", "--at", str(change), "--json"]
        ).output
    )

    assert "hypothesis" not in before["private"]
    assert "hypothesis" in after["private"]
    assert after["task_shared"]["goal"]


def test_replay_a_session(simulated: Path) -> None:
    runner = CliRunner()
    agent = json.loads(
        runner.invoke(main, ["replay", str(simulated), "--agent", "researcher-000", "--json"]).output
    )

    session = json.loads(
        runner.invoke(
            main, ["replay", str(simulated), "--session", agent["private"]["session"], "--json"]
        ).output
    )

    assert session["messages"][0]["content"] == "New session started"
    assert {m["role"] for m in session["messages"]} >= {"user", "assistant"}


def test_replay_takes_at_most_one_target_and_an_existing_one(simulated: Path) -> None:
    runner = CliRunner()

    both = runner.invoke(main, ["replay", str(simulated), "--agent", "a", "--session", "s"])
    assert both.exit_code == 2
    everyone = runner.invoke(main, ["replay", str(simulated), "--json"])  # neither: every agent and session
    assert everyone.exit_code == 0, everyone.output
    assert len(json.loads(everyone.output)["agents"]) > 1
    missing = runner.invoke(main, ["replay", str(simulated), "--agent", "nobody"])
    assert missing.exit_code == 2
    assert "does not exist" in missing.output


def test_one_changed_byte_in_a_copy_makes_verify_exit_one_naming_the_seq(
    simulated: Path, tmp_path: Path, break_link: Callable[[Path, int], None]
) -> None:
    copy = _tampered_copy(simulated, tmp_path, 17, break_link)

    result = CliRunner().invoke(main, ["verify", str(copy)])

    assert result.exit_code == 1
    assert "seq 17" in result.output


def test_a_changed_header_label_is_a_problem_in_the_journal(simulated: Path, tmp_path: Path) -> None:
    copy = _copy(simulated, tmp_path)
    env = lmdb.open(str(copy), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"meta")) as txn:
        txn.put(b"hash", b"sha1")
    env.close()

    for command in ("verify", "inspect"):
        result = CliRunner().invoke(main, [command, str(copy)])
        assert result.exit_code == 1, result.output  # tampering, not a usage error (2)
        assert "names its hash 'sha1'" in result.output


def test_a_journal_of_a_newer_format_gets_a_clear_error(simulated: Path, tmp_path: Path) -> None:
    copy = _copy(simulated, tmp_path)
    env = lmdb.open(str(copy), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"meta")) as txn:
        txn.put(b"format", (FORMAT_VERSION + 1).to_bytes(4, "big"))
    env.close()

    for command in ("verify", "inspect", "export"):
        result = CliRunner().invoke(main, [command, str(copy)])
        assert result.exit_code == 2
        assert f"format version {FORMAT_VERSION + 1}" in result.output


def test_a_directory_the_auditor_cannot_write_is_refused_unless_copied(
    simulated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cogfabric._audit, "_not_writable", lambda _path: "this directory is not writable")
    runner = CliRunner()

    refused = runner.invoke(main, ["inspect", str(simulated)])
    copied = runner.invoke(main, ["verify", str(simulated), "--copy"])

    assert refused.exit_code == 2
    assert "--copy" in refused.output
    assert copied.exit_code == 0, copied.output


@pytest.mark.parametrize(
    ("unwritable", "said"),
    [("lock.mdb", "its lock file (lock.mdb) is not writable"), ("", "this directory is not writable")],
)
def test_the_refusal_to_audit_in_place_names_what_is_not_writable(
    simulated: Path, monkeypatch: pytest.MonkeyPatch, unwritable: str, said: str
) -> None:
    # It blamed the directory when only lock.mdb (another user's) was not writable.
    real_access = os.access
    if not unwritable:
        (simulated / "lock.mdb").unlink()  # LMDB would create it in the directory

    def access(where: object, mode: int, **kwargs: object) -> bool:
        target = simulated / unwritable if unwritable else simulated
        if Path(str(where)) == target and mode == os.W_OK:
            return False  # as for an auditor who does not own it (tests run as root)
        return real_access(where, mode, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)
    result = CliRunner().invoke(main, ["verify", str(simulated)])

    assert result.exit_code == 2, result.output
    assert f"LMDB writes its lock file even when reading, and {said}; rerun with --copy" in result.output


def test_every_command_has_help_with_an_example() -> None:
    runner = CliRunner()

    for command in ("simulate", "verify", "replay", "export", "inspect", "verify-export", "trace"):
        result = runner.invoke(main, [command, "--help"])
        assert result.exit_code == 0
        assert "Example" in result.output


def test_the_console_script_runs_the_simulation(tmp_path: Path) -> None:
    script = shutil.which("cogfabric", path=str(Path(sys.executable).parent))
    assert script is not None

    out = subprocess.run(
        [script, "simulate", "--agents", "4", "--turns", "4", "--journal", str(tmp_path / "j")],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )

    assert out.returncode == 0, out.stderr
    assert "audit it" in out.stdout


def test_reading_commands_refuse_a_tampered_journal_unless_told(
    simulated: Path, tmp_path: Path, break_link: Callable[[Path, int], None]
) -> None:
    copy = _tampered_copy(simulated, tmp_path, 30, break_link)
    runner = CliRunner()

    refused = [
        runner.invoke(main, ["inspect", str(copy)]),
        runner.invoke(main, ["export", str(copy)]),
        runner.invoke(main, ["replay", str(copy), "--agent", "researcher-000"]),
    ]
    forced = runner.invoke(main, ["inspect", str(copy), "--no-verify"])

    assert [r.exit_code for r in refused] == [1, 1, 1]
    assert all("seq 30" in r.output for r in refused)
    # on stderr: `export J > out.jsonl` leaves no error line in the file, as a line of the export
    assert [r.stdout for r in refused] == ["", "", ""]
    assert all(r.stderr.startswith("error: the journal fails verification at seq 30: ") for r in refused)
    assert forced.exit_code == 0


def test_bench_quick_runs_every_workload_and_writes_the_samples(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"

    result = CliRunner().invoke(main, ["bench", "--quick", "--json", str(out)])

    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert {"cores", "memory", "python", "package_versions", "lmdb_library", "git_commit"} <= set(
        report["machine"]
    )
    assert report["machine"]["memory"] > 2**20  # physical memory, in bytes
    assert set(report["machine"]["package_versions"]) == {"cogfabric", "pykka", "msgspec", "lmdb"}
    assert report["machine"]["git_commit"] is None or report["machine"]["git_commit"][:7].isalnum()
    assert (report["repeat"], report["quick"]) == (1, True)
    names = {row["workload"] for row in report["results"]}
    references = {
        "raw LMDB append, pre-encoded, 1000/txn",
        "raw LMDB scan + typed decode",
        "bare Pykka tell loop",
    }
    assert references | {"replay (read + decode)", "verify() (full chain)"} <= names
    assert any(name.startswith("ring") for name in names)
    for row in report["results"]:
        assert len(row["samples"]) == 1, row
        assert row["count"] > 0, row
        assert row["min"] <= row["median"] <= row["max"]
        assert (row["reference"] is None) == (row["workload"] in references), row  # every figure has one
        assert row["reference"] is None or row["ratio"] > 0
    spawn = next(row for row in report["results"] if row["workload"].startswith("spawn_many"))
    assert spawn["peak_rss_growth_bytes"][0] > 0
    assert re.search(r" 0\.0*[1-9]\d*x ", result.output)  # a tiny ratio shows its digits, not 0.00x


def test_bench_refuses_a_json_path_it_could_not_write_before_running(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["bench", "--quick", "--json", str(tmp_path / "missing" / "b.json")])

    assert result.exit_code == 2
    assert "does not exist" in result.output
    assert "raw LMDB" not in result.output  # nothing was measured


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
def test_bench_refuses_a_json_path_where_no_file_can_be_made_though_permissions_allow() -> None:
    # /proc passes os.access (and root passes it on a read-only mount): only trying tells
    result = CliRunner().invoke(main, ["bench", "--quick", "--json", "/proc/cogfabric-bench.json"])

    assert result.exit_code == 2
    assert "cannot be created in /proc" in result.output
    assert "raw LMDB" not in result.output  # nothing was measured


def test_bench_ratios_pair_the_runs_of_each_round() -> None:
    from cogfabric._bench import Result  # noqa: PLC0415

    reference = Result("raw", 100, "events", samples=[1.0, 2.0, 1.0])
    slow_spell_in_round_three = Result("journal", 100, "events", samples=[2.0, 4.0, 20.0], reference="raw")

    # rounds: 1/2, 2/4, 1/20 -> median 0.5 (the ratio of the medians would say 0.25)
    assert slow_spell_in_round_three.ratio_to(reference) == 0.5


def test_verify_names_the_command_that_shows_a_record_failing_its_link(
    simulated: Path, tmp_path: Path, break_link: Callable[[Path, int], None]
) -> None:
    copy = _tampered_copy(simulated, tmp_path, 17, break_link)
    runner = CliRunner()

    verdict = runner.invoke(main, ["verify", str(copy)])
    hint = verdict.stdout.split("see it: cogfabric ", 1)[1].split()
    shown = runner.invoke(main, hint)

    assert verdict.exit_code == 1
    assert (
        "FAILED at seq 17: the record does not match its hash chain link (16 records checked before it)"
        in (verdict.stdout)
    )
    assert hint == ["export", str(copy), "--no-verify", "--after", "16", "--until", "17"]
    assert shown.exit_code == 0, shown.output
    assert [json.loads(line)["seq"] for line in shown.stdout.splitlines()] == [17]


def test_verify_counts_every_record_checked_when_an_index_fails_after_them(
    simulated: Path, tmp_path: Path
) -> None:
    # an index is checked after the records: "N records checked before it" named more
    # records than the seq it named
    copy, last = _without_id_entry(simulated, tmp_path, 30)

    verdict = CliRunner().invoke(main, ["verify", str(copy), "--no-snapshots"])

    assert verdict.exit_code == 1
    assert f"FAILED at seq 30: the event id index does not match the records ({last} records checked)\n" == (
        verdict.stdout
    )


def test_verify_suggests_no_export_for_an_index_found_wrong_at_the_last_seq(
    simulated: Path, tmp_path: Path
) -> None:
    # every record was checked, the last one too: no "checked before it", and no export
    # of a record that itself matches its link
    copy, last = _without_id_entry(simulated, tmp_path, None)

    verdict = CliRunner().invoke(main, ["verify", str(copy), "--no-snapshots"])

    assert verdict.exit_code == 1
    assert verdict.stdout == (
        f"FAILED at seq {last}: the event id index does not match the records ({last} records checked)\n"
    )


def test_export_filters_by_event_type_and_until(simulated: Path) -> None:
    runner = CliRunner()

    typed = runner.invoke(
        main,
        ["export", str(simulated), "--type", "AgentSpawned", "--type", "SessionCreated", "--until", "40"],
    )
    unknown = runner.invoke(main, ["export", str(simulated), "--type", "Spawned"])

    assert typed.exit_code == 0, typed.output
    rows = [json.loads(line) for line in typed.stdout.splitlines()]
    with Journal.open(simulated, readonly=True) as journal:
        expected = [
            r.seq
            for r in journal.read(until=40)
            if type(r.event).__name__ in ("AgentSpawned", "SessionCreated")
        ]
    assert {r["type"] for r in rows} == {"AgentSpawned", "SessionCreated"}
    assert [r["seq"] for r in rows] == expected
    assert unknown.exit_code == 2
    assert "no event type 'Spawned'; the types: AgentFailed, AgentKilled," in unknown.output


def test_reading_a_journal_unverified_says_so_on_stderr(simulated: Path) -> None:
    runner = CliRunner()

    unverified = [
        runner.invoke(main, ["inspect", str(simulated), "--no-verify"]),
        runner.invoke(main, ["export", str(simulated), "--no-verify", "--until", "1"]),
        runner.invoke(main, ["replay", str(simulated), "--no-verify"]),
    ]
    verified = runner.invoke(main, ["export", str(simulated), "--until", "1"])

    warning = (
        "warning: the journal was not verified (--no-verify): a changed record reads as if it were not\n"
    )
    assert [(r.exit_code, r.stderr) for r in unverified] == [(0, warning)] * 3
    assert all(r.stdout for r in unverified)
    assert (verified.exit_code, verified.stderr) == (0, "")


def test_verify_json_gives_the_verdict_with_the_same_exit_status(
    simulated: Path, tmp_path: Path, break_link: Callable[[Path, int], None]
) -> None:
    copy = _tampered_copy(simulated, tmp_path, 17, break_link)
    runner = CliRunner()
    with Journal.open(simulated, readonly=True) as journal:
        last = journal.last_seq

    clean = runner.invoke(main, ["verify", str(simulated), "--json"])
    unsnapped = runner.invoke(main, ["verify", str(simulated), "--json", "--no-snapshots"])
    failed = runner.invoke(main, ["verify", str(copy), "--json"])

    assert clean.exit_code == 0
    assert json.loads(clean.stdout) == {
        "ok": True,
        "checked": last,
        "head_seq": last,
        "first_bad_seq": None,
        "reason": "",
        "snapshots": 0,
    }
    assert (unsnapped.exit_code, json.loads(unsnapped.stdout)["snapshots"]) == (0, None)
    assert failed.exit_code == 1
    assert json.loads(failed.stdout) == {
        "ok": False,
        "checked": 16,
        "head_seq": last,
        "first_bad_seq": 17,
        "reason": "the record does not match its hash chain link",
        "snapshots": None,
    }


def test_replay_before_an_agent_or_session_begins_names_the_seq_where_it_does(simulated: Path) -> None:
    with Journal.open(simulated, readonly=True) as journal:
        spawned = next(r.seq for r in journal.read(stream="agent/researcher-003"))
        session_stream = journal.streams("session/")[0]
        created = next(r.seq for r in journal.read(stream=session_stream))
    runner = CliRunner()

    agent = runner.invoke(main, ["replay", str(simulated), "--agent", "researcher-003", "--at", "1"])
    session = runner.invoke(
        main, ["replay", str(simulated), "--session", session_stream.removeprefix("session/"), "--at", "1"]
    )
    nobody = runner.invoke(main, ["replay", str(simulated), "--agent", "nobody", "--at", "1"])

    assert agent.exit_code == 2
    assert agent.stderr == (
        f"error: agent 'researcher-003' does not exist at seq 1; it is spawned at seq {spawned}: "
        f"--at {spawned} shows it\n"
    )
    assert session.exit_code == 2
    assert (
        f"does not exist at seq 1; it is created at seq {created}: --at {created} shows it\n"
        in session.stderr
    )
    assert (nobody.exit_code, nobody.stderr) == (2, "error: agent 'nobody' does not exist at seq 1\n")


def test_verify_suggests_no_export_that_cannot_show_the_record(simulated: Path, tmp_path: Path) -> None:
    # record 17 copied over 18: 18 fails its link, and export refuses it too (its seq is
    # not its key's), so a suggestion would be a dead end
    copy = _copy(simulated, tmp_path)
    env = lmdb.open(str(copy), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"events")) as txn:
        txn.put((18).to_bytes(8, "big"), txn.get((17).to_bytes(8, "big")) or b"")
    env.close()
    runner = CliRunner()

    verdict = runner.invoke(main, ["verify", str(copy)])
    export = runner.invoke(main, ["export", str(copy), "--no-verify", "--after", "17", "--until", "18"])

    assert verdict.exit_code == 1
    assert verdict.stdout.startswith("FAILED at seq 18: the record does not match its hash chain link")
    assert "see it" not in verdict.stdout
    assert export.exit_code == 1


def test_verify_suggests_an_export_of_a_journal_whose_name_begins_with_a_dash(
    simulated: Path, tmp_path: Path, break_link: Callable[[Path, int], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = _tampered_copy(simulated, tmp_path, 17, break_link)
    dashed = tmp_path / "-dash"
    copy.rename(dashed)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()

    verdict = runner.invoke(main, ["verify", "--", "-dash"])
    hint = verdict.stdout.split("see it: cogfabric ", 1)[1].split()
    shown = runner.invoke(main, hint)

    assert hint[:2] == ["export", "./-dash"]
    assert shown.exit_code == 0, shown.output
    assert [json.loads(line)["seq"] for line in shown.stdout.splitlines()] == [17]
