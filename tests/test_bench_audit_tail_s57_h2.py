"""bench/audit.py --only tail: the tail check timed alone beside the full check (helper h2, session 57).

The tail check reads every stream's head, so its cost grows with the streams; the
workload times ``verify(after=N)`` on journals of the same records and the same tail
but more and more streams, beside the full check of each and the tail check of a
journal of 10 streams. Tiny sizes, no timing asserted.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from tests.test_bench_scripts import _bench_module, _run

if TYPE_CHECKING:
    from pathlib import Path


def test_the_tail_check_is_timed_per_journal_beside_its_full_check_and_the_few_streams_one(
    tmp_path: Path,
) -> None:
    options = "--only tail --tail-streams 20,60 --tail-records 300 --tail-length 30 --repeat 2"
    stdout, results = _run("audit.py", options, tmp_path)
    document = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))

    rows = {row["workload"]: row for row in results}
    reference = "verify(after=270), 10 streams"
    assert set(rows) == {
        reference,
        "verify(), 10 streams",
        "verify(after=270), 20 streams",
        "verify(), 20 streams",
        "verify(after=270), 60 streams",
        "verify(), 60 streams",
    }  # no export row: --only tail builds no simulation
    assert "the tail check at" in stdout
    for streams in (10, 20, 60):
        tail, full = rows[f"verify(after=270), {streams} streams"], rows[f"verify(), {streams} streams"]
        assert (tail["count"], full["count"]) == (30, 300)  # the records each checked
        assert tail["reference"] == reference
        assert tail["ratio"] > 0
        assert "of the full check's time" in tail["note"]
        assert len(tail["runs"]) == len(full["runs"]) == 2
    assert rows[reference]["ratio"] == 1.0
    journals = {info["streams"]: info for info in document["tail_journals"]}
    assert set(journals) == {10, 20, 60}
    assert {(info["records"], info["tail"], info["after"]) for info in journals.values()} == {(300, 30, 270)}
    assert document["settings"]["only"] == ["tail"]
    assert "journal" not in document


def test_the_tail_journals_need_a_record_of_every_stream_before_the_tail() -> None:
    audit = _bench_module("audit")

    with pytest.raises(SystemExit):
        audit.parse_args(
            ["--only", "tail", "--tail-streams", "100", "--tail-records", "120", "--tail-length", "30"]
        )
    settings, _ = audit.parse_args(
        ["--only", "tail", "--tail-streams", "90", "--tail-records", "120", "--tail-length", "30"]
    )
    assert settings.tail_streams == (90,)
    assert audit.parse_args([])[0].only == ("export",)  # the default run is the exports, as before
