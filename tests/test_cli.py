from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import lmdb
import pytest
from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.store import Journal
from cogfabric.store.testing import make_events


def _journal(tmp_path: Path) -> Path:
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        journal.append(make_events(10))
    return path


def test_verify_exits_zero_on_a_clean_journal(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["verify", str(_journal(tmp_path))])

    assert result.exit_code == 0
    assert "ok: 10 records verified" in result.output


def test_verify_exits_one_naming_the_seq_of_a_changed_byte(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    env = lmdb.open(str(path), max_dbs=8)
    events = env.open_db(b"events")
    with env.begin(write=True, db=events) as txn:
        value = bytearray(txn.get((4).to_bytes(8, "big")) or b"")
        value[-1] ^= 0x20
        txn.put((4).to_bytes(8, "big"), bytes(value))
    env.close()

    result = CliRunner().invoke(main, ["verify", str(path)])

    assert result.exit_code == 1
    assert "seq 4" in result.output


def test_verify_exits_two_for_a_path_that_is_not_a_journal(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["verify", str(tmp_path / "nothing")])

    assert result.exit_code == 2
    assert "no journal" in result.output


def test_the_installed_console_script_and_python_dash_m_run(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    script = shutil.which("cogfabric", path=str(Path(sys.executable).parent))
    assert script is not None

    by_script = subprocess.run(
        [script, "verify", str(path)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )
    by_module = subprocess.run(
        [sys.executable, "-m", "cogfabric", "--version"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )

    assert by_script.returncode == 0, by_script.stderr
    assert by_module.returncode == 0
    assert "cogfabric" in by_module.stdout


def test_each_commands_help_keeps_its_example_on_lines_of_its_own() -> None:
    for command in ("simulate", "verify", "replay", "export", "inspect", "bench", "verify-export", "trace"):
        result = CliRunner().invoke(main, [command, "--help"], terminal_width=100)

        assert result.exit_code == 0, command
        assert "\\b" not in result.output, command
        example = result.output.split("Example", 1)[1].splitlines()
        assert example[1].strip().startswith(f"cogfabric {command} "), (command, example[:2])


def test_continuing_a_journal_says_when_agents_asked_for_differ_from_its_own(tmp_path: Path) -> None:
    path = str(tmp_path / "journal")
    runner = CliRunner()
    first = runner.invoke(main, ["simulate", "--agents", "3", "--turns", "2", "--journal", path])

    same = runner.invoke(main, ["simulate", "--turns", "1", "--journal", path])
    other = runner.invoke(main, ["simulate", "--agents", "5", "--turns", "1", "--journal", path])

    assert (first.exit_code, same.exit_code, other.exit_code) == (0, 0, 0), other.output
    assert "note:" not in same.output  # the default count, not asked for
    assert "note: --agents 5 is for a new journal; this one has 3" in other.stderr
    assert "continued 1 turn of 3 agents" in other.output


def test_replay_of_an_agent_that_never_was_says_so_plainly(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["replay", str(_journal(tmp_path)), "--agent", "nobody"])

    assert result.exit_code == 2
    assert "error: agent 'nobody' does not exist in the journal" in result.output


def test_replay_of_a_killed_agent_says_when_it_was_killed(tmp_path: Path) -> None:
    from cogfabric import Runtime  # noqa: PLC0415

    path = tmp_path / "journal"
    with Runtime.open(path) as runtime:
        runtime.spawn("c").set_private("k", 1)
        runtime.kill("c")
        last = runtime._journal.last_seq  # type: ignore[union-attr]

    result = CliRunner().invoke(main, ["replay", str(path), "--agent", "c"])
    before = CliRunner().invoke(main, ["replay", str(path), "--agent", "c", "--at", str(last - 1), "--json"])

    assert result.exit_code == 2
    assert f"error: agent 'c' was killed at seq {last}; --at {last - 1} shows it before" in result.output
    assert before.exit_code == 0, before.output
    assert '"k": 1' in before.output


def test_a_config_that_is_a_directory_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        [
            "simulate",
            "--agents",
            "2",
            "--turns",
            "2",
            "--journal",
            str(tmp_path / "j"),
            "--config",
            str(tmp_path),
        ],
    )

    assert result.exit_code == 2
    assert "is a directory" in result.output
    assert not (tmp_path / "j").exists()


def test_export_into_a_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "out.jsonl"

    result = CliRunner().invoke(main, ["export", str(_journal(tmp_path)), "-o", str(target)])

    assert result.exit_code == 2
    assert f"error: cannot write --output {target}" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def _appending_after_verify(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, int]:
    """A journal of two records to which each verify() appends three more once it returns.

    As when a simulation appends between an audit's check and its read: the n-th
    append's values are ``later-<n>``. Returns the path and its last seq before any.
    """
    from cogfabric import Runtime  # noqa: PLC0415
    from cogfabric.store import LmdbJournal  # noqa: PLC0415

    path = tmp_path / "journal"
    with Runtime.open(path) as runtime:
        runtime.spawn("a0").set_private("k0", "first")
        runtime.flush()
        before = runtime._journal.last_seq  # type: ignore[union-attr]
    verify = LmdbJournal.verify
    appended: list[str] = []

    def verify_then_append(self: LmdbJournal, *args: Any, **kwargs: Any) -> Any:
        report = verify(self, *args, **kwargs)
        appended.append(f"later-{len(appended)}")
        script = (
            "import sys\nfrom cogfabric.store import Journal\n"
            "from cogfabric.store.testing import make_events\n"
            "with Journal.open(sys.argv[1]) as j: j.append(make_events(3, agents=1, "
            "start=10 * int(sys.argv[2][-1]), value=sys.argv[2]))"
        )
        subprocess.run([sys.executable, "-c", script, str(path), appended[-1]], check=True, timeout=60)
        return report

    monkeypatch.setattr(LmdbJournal, "verify", verify_then_append)
    return path, before


def test_audit_commands_read_up_to_the_seq_they_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the later records are neither shown unverified nor mixed into a view that names
    # the verified seq
    path, before = _appending_after_verify(tmp_path, monkeypatch)
    exported = CliRunner().invoke(main, ["export", str(path)])
    replayed = CliRunner().invoke(main, ["replay", str(path), "--agent", "a0", "--json"])
    inspected = CliRunner().invoke(main, ["inspect", str(path), "--json"])

    assert exported.exit_code == 0, exported.output
    assert len(exported.output.splitlines()) == before
    assert "later" not in exported.output
    assert replayed.exit_code == 0, replayed.output
    assert f'"at": {before + 3}' in replayed.output
    assert "later-0" in replayed.output  # verified before the replay began
    assert "later-1" not in replayed.output
    assert inspected.exit_code == 0, inspected.output
    assert f'"records": {before + 6}' in inspected.output


def test_an_export_until_a_seq_past_the_verified_one_stops_at_the_verified_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # with --until past what was verified: a record appended after the check is not
    # exported unverified
    path, before = _appending_after_verify(tmp_path, monkeypatch)

    exported = CliRunner().invoke(main, ["export", str(path), "--until", str(before + 10)])

    assert exported.exit_code == 0, exported.output
    assert [json.loads(line)["seq"] for line in exported.output.splitlines()] == list(range(1, before + 1))


def test_the_progress_bar_is_drawn_on_stderr_and_leaves_stdout_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    import io  # noqa: PLC0415

    from cogfabric.cli import _progress  # noqa: PLC0415

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stdout, stderr = io.StringIO(), Terminal()
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setattr(sys, "stderr", stderr)
    with _progress("simulating", 3) as advance:
        for done in range(3):
            advance(done, 3)

    assert stdout.getvalue() == ""
    assert "simulating" in stderr.getvalue()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("command", [["inspect"], ["export"], ["verify"], ["export", "-o", "/dev/full"]])
def test_output_that_cannot_be_written_is_a_one_line_error_with_exit_two(
    tmp_path: Path, command: list[str]
) -> None:
    path = _journal(tmp_path)
    with Path("/dev/full").open("w", encoding="utf-8") as full:
        result = subprocess.run(
            [sys.executable, "-m", "cogfabric", command[0], str(path), *command[1:]],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            timeout=120,
            check=False,
        )

    assert result.returncode == 2, result.stderr
    assert "error: cannot write the output" in result.stderr
    assert "Traceback" not in result.stderr


def test_export_to_a_file_works_with_stdout_closed_and_to_stdout_says_why_not(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    target = tmp_path / "out.jsonl"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cogfabric", "export", str(path), *args],
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            timeout=120,
            check=False,
            preexec_fn=lambda: os.close(1),
        )

    to_file, to_stdout = run("-o", str(target)), run()

    assert to_file.returncode == 0, to_file.stderr
    assert len(target.read_text(encoding="utf-8").splitlines()) == 10
    assert to_stdout.returncode == 2
    assert "error: stdout is closed: name a file with --output" in to_stdout.stderr


@pytest.mark.parametrize("command", [["verify"], ["inspect"], ["replay", "--agent", "a"]])
def test_an_audit_with_stdout_closed_says_it_cannot_show_its_result(
    tmp_path: Path, command: list[str]
) -> None:
    path = _journal(tmp_path)

    done = subprocess.run(
        [sys.executable, "-m", "cogfabric", command[0], str(path), *command[1:]],
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
        preexec_fn=lambda: os.close(1),
    )

    assert done.returncode == 2, done.stderr
    assert "error: stdout is closed" in done.stderr


def test_an_actors_timeout_is_not_reported_as_output_that_cannot_be_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import cogfabric._bench  # noqa: PLC0415
    from cogfabric.actors import ActorTimeoutError  # noqa: PLC0415

    def times_out(*_: object, **__: object) -> None:
        msg = "agent 'r1' did not answer within 1 s"
        raise ActorTimeoutError(msg)

    monkeypatch.setattr(cogfabric._bench, "run_bench", times_out)
    result = CliRunner().invoke(main, ["bench", "--quick"])

    assert isinstance(result.exception, ActorTimeoutError)
    assert "cannot write the output" not in result.output


def test_an_export_file_is_created_owner_only(tmp_path: Path) -> None:
    target = tmp_path / "private.jsonl"

    result = CliRunner().invoke(main, ["export", str(_journal(tmp_path)), "-o", str(target)])

    assert result.exit_code == 0, result.output
    assert target.stat().st_mode & 0o777 == 0o600
    assert len(target.read_text(encoding="utf-8").splitlines()) == 10


def test_an_empty_journal_path_is_a_usage_error_not_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ``--journal "$J"`` with J unset: Path("") is ".", where the journal's files would land
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["simulate", "--journal", "", "--agents", "2", "--turns", "1"])

    assert result.exit_code == 2
    assert "must not be empty" in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_config_with_yaml_aliases_is_refused_before_they_expand(tmp_path: Path) -> None:
    # nine levels of ten aliases each: 561 bytes that expand to 10**9 values
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    body = "\n".join("    " + line for line in lines)
    config = tmp_path / "bomb.yaml"
    config.write_text(f"llm:\n  extra:\n{body}\n", encoding="utf-8")

    result = CliRunner().invoke(main, ["simulate", "--config", str(config), "--journal", str(tmp_path / "j")])

    assert result.exit_code == 2
    assert "YAML aliases (*a0) are not accepted" in result.output


def test_bench_writes_its_json_before_the_table_that_may_not_print(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import click  # noqa: PLC0415

    import cogfabric._bench  # noqa: PLC0415
    from cogfabric._bench import Result  # noqa: PLC0415

    monkeypatch.setattr(
        cogfabric._bench, "run_bench", lambda *_, **__: ([Result("w", 1, "events", [0.5])], {"cores": 2})
    )
    echo = click.echo

    def reader_gone(message: object = None, **kwargs: Any) -> None:
        if kwargs.get("err"):
            echo(message, **kwargs)
            return
        raise BrokenPipeError  # ``cogfabric bench --json F | head -1``, its reader gone

    monkeypatch.setattr(click, "echo", reader_gone)
    out = tmp_path / "bench.json"
    CliRunner().invoke(main, ["bench", "--quick", "--json", str(out)])

    assert out.exists()
    assert '"w"' in out.read_text(encoding="utf-8")


def _bench_on_a_full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """``cogfabric bench`` measures one workload at once, and no file can be written."""
    import cogfabric._bench  # noqa: PLC0415
    from cogfabric._bench import Result  # noqa: PLC0415

    machine = {"cores": 2, "python": "3.11", "git_commit": "c"}
    monkeypatch.setattr(
        cogfabric._bench, "run_bench", lambda *_, **__: ([Result("w", 1, "events", [0.5])], machine)
    )

    def disk_full(self: Path, *_: object, **__: object) -> int:
        raise OSError(28, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_text", disk_full)


def test_bench_prints_its_table_when_its_json_cannot_be_written_and_then_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _bench_on_a_full_disk(monkeypatch)
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(main, ["bench", "--quick", "--json", str(out)])

    assert result.exit_code == 2
    assert "\nw " in result.output  # the table, with what was measured
    assert f"cannot write the output {out}: No space left on device" in result.output
    assert "wrote" not in result.output


def test_bench_reports_a_json_it_could_not_write_even_when_its_table_meets_a_closed_pipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import click  # noqa: PLC0415

    _bench_on_a_full_disk(monkeypatch)
    echo = click.echo

    def reader_gone(message: object = None, **kwargs: Any) -> None:
        if kwargs.get("err"):
            echo(message, **kwargs)
            return
        raise BrokenPipeError  # ``cogfabric bench --json F | head -0``

    monkeypatch.setattr(click, "echo", reader_gone)
    result = CliRunner().invoke(main, ["bench", "--quick", "--json", str(tmp_path / "bench.json")])

    assert result.exit_code == 2
    assert "No space left on device" in result.output


def test_bench_names_no_commit_of_a_repository_it_is_merely_installed_in(tmp_path: Path) -> None:
    project = tmp_path / "project"
    site = project / ".venv" / "site"
    shutil.copytree(Path(__file__).parents[1] / "src" / "cogfabric", site / "cogfabric", symlinks=False)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(project),
            "-c",
            "user.email=u@x",
            "-c",
            "user.name=u",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "theirs",
        ],
        check=True,
    )
    code = "import cogfabric._bench as b; print(b._commit())"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=True,
    )

    assert done.stdout.strip() == "None"


def test_simulate_on_a_keyed_journal_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "keyed"
    with Journal.open(path, key=b"k") as journal:
        journal.append(make_events(2))

    result = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--agents", "2", "--turns", "1"])

    assert result.exit_code == 2
    assert "was written with a chain key; simulate continues only journals without one" in result.output


def test_simulate_prints_an_audit_command_that_works_when_pasted(tmp_path: Path) -> None:
    path = tmp_path / "my journal"

    result = CliRunner().invoke(main, ["simulate", "--journal", str(path), "--agents", "2", "--turns", "1"])

    assert result.exit_code == 0, result.output
    hint = next(line for line in result.output.splitlines() if line.startswith("audit it: "))
    assert hint == f"audit it: cogfabric inspect '{path}' && cogfabric verify '{path}'"


def test_bench_counts_the_rings_own_events_not_its_agents_spawns(tmp_path: Path) -> None:
    from cogfabric._bench import _ring  # noqa: PLC0415

    _, count = _ring(tmp_path, 4, 10, "batch")  # batch: the spawns commit after spawn_many returns

    # a delivery journals its message, its delivery and one change; one broadcast,
    # journaled once, carries the first hop of all four tokens
    assert count == 4 * 10 * 3 - 4 + 1


@pytest.mark.parametrize("closed", [1, 2])
def test_simulate_with_stdout_or_stderr_closed(tmp_path: Path, closed: int) -> None:
    # stderr closed: the progress bar asked None whether it was a terminal, and the run
    # died before it began (exit 1, no message, no journal). stdout closed: the run went
    # on and its report was lost with exit 0, where the other commands exit 2.
    path = tmp_path / "j"

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cogfabric",
            "simulate",
            "--journal",
            str(path),
            "--agents",
            "2",
            "--turns",
            "2",
        ],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
        preexec_fn=lambda: os.close(closed),
    )

    if closed == 2:
        assert done.returncode == 0
        assert "ran 2 turns of 2 agents" in done.stdout
        with Journal.open(path, readonly=True) as journal:
            assert journal.verify().ok
    else:
        assert done.returncode == 2
        assert "error: stdout is closed: simulate prints its report there" in done.stderr
        assert not path.exists()  # refused before it ran


def test_sigterm_during_an_export_leaves_no_partial_file_and_keeps_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SIGTERM (kill, timeout, systemd) killed the export where it was: a hidden
    # .partial file holding every private value exported so far stayed beside the output.
    import signal  # noqa: PLC0415

    import cogfabric._audit  # noqa: PLC0415

    path = _journal(tmp_path)
    target = tmp_path / "out.jsonl"
    target.write_text("the previous export\n", encoding="utf-8")
    real = cogfabric._audit.export_lines

    def terminated_half_way(*args: Any, **kwargs: Any) -> Any:
        for n, line in enumerate(real(*args, **kwargs)):
            if n == 5:
                os.kill(os.getpid(), signal.SIGTERM)
            yield line

    monkeypatch.setattr(cogfabric._audit, "export_lines", terminated_half_way)
    result = CliRunner().invoke(main, ["export", str(path), "-o", str(target)])

    assert result.exit_code == 143, result.output
    assert "terminated" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["journal", "out.jsonl"]
    assert target.read_text(encoding="utf-8") == "the previous export\n"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # given back after the command
