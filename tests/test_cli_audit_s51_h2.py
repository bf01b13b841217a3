"""Helper h2's audit round (session 51): a refusal with no seq, and an export range ending at seq 0."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import lmdb
from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.events import PrivateSet
from cogfabric.store import Journal

if TYPE_CHECKING:
    from pathlib import Path


def _journal(tmp_path: Path) -> Path:
    path = tmp_path / "journal"
    with Journal.open(path) as journal:
        journal.append([PrivateSet(at=1.0, agent="a1", key="k", value=n) for n in range(3)])
    return path


def test_a_refusal_with_no_bad_seq_says_so_plainly(tmp_path: Path) -> None:
    # The chain head removed: verify names no seq ("FAILED: the chain head is missing"),
    # and the reading commands said "fails verification at the journal: ...".
    path = _journal(tmp_path)
    env = lmdb.open(str(path), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"meta", create=False)) as txn:
        assert txn.delete(b"head")
    env.close()
    runner = CliRunner()

    verdict = runner.invoke(main, ["verify", "--json", str(path)])
    refused = [
        runner.invoke(main, ["inspect", str(path)]),
        runner.invoke(main, ["export", str(path)]),
        runner.invoke(main, ["trace", str(path), "--seq", "1"]),
    ]

    assert verdict.exit_code == 1
    assert json.loads(verdict.stdout)["first_bad_seq"] is None
    assert [r.exit_code for r in refused] == [1, 1, 1]
    assert [r.stdout for r in refused] == ["", "", ""]
    expected = (
        "error: the journal fails verification: the chain head is missing; refusing to read it"
        " (--no-verify reads it anyway)\n"
    )
    assert [r.stderr for r in refused] == [expected] * 3


def test_export_until_zero_is_a_range_that_holds_no_record(tmp_path: Path) -> None:
    # README: "a range that can hold no record, --after not below --until ..., is a usage
    # error"; --until 0 with no --after wrote an empty export, exit 0, which verify-export
    # then passed as "ok: an empty export".
    path = _journal(tmp_path)
    out = tmp_path / "all.jsonl"
    runner = CliRunner()

    plain = runner.invoke(main, ["export", str(path), "--until", "0"])
    verifiable = runner.invoke(main, ["export", str(path), "--verifiable", "--until", "0", "-o", str(out)])
    one = runner.invoke(main, ["export", str(path), "--until", "1"])

    assert (plain.exit_code, plain.stdout) == (2, "")
    assert plain.stderr == "error: --until 0 is before the first seq, 1: the range holds no record\n"
    assert verifiable.exit_code == 2
    assert not out.exists()
    assert one.exit_code == 0
    assert [json.loads(line)["seq"] for line in one.stdout.splitlines()] == [1]
