"""``Journal.backup`` and ``cogfabric backup``: a consistent copy of a journal while it is written."""

from __future__ import annotations

import errno
import json
import os
import select
import stat
import subprocess
import sys
import threading
from typing import TYPE_CHECKING

import lmdb
import pytest
from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.store import JournalUnavailableError, LmdbJournal
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path

_WRITER = """
import sys
from cogfabric.store import LmdbJournal
from cogfabric.store.testing import make_events
journal = LmdbJournal.open(sys.argv[1], map_size=1 << 26)
seq = 0
while True:
    journal.append(make_events(5, agents=7, start=seq, value="x" * (50 + seq * 37 % 900)))
    seq += 5
    if seq == 200:
        print("ready", flush=True)
"""


def _journal(path: Path, count: int = 50, key: str | None = None) -> Path:
    with LmdbJournal.open(path, map_size=1 << 24, key=key) as journal:
        journal.append(make_events(count))
    return path


def _names(directory: Path) -> list[str]:
    return sorted(entry.name for entry in directory.iterdir())


def _same_prefix(backup: Path, source: Path, seq: int) -> None:
    """The backup verifies, holds exactly seq records, equal to the source's, and takes appends."""
    with LmdbJournal.open(backup) as copied, LmdbJournal.open(source, readonly=True) as original:
        assert copied.verify(decode=True).ok
        assert copied.last_seq == seq
        assert [r.chain for r in copied.read()] == [r.chain for r in original.read(until=seq)]
        copied.append(make_events(1, start=seq))


def test_backup_while_a_thread_appends_holds_every_record_up_to_its_seq(tmp_path: Path) -> None:
    source = tmp_path / "j"
    stop = threading.Event()
    with LmdbJournal.open(source, map_size=1 << 26, sync=False) as journal:
        journal.append(make_events(100))

        def append() -> None:
            seq = 100
            while not stop.is_set():
                journal.append(make_events(5, start=seq, value="y" * (seq % 700)))
                seq += 5

        writer = threading.Thread(target=append)
        writer.start()
        try:
            seqs = [journal.backup(tmp_path / f"b{i}") for i in range(3)]
        finally:
            stop.set()
            writer.join(timeout=10)
        assert not writer.is_alive()
    for i, seq in enumerate(seqs):
        assert seq >= 100
        _same_prefix(tmp_path / f"b{i}", source, seq)


def test_backup_while_another_process_appends(tmp_path: Path) -> None:
    source = tmp_path / "j"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(source)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
        encoding="utf-8",
    ) as writer:
        try:
            assert writer.stdout is not None
            ready, _, _ = select.select([writer.stdout], [], [], 30)
            assert ready, "the writer did not start in 30 s"
            assert writer.stdout.readline().strip() == "ready"
            with LmdbJournal.open(source, readonly=True) as journal:
                seqs = [journal.backup(tmp_path / f"b{i}", compact=i % 2 == 0) for i in range(4)]
            assert writer.poll() is None  # it wrote on, all along
        finally:
            writer.kill()
            writer.wait(timeout=10)
    for i, seq in enumerate(seqs):
        assert seq >= 200
        _same_prefix(tmp_path / f"b{i}", source, seq)


def test_backup_modes_and_no_sibling_left(tmp_path: Path) -> None:
    source = _journal(tmp_path / "j")
    with LmdbJournal.open(source, readonly=True) as journal:
        assert journal.backup(tmp_path / "b") == 50
    assert stat.S_IMODE((tmp_path / "b").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "b" / "data.mdb").stat().st_mode) == 0o600
    assert _names(tmp_path / "b") == ["data.mdb"]  # no lock file until it is opened
    assert _names(tmp_path) == ["b", "j"]


def test_backup_into_an_empty_directory(tmp_path: Path) -> None:
    source = _journal(tmp_path / "j")
    (tmp_path / "b").mkdir()
    with LmdbJournal.open(source, readonly=True) as journal:
        assert journal.backup(tmp_path / "b", compact=False) == 50
    _same_prefix(tmp_path / "b", source, 50)


