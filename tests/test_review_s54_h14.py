"""Review of ``cogfabric salvage`` and of close()'s join of stopped threads (helper h14, session 54).

- salvage's batch is cut by bytes too: a thousand records of megabytes are not held at once;
- a journal damaged outside its records' pages: ``--until`` past its last record is refused
  (it named seq 1 as a record that could not be read), and the one it ends at is not
  "left out seq N+1 on";
- a write of the copy that fails names the salvage, not the removed hidden sibling, nor
  a fail-stop of a journal that is gone;
- close() waits for the threads of agents killed before it too.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import threading
from typing import TYPE_CHECKING

import lmdb
import pykka
import pytest
from click.testing import CliRunner

import cogfabric as cf
from cogfabric import _audit
from cogfabric.cli import main
from cogfabric.events import TaskContextPublished
from cogfabric.store import Journal, JournalDamagedError
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path

    from cogfabric.store import LmdbJournal, Record


def _salvage(*args: object) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["salvage", *map(str, args)])
    return result.exit_code, result.stdout, result.stderr


def test_a_batch_of_big_records_is_cut_by_their_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "j"
    with Journal.open(path, max_map_size=1 << 26) as journal:
        for n in range(10):
            journal.append(
                [TaskContextPublished(at=float(n), task_id="t", context={"blob": "x" * 50_000}, agents=())]
            )
    monkeypatch.setattr(_audit, "_SALVAGE_BYTES", 120_000)  # two records and a bit
    sizes: list[int] = []
    copy_batch = _audit._copy_batch

    def spy(source: LmdbJournal, copy: LmdbJournal, batch: list[Record]) -> None:
        sizes.append(len(batch))
        copy_batch(source, copy, batch)

    monkeypatch.setattr(_audit, "_copy_batch", spy)

    code, _, err = _salvage(path, tmp_path / "saved")

    assert code == 0, err
    assert sizes == [3, 3, 3, 1]


def _damage_ids_page(path: Path) -> None:
    """Break the leaf page of the ids index (not of the records) that holds an event id."""
    env = lmdb.open(str(path), readonly=True, max_dbs=8, lock=False)
    page_size = env.stat()["psize"]
    with env.begin() as txn:
        key = bytes(next(iter(txn.cursor(db=env.open_db(b"ids", txn=txn))))[0])
    env.close()
    original = (path / "data.mdb").read_bytes()
    for found in re.finditer(re.escape(key), original):  # in its record too: find the index's page
        data = bytearray(original)
        data[found.start() // page_size * page_size + 10] ^= 0xFF
        (path / "data.mdb").write_bytes(bytes(data))
        try:
            Journal.open(path, readonly=True).close()
        except JournalDamagedError as exc:
            if "of its ids database" in str(exc) and exc.first_seq is None:
                return
        (path / "data.mdb").write_bytes(original)
    pytest.fail("no page of the ids index found")


def test_until_past_the_end_of_a_journal_damaged_outside_its_records_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path, max_map_size=1 << 26) as journal:
        journal.append(make_events(300))
    _damage_ids_page(path)

    code, out, err = _salvage(path, tmp_path / "past", "--until", "400")
    assert (code, out) == (2, ""), err
    assert err.endswith(f"error: --until 400 is past {path}'s last record, seq 300\n")  # not "seq 1's copy"
    assert not (tmp_path / "past").exists()

    code, out, err = _salvage(path, tmp_path / "saved", "--until", "300")
    assert code == 0, err
    assert out.endswith(
        f"300 records verified; every record it holds was copied; {path} is damaged (the warning above)\n"
    )

    code, out, _ = _salvage(path, tmp_path / "part", "--until", "200")
    assert code == 0
    assert out.endswith(f"left out seqs 201 to 300 (--until); {path} is damaged (the warning above)\n")


def test_a_write_of_the_copy_that_fails_names_the_salvage_not_its_removed_sibling(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path, max_map_size=1 << 26) as journal:
        journal.append(make_events(5_000, value="v" * 200))
    dest = tmp_path / "saved"

    def small_files() -> None:  # the copy's data file cannot grow past 512 KiB (EFBIG: an I/O error)
        resource.setrlimit(resource.RLIMIT_FSIZE, (512 << 10, 512 << 10))

    result = subprocess.run(
        [sys.executable, "-m", "cogfabric", "salvage", str(path), str(dest)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        preexec_fn=small_files,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )

    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: cannot salvage {path} into {dest}: writing the copy failed: ")
    assert result.stderr.endswith(f"; nothing was left under {dest}\n")
    assert ".salvage-" not in result.stderr
    assert "fail-stop" not in result.stderr
    assert not dest.exists()
    assert not list(tmp_path.glob(".saved.salvage-*"))


def test_close_waits_for_the_thread_of_an_agent_killed_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    teardown = pykka.Actor._actor_loop_teardown

    def slow(self: pykka.Actor) -> None:
        teardown(self)
        if threading.current_thread().name.endswith(" gone"):
            threading.Event().wait(0.3)  # a thread descheduled after its stop: not a wait for anything

    monkeypatch.setattr(pykka.Actor, "_actor_loop_teardown", slow)
    before = set(threading.enumerate())
    with cf.Runtime.open(tmp_path / "j") as rt:
        rt.spawn("kept")
        rt.spawn("gone")
        rt.kill("gone")

    left = [t.name for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == []
