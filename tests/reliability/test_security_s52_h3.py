"""Security review s52 (h3): a hostile journal's names reach no terminal raw; an export
writes through no link another user planted."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from typing import TYPE_CHECKING

import lmdb
import pytest
from click.testing import CliRunner

from cogfabric.cli import _shown, main
from cogfabric.store import Journal
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path

# what a terminal acts on: erase the line, write a clean verdict over it, hide the rest
FORGED_NAME = "j\r\x1b[2Kok: 5 records verified, head at seq 5\x1b[8m\u202e\x9b"


def _raw_controls(text: str) -> list[str]:
    return sorted({c for c in text if not c.isprintable() and c != "\n"})


def _failing_journal(path: Path) -> Path:
    """A journal of 5 records whose seq 3 fails its hash-chain link yet decodes."""
    with Journal.open(path) as journal:
        journal.append(make_events(5, value="x" * 40))
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True) as txn:
        events = env.open_db(b"events", txn=txn)
        key = (3).to_bytes(8, "big")
        value = bytearray(txn.get(key, db=events) or b"")
        value[value.index(b"x" * 40)] ^= 1
        txn.put(key, bytes(value), db=events)
    env.close()
    return path


def test_a_failed_verdict_names_a_hostile_journal_path_without_a_raw_control(tmp_path: Path) -> None:
    # the verdict's "see it" command holds the path: a CR and an erase there printed a
    # clean "ok: ..." over the FAILED line on the auditor's terminal
    path = _failing_journal(tmp_path / FORGED_NAME)

    result = CliRunner().invoke(main, ["verify", str(path)], color=True)  # color: click strips no ESC

    assert result.exit_code == 1
    assert result.stdout.startswith("FAILED at seq 3: ")
    assert _raw_controls(result.stdout) == []
    assert f"see it: cogfabric export {_shown(path)} --no-verify --after 2 --until 3" in result.stdout


def test_an_error_on_stderr_escapes_a_hostile_path(tmp_path: Path) -> None:
    where = tmp_path / FORGED_NAME
    where.mkdir()

    result = CliRunner().invoke(main, ["inspect", str(where)], color=True)

    assert result.exit_code == 2
    assert result.stderr.startswith("error: ")
    assert _raw_controls(result.stderr) == []
    assert "\\r\\x1b[2Kok: 5 records verified" in result.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="the $'...' word is bash's")
@pytest.mark.parametrize(
    "name",
    [FORGED_NAME, "it's a \\ dir", "-dash\n", os.fsdecode(b"not\xffutf8\x1b"), "tag\U000e0041"],
    ids=["forged", "quote and backslash", "dash and newline", "not UTF-8", "astral"],
)
def test_the_shown_path_is_printable_and_names_the_path_in_bash(name: str) -> None:
    from pathlib import Path  # noqa: PLC0415 - a type only at the top

    word = _shown(Path(name))
    printed = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, check=True).stdout

    assert word.isprintable()
    assert printed == os.fsencode(name if not name.startswith("-") else f"./{name}")


def test_a_plain_path_is_shown_as_before() -> None:
    from pathlib import Path  # noqa: PLC0415

    assert _shown(Path("my journal")) == "'my journal'"
    assert _shown(Path("-j")) == "./-j"


def _journal_of_3(tmp_path: Path) -> Path:
    with Journal.open(tmp_path / "j") as opened:
        opened.append(make_events(3))
    return tmp_path / "j"


@pytest.mark.skipif(os.geteuid() != 0, reason="a link of another user's is made with lchown, as root")
@pytest.mark.parametrize("exists", [False, True], ids=["to no file", "to a file that exists"])
def test_export_writes_through_no_link_another_user_planted(tmp_path: Path, exists: bool) -> None:
    # a shared directory others can write (no sticky bit, so fs.protected_symlinks does
    # not apply): a link planted where the export goes made it create, or truncate, any
    # file of the auditor's that the link's maker chose
    journal = _journal_of_3(tmp_path)
    shared, victim = tmp_path / "shared", tmp_path / "victim"
    shared.mkdir()
    victim.mkdir()
    if exists:
        (victim / "planted").write_text("the auditor's own\n", encoding="utf-8")
    (shared / "out.jsonl").symlink_to(victim / "planted")
    os.lchown(shared / "out.jsonl", 4242, 4242)

    result = CliRunner().invoke(main, ["export", str(journal), "-o", str(shared / "out.jsonl")])

    assert result.exit_code == 2
    assert "a symbolic link another user (uid 4242) made" in result.stderr
    assert [p.read_text(encoding="utf-8") for p in victim.iterdir()] == (
        ["the auditor's own\n"] if exists else []
    )


def test_export_still_writes_through_a_link_of_ones_own_and_creates_a_new_file_owner_only(
    tmp_path: Path,
) -> None:
    # as the README says: a link to a file that exists is written in place and keeps its mode
    journal = _journal_of_3(tmp_path)
    target = tmp_path / "target"
    target.write_text("old\n", encoding="utf-8")
    target.chmod(0o640)
    (tmp_path / "link").symlink_to(target)

    linked = CliRunner().invoke(main, ["export", str(journal), "-o", str(tmp_path / "link")])
    fresh = CliRunner().invoke(main, ["export", str(journal), "-o", str(tmp_path / "new.jsonl")])

    assert (linked.exit_code, fresh.exit_code) == (0, 0)
    assert len(target.read_text(encoding="utf-8").splitlines()) == 3
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "new.jsonl").stat().st_mode) == 0o600
