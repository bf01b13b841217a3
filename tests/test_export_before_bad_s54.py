"""``export --until N-1`` reads a journal whose chain breaks at N (helper h10, session 54).

The chain check reads from seq 1 and stops at the first bad record: every record before
it was checked. ``export`` refused the whole journal all the same, and the only way to
the good part was ``--no-verify``, whose warning makes a checked range look unchecked.
A read in seq order before the bad record is read now, with a note; anything else
(``--until`` at or past it, ``--stream``, which walks the stream's links down from its
head, other commands) is still refused.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.store import Journal
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


@pytest.fixture
def broken(tmp_path: Path, break_link: Callable[[Path, int], None]) -> Path:
    """A journal of 30 records whose record 20 fails its chain link."""
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(30))
    break_link(path, 20)
    return path


def _export(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["export", *args])
    return result.exit_code, result.stdout, result.stderr


def test_export_until_before_the_bad_record_reads_the_verified_range(broken: Path, tmp_path: Path) -> None:
    code, out, err = _export(str(broken), "--until", "19", "--verifiable")

    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["seq"] for line in lines] == list(range(1, 20))
    assert "note: the journal fails verification at seq 20" in err
    assert "seqs 1 to 19, before it, verified, are read" in err
    assert "not verified" not in err  # no --no-verify warning: the range was checked

    (tmp_path / "good.jsonl").write_text(out, encoding="utf-8")
    checked = CliRunner().invoke(main, ["verify-export", str(tmp_path / "good.jsonl")])
    assert checked.exit_code == 0, checked.output


@pytest.mark.parametrize(
    "extra",
    [["--until", "20"], ["--until", "25"], [], ["--until", "19", "--stream", "agent/a0"]],
    ids=["at the bad record", "past it", "no --until", "a stream"],
)
def test_export_reaching_the_bad_record_or_by_stream_is_still_refused(broken: Path, extra: list[str]) -> None:
    code, out, err = _export(str(broken), *extra)

    assert (code, out) == (1, "")
    assert "fails verification at seq 20" in err
    assert "refusing to read it" in err


def test_a_journal_failing_other_than_at_a_record_is_refused_whatever_the_range(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:
        journal.append(make_events(30))
    import lmdb  # noqa: PLC0415 - an attacker's tool

    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"heads")) as txn:
        txn.delete(b"agent/a0")  # a stream index entry gone: no record to blame first
    env.close()

    code, out, err = _export(str(path), "--until", "5")

    assert (code, out) == (1, "")
    assert "refusing to read it" in err