@pytest.mark.parametrize("kind", ["directory", "file", "link"])
def test_an_existing_dest_is_refused(tmp_path: Path, kind: str) -> None:
    source = _journal(tmp_path / "j")
    dest = tmp_path / "b"
    if kind == "directory":
        dest.mkdir()
        (dest / "keep").write_text("mine", encoding="utf-8")
    elif kind == "file":
        dest.write_text("mine", encoding="utf-8")
    else:
        (tmp_path / "empty").mkdir()
        dest.symlink_to(tmp_path / "empty")
    result = CliRunner().invoke(main, ["backup", str(source), str(dest)])
    assert result.exit_code == 2, result.output
    assert "exists" in result.stderr
    with LmdbJournal.open(source, readonly=True) as journal, pytest.raises(FileExistsError):
        journal.backup(dest)
    assert _names(tmp_path) == sorted(["j", "b"] + (["empty"] if kind == "link" else []))
    if kind == "directory":
        assert _names(dest) == ["keep"]


def test_a_missing_parent_fails_and_leaves_nothing(tmp_path: Path) -> None:
    source = _journal(tmp_path / "j")
    result = CliRunner().invoke(main, ["backup", str(source), str(tmp_path / "no" / "b")])
    assert result.exit_code == 2
    assert "No such file or directory" in result.stderr
    assert _names(tmp_path) == ["j"]


@pytest.mark.parametrize("failure", ["lmdb", "oserror"])
def test_a_failed_copy_removes_its_sibling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    source = _journal(tmp_path / "j")

    def fail(self: LmdbJournal, fd: int, *, compact: bool) -> int:  # noqa: ARG001
        os.write(fd, b"half a copy")
        if failure == "lmdb":
            msg = "mdb_env_copyfd3: No space left on device"
            raise lmdb.DiskError(msg)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(LmdbJournal, "_copy_to", fail)
    with (
        LmdbJournal.open(source, readonly=True) as journal,
        pytest.raises(JournalUnavailableError, match="No space"),
    ):
        journal.backup(tmp_path / "b")
    result = CliRunner().invoke(main, ["backup", str(source), str(tmp_path / "b")])
    assert result.exit_code == 2
    assert "cannot back up" in result.stderr
    assert _names(tmp_path) == ["j"]


def test_cli_backup_text_and_json(tmp_path: Path) -> None:
    source = _journal(tmp_path / "j")
    runner = CliRunner()
    result = runner.invoke(main, ["backup", str(source), str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"ok: backed up 50 records to {tmp_path / 'b'}, ")
    assert result.stdout.endswith("; 50 records verified, head at seq 50\n")
    result = runner.invoke(main, ["backup", str(source), str(tmp_path / "c"), "--json", "--no-compact"])
    assert result.exit_code == 0, result.output
    verdict = json.loads(result.stdout)
    assert list(verdict) == ["ok", "head_seq", "bytes", "verified", "checked", "first_bad_seq", "reason"]
    assert verdict["ok"] is True
    assert (verdict["head_seq"], verdict["checked"]) == (50, 50)
    assert verdict["bytes"] == (tmp_path / "c" / "data.mdb").stat().st_size
    result = runner.invoke(main, ["backup", str(source), str(tmp_path / "d"), "--json", "--no-verify"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["verified"] is False
    assert json.loads(result.stdout)["checked"] is None
    assert "backup" in runner.invoke(main, ["--help"]).stdout


def test_a_keyed_journal_needs_its_key(tmp_path: Path) -> None:
    source = _journal(tmp_path / "j", key="secret")
    runner = CliRunner()
    result = runner.invoke(main, ["backup", str(source), str(tmp_path / "b")])
    assert result.exit_code == 2
    assert "--key" in result.stderr
    assert _names(tmp_path) == ["j"]
    (tmp_path / "key").write_bytes(b"secret")
    result = runner.invoke(
        main, ["backup", str(source), str(tmp_path / "b"), "--key-file", str(tmp_path / "key")]
    )
    assert result.exit_code == 0, result.output
    with LmdbJournal.open(tmp_path / "b", readonly=True, key="secret") as copied:
        assert copied.verify().ok
        assert copied.info()["keyed"] is True


def test_a_journal_that_fails_verification_is_backed_up_and_exits_1(
    tmp_path: Path, break_link: object
) -> None:
    source = _journal(tmp_path / "j")
    break_link(source, 7)  # type: ignore[operator]
    result = CliRunner().invoke(main, ["backup", str(source), str(tmp_path / "b")])
    assert result.exit_code == 1
    assert result.stdout.startswith("FAILED at seq 7:")
    assert "holds the journal as it is" in result.stdout
    assert (tmp_path / "b" / "data.mdb").exists()
