"""The command line's promises that a hand-made mutation test of cli.py and _simulation.py found no test held.

Each test pins one thing README.md, a command's --help or a docstring says: simulate's
option ranges and default seed, its summary on a continued run, its dead-letter hint,
verify --no-snapshots' verdict, and how Ctrl-C and SIGTERM end a command.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

import cogfabric._audit
from cogfabric import Runtime
from cogfabric._simulation import Researcher, Reviewer, _Tally
from cogfabric.cli import _Commands, main
from cogfabric.events import IpcMessage, LlmOutputRecorded
from cogfabric.store import Journal
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from click.testing import Result


def _journal(tmp_path: Path) -> Path:
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        journal.append(make_events(10))
    return path


def _simulate(path: Path, *options: str) -> Result:
    return CliRunner().invoke(main, ["simulate", "--journal", str(path), *options])


def _last_seq(path: Path) -> int:
    with Journal.open(path, readonly=True) as journal:
        return journal.last_seq


@pytest.mark.parametrize("option", [["--agents", "1"], ["--turns", "0"]])
def test_simulate_refuses_fewer_than_two_agents_or_no_turns(tmp_path: Path, option: list[str]) -> None:
    # simulate --help: --agents INTEGER RANGE [2<=x<=100000], --turns INTEGER RANGE [x>=1]
    path = tmp_path / "j"

    result = _simulate(path, "--agents", "2", "--turns", "1", *option)

    assert result.exit_code == 2, result.output
    assert "Invalid value for" in result.output
    assert not path.exists()


def test_the_default_seed_is_zero(tmp_path: Path) -> None:
    # README and simulate --help: "[--seed 0]", "Seed of the scripted model. [default: 0]"
    def answers(path: Path) -> list[str]:
        with Journal.open(path, readonly=True) as journal:
            return [
                r.event.output
                for r in journal.read()
                if isinstance(r.event, LlmOutputRecorded) and str(r.event.agent).startswith("researcher-")
            ]

    unseeded = _simulate(tmp_path / "a", "--agents", "2", "--turns", "2")
    zero = _simulate(tmp_path / "b", "--agents", "2", "--turns", "2", "--seed", "0")
    one = _simulate(tmp_path / "c", "--agents", "2", "--turns", "2", "--seed", "1")

    assert (unseeded.exit_code, zero.exit_code, one.exit_code) == (0, 0, 0), unseeded.output
    assert answers(tmp_path / "a") == answers(tmp_path / "b")
    assert answers(tmp_path / "a") != answers(tmp_path / "c")


def test_a_continued_runs_summary_gives_its_own_events_and_the_journals_total(tmp_path: Path) -> None:
    # README: "ran 200 turns of 50 agents: 5,468 events in ..." (this run's), "journal J: N events" (all)
    path = tmp_path / "j"
    assert _simulate(path, "--agents", "3", "--turns", "3").exit_code == 0
    before = _last_seq(path)

    result = _simulate(path, "--turns", "3")

    after = _last_seq(path)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"continued 3 turns of 3 agents: {after - before:,} events in ")
    assert f"  journal {path}: {after:,} events, " in result.output


def test_the_summary_counts_the_reviews_and_findings_the_journal_holds(tmp_path: Path) -> None:
    # README: the summary's "reviews N, findings broadcast M": review requests and broadcast findings
    path = tmp_path / "j"

    result = _simulate(path, "--agents", "6", "--turns", "20", "--seed", "1")

    kinds: dict[tuple[str, str], int] = {}
    with Journal.open(path, readonly=True) as journal:
        for record in journal.read():
            if isinstance(record.event, IpcMessage):
                key = (record.event.kind, record.event.topic)
                kinds[key] = kinds.get(key, 0) + 1
    reviews, broadcasts = kinds.get(("request", "review"), 0), kinds.get(("broadcast", "findings"), 0)
    assert result.exit_code == 0, result.output
    assert reviews != broadcasts  # the run tells the two apart
    assert f"reviews {reviews}, findings broadcast {broadcasts}," in result.output


def test_the_dead_letter_warning_exports_from_where_this_run_began(tmp_path: Path) -> None:
    # README: undelivered messages warn "(IpcDeadLettered in the journal: cogfabric export J
    # --type IpcDeadLettered --after N)": this run's dead letters, after the seq it began at
    path = tmp_path / "j"
    assert _simulate(path, "--agents", "3", "--turns", "2").exit_code == 0
    before = _last_seq(path)
    config = tmp_path / "c.yaml"
    # every turn refused: its tick a handler error
    config.write_text("llm:\n  max_prompt_length: 5\n", encoding="utf-8")

    result = _simulate(path, "--turns", "2", "--config", str(config))

    assert result.exit_code == 1, result.output
    assert "messages were not delivered (" in result.output
    assert f"cogfabric export {path} --type IpcDeadLettered --after {before})" in result.output
    # README: its report goes to stdout; the warning and the error go to stderr, so a
    # report piped on holds neither, and a terminal still shows both
    report = [line.split()[0] for line in result.stdout.splitlines()]
    assert report == ["continued", "sessions", "journal", "audit"]
    warning, error = result.stderr.splitlines()
    assert warning.startswith("warning: ")
    assert error.startswith("error: agents raised ")


def test_verify_no_snapshots_claims_no_snapshot_agrees(tmp_path: Path) -> None:
    # verify --help: snapshots are compared "unless --no-snapshots"; the verdict then names none
    path = _journal(tmp_path)

    result = CliRunner().invoke(main, ["verify", str(path), "--no-snapshots"])

    assert result.exit_code == 0, result.output
    assert result.output == "ok: 10 records verified, head at seq 10\n"


def test_ctrl_c_before_a_command_begins_exits_130(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # README: 130 a command stopped by Ctrl-C (click's own exit 1 would read as a bad journal)
    def interrupted(*_args: Any, **_kwargs: Any) -> list[str]:
        raise KeyboardInterrupt

    monkeypatch.setattr(_Commands, "parse_args", interrupted)

    result = CliRunner().invoke(main, ["verify", str(_journal(tmp_path))])

    assert result.exit_code == 130, result.output
    assert "interrupted" in result.output


@pytest.fixture
def own_sigterm_handler() -> Iterator[list[int]]:
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: seen.append(signum))
    try:
        yield seen
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_program_with_its_own_sigterm_handler_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_sigterm_handler: list[int]
) -> None:
    # cli._sigterm_unwinds says "a program that runs main with a SIGTERM handler of its own keeps it"
    path = _journal(tmp_path)
    real = cogfabric._audit.export_lines

    def signalled_half_way(*args: Any, **kwargs: Any) -> Iterator[bytes]:
        for n, line in enumerate(real(*args, **kwargs)):
            if n == 5:
                os.kill(os.getpid(), signal.SIGTERM)
            yield line

    monkeypatch.setattr(cogfabric._audit, "export_lines", signalled_half_way)
    target = tmp_path / "out.jsonl"

    result = CliRunner().invoke(main, ["export", str(path), "-o", str(target)])

    assert result.exit_code == 0, result.output
    assert own_sigterm_handler == [signal.SIGTERM]
    assert len(target.read_bytes().splitlines()) == 10


def test_a_second_sigterm_kills_at_once(tmp_path: Path) -> None:
    # cli._Commands.invoke: SIGTERM stops a command as Ctrl-C does; "a second SIGTERM kills at once"
    path = _journal(tmp_path)
    script = textwrap.dedent(
        """
        import os, signal, sys
        import cogfabric._audit
        from cogfabric.cli import main

        real = cogfabric._audit.export_lines

        def export_lines(*args, **kwargs):
            try:
                for n, line in enumerate(real(*args, **kwargs)):
                    if n == 5:
                        os.kill(os.getpid(), signal.SIGTERM)
                    yield line
            finally:  # a cleanup the first SIGTERM runs: a second one here is not waited for
                os.kill(os.getpid(), signal.SIGTERM)
                print("outlived the second SIGTERM", file=sys.stderr, flush=True)

        cogfabric._audit.export_lines = export_lines
        main(["export", sys.argv[1], "-o", sys.argv[2]])
        """
    )

    done = subprocess.run(
        [sys.executable, "-c", script, str(path), str(tmp_path / "out.jsonl")],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )

    assert done.returncode == -signal.SIGTERM, (done.returncode, done.stderr)
    assert "outlived" not in done.stderr


def test_inspect_says_a_journal_is_keyed(tmp_path: Path) -> None:
    # inspect --help: "Summarise JOURNAL: format, ..."; the format line names a chain key it was written with
    path = tmp_path / "keyed"
    with Journal.open(path, key=b"k") as journal:
        journal.append(make_events(3))

    keyed = CliRunner().invoke(main, ["inspect", str(path), "--key", "k"])
    plain = CliRunner().invoke(main, ["inspect", str(_journal(tmp_path))])

    assert (keyed.exit_code, plain.exit_code) == (0, 0), keyed.output
    assert re.search(r"^format    \S+ \([^)]*, keyed\)$", keyed.output, re.MULTILINE), keyed.output
    assert "keyed" not in plain.output


def test_simulate_refuses_agents_whose_ids_only_begin_as_its_own(tmp_path: Path) -> None:
    # README: "a journal the simulation did not write is refused, untouched" (its ids are
    # researcher-N and reviewer-N, whole)
    path = tmp_path / "j"
    behaviors: dict[str, Any] = {"researcher": lambda: Researcher(_Tally(), 0, []), "reviewer": Reviewer}
    with Runtime.open(path, behaviors=behaviors) as rt:
        rt.spawn("reviewer-000", task_id="research", behavior="reviewer")
        rt.spawn("researcher-000-x", task_id="research", behavior="researcher")
    before = _last_seq(path)

    result = _simulate(path, "--turns", "1")

    assert result.exit_code == 2, result.output
    assert "agents it did not spawn (researcher-000-x)" in result.output
    assert _last_seq(path) == before


def test_simulate_takes_up_an_empty_journal_as_a_new_one(tmp_path: Path) -> None:
    # the docstring of _refuse_a_foreign_journal says "A journal is the simulation's when it is new or empty"
    path = tmp_path / "j"
    Journal.open(path).close()

    result = _simulate(path, "--agents", "3", "--turns", "2")

    assert result.exit_code == 0, result.output
    assert result.output.startswith("ran 2 turns of 3 agents")


def test_durability_overrides_the_configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # simulate --help: --durability [sync|batch] "Overrides the config."
    seen: list[str] = []
    real = Runtime.open

    def spy(*args: Any, **kwargs: Any) -> Runtime:
        seen.append(kwargs["config"].journal.durability)
        return real(*args, **kwargs)

    monkeypatch.setattr(Runtime, "open", spy)
    config = tmp_path / "c.yaml"
    config.write_text("journal:\n  durability: batch\n", encoding="utf-8")
    options = ["--agents", "2", "--turns", "1", "--config", str(config)]

    kept = _simulate(tmp_path / "a", *options)
    overridden = _simulate(tmp_path / "b", *options, "--durability", "sync")

    assert (kept.exit_code, overridden.exit_code) == (0, 0), overridden.output
    assert seen == ["batch", "sync"]
