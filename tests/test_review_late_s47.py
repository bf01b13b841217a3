"""Late review of session 47's commits (helper h12): the unregistered-instance warning, simulate."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import lmdb
import pytest
from click.testing import CliRunner

from cogfabric.actors import ActorTimeoutError, Config, FakeClock, Runtime, RuntimeConfig
from cogfabric.cli import main
from cogfabric.store import JournalError
from tests.actors.test_core_pins import _Unregistered

if TYPE_CHECKING:
    from pathlib import Path

_SAID = "is not registered: it runs"
_SIMULATE = ("simulate", "--agents", "2", "--turns", "1", "--journal")
_SMALL = {"durability": "sync", "map_size": 140 << 10, "max_map_size": 140 << 10}


def test_a_spawn_the_journal_refused_warns_of_no_unregistered_instance_running(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # sync durability: the spawn's commit is refused (no map can hold it), so the agent
    # never runs; "it runs, but a reopen cannot reattach it" would be false
    caplog.set_level(logging.WARNING, logger="cogfabric")
    rt = Runtime.open(tmp_path / "j", clock=FakeClock(), config={"journal": _SMALL})
    try:
        with pytest.raises(JournalError):
            rt.spawn("a", behavior=_Unregistered(), task_context={"big": "z" * 200_000})
        assert rt.agents() == []
        assert _said(caplog) == []
    finally:
        rt.close()  # the spawn reported the failure


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if _SAID in r.getMessage()]


def test_a_spawn_that_timed_out_warns_once_its_agent_is_reached_and_not_if_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # _spawned_late: the journal decides a spawn whose caller timed out; refused, its
    # agent never runs (no warning); stored, it is reached and runs (warned of, once)
    caplog.set_level(logging.WARNING, logger="cogfabric")
    config = Config(runtime=RuntimeConfig(call_timeout=0.3))
    for refused, path in ((True, tmp_path / "refused"), (False, tmp_path / "stored")):
        caplog.clear()
        with Runtime.open(path, config=config, clock=FakeClock()) as runtime:
            journal = runtime._journal
            assert journal is not None
            append, gate = journal.append, threading.Event()

            def held_append(events: list[Any], refused: bool = refused, **kwargs: Any) -> list[int]:
                assert gate.wait(30)  # noqa: B023 - this round's gate, set below
                if refused:
                    msg = "the disk failed (the test)"
                    raise lmdb.Error(msg)
                return append(events, **kwargs)  # noqa: B023

            journal.append = held_append  # type: ignore[method-assign,assignment]
            try:
                with pytest.raises(ActorTimeoutError):
                    runtime.spawn("b", behavior=_Unregistered())
                finishing = list(runtime._late)  # the helper that follows the spawn's outcome
            finally:
                gate.set()
            assert finishing
            assert all(finished.wait(10) for finished in finishing)
            assert runtime.agents() == ([] if refused else ["b"])
            assert len(_said(caplog)) == (0 if refused else 1)


def test_simulate_takes_an_empty_data_file_for_a_new_journal_as_runtime_open_does(tmp_path: Path) -> None:
    # LMDB leaves a data file of zero bytes when a crash interrupts a journal's creation
    # (README: opened for writing, it becomes a new journal); simulate refused it as "not
    # a journal", so a run whose first open crashed could not be run again
    journal = tmp_path / "j"
    journal.mkdir()
    (journal / "data.mdb").touch()
    result = CliRunner().invoke(main, [*_SIMULATE, str(journal)])
    assert result.exit_code == 0, result.output
    assert "ran 1 turn of 2 agents" in result.output
    # a directory of other files beside an empty data file is still refused, untouched
    other = tmp_path / "other"
    other.mkdir()
    (other / "data.mdb").touch()
    (other / "main.py").write_text("print(1)\n", encoding="utf-8")
    result = CliRunner().invoke(main, [*_SIMULATE, str(other)])
    assert result.exit_code == 2, result.output
    assert "holds other files (main.py) and no journal" in result.output
    assert sorted(p.name for p in other.iterdir()) == ["data.mdb", "main.py"]


def test_export_names_a_file_called_dash_as_given_not_as_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # -o ./- names a file called - (--help); its refusal said "--output -", which is stdout
    journal = tmp_path / "j"
    assert CliRunner().invoke(main, [*_SIMULATE, str(journal)]).exit_code == 0
    monkeypatch.chdir(journal)
    result = CliRunner().invoke(main, ["export", ".", "-o", "./-"])
    assert result.exit_code == 2, result.output
    assert "--output ./- is in the journal's directory" in result.output
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-").mkdir()
    result = CliRunner().invoke(main, ["export", "j", "-o", "./-"])
    assert result.exit_code == 2, result.output
    assert "./- is a directory; name a file for --output" in result.output


def test_simulate_takes_a_fresh_mount_point_holding_only_lost_and_found_for_a_new_journal(
    tmp_path: Path,
) -> None:
    # a file system made for the journal and mounted at --journal holds lost+found and
    # nothing of the user's; a dotfile is the user's and is still refused
    mount = tmp_path / "mnt"
    (mount / "lost+found").mkdir(parents=True)
    result = CliRunner().invoke(main, ["simulate", "--journal", str(mount), "--agents", "2", "--turns", "1"])
    assert result.exit_code == 0, result.output
    assert (mount / "data.mdb").exists()

    other = tmp_path / "other"
    other.mkdir()
    (other / ".gitkeep").touch()
    refused = CliRunner().invoke(main, ["simulate", "--journal", str(other), "--agents", "2", "--turns", "1"])
    assert refused.exit_code == 2
    assert "holds other files (.gitkeep)" in refused.output
