"""Review of the operator walkthrough's commits (session 48, helper h6).

The command line's ``warning:`` lines must not double a program's own log line, a pid a
killed writer left in ``writer.lock`` must not be given to a holder that wrote none, a
journal whose lock file cannot be written must not be sent to a read that fails just as
well, and ``bench``'s warning goes to stderr, as ``--help`` says every warning does.
"""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import cogfabric._bench
from cogfabric.cli import main
from cogfabric.store import Journal, JournalLockedError, JournalUnavailableError
from cogfabric.store.testing import make_events
from tests.test_bench_walkthrough_s47 import _fake_run


@pytest.fixture
def emptied(tmp_path: Path) -> Path:
    """A journal whose data file was emptied: opened for writing, it is started anew, with a warning."""
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(3))
    os.truncate(path / "data.mdb", 0)
    return path


def test_a_program_logging_to_stderr_itself_gets_each_warning_once(
    emptied: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a program that configured its logging (as logging.basicConfig() does) and runs main
    # itself: its handler prints the warning, and the command's warning: line did again
    handler = logging.StreamHandler()  # sys.stderr as it is now: capsys's
    logging.getLogger("cogfabric").addHandler(handler)
    try:
        with pytest.raises(SystemExit) as done:
            main(["simulate", "--agents", "2", "--turns", "1", "--journal", str(emptied)])
    finally:
        logging.getLogger("cogfabric").removeHandler(handler)

    assert done.value.code == 0
    err = capsys.readouterr().err
    assert err.count("its data file is empty; a new journal is started in it") == 1, err


def test_a_program_logging_elsewhere_still_gets_the_warning_on_stderr(
    emptied: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # a guard, not a pin: a handler that writes to a file leaves stderr the command's line
    handler = logging.FileHandler(tmp_path / "program.log", encoding="utf-8")
    logging.getLogger("cogfabric").addHandler(handler)
    try:
        with pytest.raises(SystemExit):
            main(["simulate", "--agents", "2", "--turns", "1", "--journal", str(emptied)])
    finally:
        logging.getLogger("cogfabric").removeHandler(handler)
        handler.close()

    assert "warning: " in capsys.readouterr().err
    assert "its data file is empty" in (tmp_path / "program.log").read_text(encoding="utf-8")


def test_a_pid_a_killed_writer_left_is_not_given_to_a_holder_that_wrote_none(tmp_path: Path) -> None:
    path = tmp_path / "j"
    Journal.open(path).close()
    # pids are below it: no process has it
    gone = int(Path("/proc/sys/kernel/pid_max").read_text(encoding="ascii"))
    (path / "writer.lock").write_bytes(b"%d\n" % gone)  # a writer killed while it held the journal
    fd = os.open(path / "writer.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # held by other means (a script's flock): no pid written
        with pytest.raises(JournalLockedError) as refused:
            Journal.open(path)
    finally:
        os.close(fd)

    assert str(refused.value) == f"{path} is held by another writer"


def test_a_live_holder_s_pid_is_still_named(tmp_path: Path) -> None:
    # a guard, not a pin: the liveness check keeps a living holder's name
    path = tmp_path / "j"
    Journal.open(path).close()
    fd = os.open(path / "writer.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.pwrite(fd, b"%d\n" % os.getpid(), 0)
        with pytest.raises(JournalLockedError) as refused:
            Journal.open(path)
    finally:
        os.close(fd)

    assert str(refused.value).endswith(f"(process {os.getpid()}, as its writer.lock says)")


def test_an_unwritable_lock_file_is_not_sent_to_a_read_that_fails_as_well(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LMDB writes lock.mdb even to read: "open it readonly, or run an audit command" fails
    # with "Permission denied" (as another user, checked by hand); --copy is what reads it
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(3))
    real_access = os.access

    def access(where: object, mode: int, **kwargs: object) -> bool:
        if str(where).endswith("lock.mdb") and mode == os.W_OK:
            return False  # another user's 0600 file (tests run as root, who may write anything)
        return real_access(where, mode, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)
    with pytest.raises(JournalUnavailableError) as refused:
        Journal.open(path)

    message = str(refused.value)
    assert "its lock.mdb is not writable" in message
    assert "open it readonly" not in message
    assert "cogfabric verify --copy" in message


def test_bench_warns_of_tmpfs_on_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    # --help: "Errors and warnings go to stderr: stdout holds only the output"
    machine = {
        "cores": 2,
        "python": "3.11",
        "git_commit": None,
        "tmp_parent": "/r",
        "tmp_filesystem": "tmpfs",
    }
    monkeypatch.setattr(cogfabric._bench, "run_bench", _fake_run(machine, []))

    result = CliRunner().invoke(main, ["bench", "--quick"])

    assert result.exit_code == 0, result.output
    assert "warning" not in result.stdout
    assert "warning: tmpfs holds the journals" in result.stderr
