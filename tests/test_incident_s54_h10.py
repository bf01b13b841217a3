"""A journal that fails verification: what the errors name, and README's salvage of what precedes it.

Helper h10 of session 54, an on-call engineer: a damaged page names the seqs it may hold (so
the first bad record is known), an unverified open logs the seq it waives, and the salvage of
README "When a journal fails verification" (a script then, ``cogfabric salvage`` since helper
h12) copies the records before the first bad one into a new journal, chained as they were,
and refuses to copy one its chain does not back.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from cogfabric import Runtime
from cogfabric.cli import main
from cogfabric.store import Journal, JournalDamagedError
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

_PAGE_SEQS = re.compile(r"the page holds the records from seq (\d+) to seq (\d+) at most")


def _journal(path: Path, count: int = 300) -> Path:
    with Journal.open(path) as journal:
        journal.append(make_events(count))  # several leaf pages of records
    return path


def _link(path: Path, seq: int) -> bytes:
    with Journal.open(path, readonly=True, check_pages=False) as journal:
        return next(journal.read(after=seq - 1, until=seq)).chain


def _salvage(src: Path, dest: Path, last_good: int) -> None:
    """Run README's salvage, ``cogfabric salvage SRC DEST --until LAST_GOOD``; its error as SystemExit."""
    result = CliRunner().invoke(main, ["salvage", str(src), str(dest), "--until", str(last_good)])
    if result.exit_code:
        raise SystemExit(result.stderr)


def test_a_damaged_page_of_records_names_the_seqs_it_may_hold(
    tmp_path: Path, damage_page: Callable[[Path, bytes], None]
) -> None:
    path = _journal(tmp_path / "j")
    damage_page(path, _link(path, 150))

    with pytest.raises(JournalDamagedError) as info:
        Journal.open(path, readonly=True)

    found = _PAGE_SEQS.search(str(info.value))
    assert found is not None, str(info.value)
    first, last = int(found[1]), int(found[2])
    assert 1 < first <= 150 <= last < 300
    assert str(info.value).endswith(
        f"; restore the journal from a copy, or salvage the records before seq {first} with cogfabric "
        'salvage (README, "When a journal fails verification")'
    )
    with Journal.open(path, readonly=True, check_pages=False) as journal:  # what a salvage reads
        assert [r.seq for r in journal.read(until=first - 1)] == list(range(1, first))


def test_the_first_page_of_records_damaged_offers_no_salvage(
    tmp_path: Path, damage_page: Callable[[Path, bytes], None]
) -> None:
    path = _journal(tmp_path / "j")
    damage_page(path, _link(path, 1))

    with pytest.raises(JournalDamagedError, match="the page holds the records from seq 1 to seq") as info:
        Runtime.open(path)

    assert str(info.value).endswith("; restore the journal from a copy")


def test_an_unverified_open_logs_the_seq_it_waives(
    tmp_path: Path, break_link: Callable[[Path, int], None], caplog: pytest.LogCaptureFixture
) -> None:
    with Runtime.open(tmp_path / "j") as runtime:
        agent = runtime.spawn("a")
        for step in range(5):
            agent.set_private("step", step)
    break_link(tmp_path / "j", 3)

    with pytest.raises(Exception, match="When a journal fails verification"):
        Runtime.open(tmp_path / "j")
    with caplog.at_level(logging.WARNING, logger="cogfabric"):
        Runtime.open(tmp_path / "j", allow_unverified=True).close()

    assert "fails verification at seq 3" in caplog.text


def test_readme_salvage_copies_the_records_before_a_broken_link_chained_as_they_were(
    tmp_path: Path, break_link: Callable[[Path, int], None]
) -> None:
    path = _journal(tmp_path / "j")
    break_link(path, 200)
    with Journal.open(path, readonly=True) as journal:
        assert journal.verify(decode=True).first_bad_seq == 200

    _salvage(path, tmp_path / "salvaged", 199)

    with Journal.open(tmp_path / "salvaged", readonly=True) as salvaged:
        report = salvaged.verify(decode=True)
        assert report.ok
        assert report.head_seq == 199
        assert next(salvaged.read(after=198)).chain == _link(path, 199)
    with Runtime.open(tmp_path / "salvaged") as runtime:  # the service runs on it
        runtime.spawn("after-incident")


def test_readme_salvage_refuses_to_copy_past_the_bad_record(
    tmp_path: Path, break_link: Callable[[Path, int], None]
) -> None:
    path = _journal(tmp_path / "j")
    break_link(path, 200)

    with pytest.raises(SystemExit, match="--until 200 reaches seq 200, the first bad record"):
        _salvage(path, tmp_path / "salvaged", 200)
    assert not (tmp_path / "salvaged").exists()
    _salvage(path, tmp_path / "salvaged", 10)
    with pytest.raises(SystemExit, match="exists and is not empty"):
        _salvage(path, tmp_path / "salvaged", 10)


def test_readme_salvage_reads_the_pages_before_a_damaged_one(
    tmp_path: Path, damage_page: Callable[[Path, bytes], None]
) -> None:
    path = _journal(tmp_path / "j")
    link = _link(path, 150)
    damage_page(path, link)
    with pytest.raises(JournalDamagedError) as info:
        Journal.open(path)
    found = _PAGE_SEQS.search(str(info.value))
    assert found is not None
    first = int(found[1])

    _salvage(path, tmp_path / "salvaged", first - 1)

    with Journal.open(tmp_path / "salvaged", readonly=True) as salvaged:
        report = salvaged.verify(decode=True)
        assert report.ok
        assert report.head_seq == first - 1
        assert next(salvaged.read(after=first - 2)).chain == _link(path, first - 1)
