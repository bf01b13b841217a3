"""verify-export tells a line a tool re-encoded (0 for 0.0) from one whose values changed."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from cogfabric._audit import export_lines
from cogfabric._export_check import verify_export
from cogfabric.events import PrivateSet
from cogfabric.store import LmdbJournal

if TYPE_CHECKING:
    from pathlib import Path


def _lines(tmp_path: Path, value: Any) -> list[bytes]:
    path = tmp_path / "journal"
    with LmdbJournal.open(path) as journal:
        journal.append([PrivateSet(at=float(i), agent="a", key="k", value=value) for i in range(3)])
    with LmdbJournal.open(path, readonly=True) as journal:
        return list(export_lines(journal, verifiable=True))


def _reencoded(line: bytes, edit: Any) -> bytes:
    fields = json.loads(line)
    edit(fields)
    return json.dumps(fields, separators=(",", ":")).encode() + b"\n"


@pytest.mark.parametrize(
    ("value", "edit", "field"),
    [
        ({"score": 0.0}, lambda f: f["data"]["value"].update(score=0), "data"),
        ([1.0, {"x": 2.0}], lambda f: f["data"].update(value=[1, {"x": 2}]), "data"),
        ("v", lambda f: f.update(time=int(f["time"])), "time"),
    ],
)
def test_a_number_written_otherwise_is_named_as_a_reencoding(
    tmp_path: Path,
    value: Any,
    edit: Any,
    field: str,
) -> None:
    lines = _lines(tmp_path, value)
    assert verify_export(lines).ok
    lines[1] = _reencoded(lines[1], edit)

    report = verify_export(lines)

    assert not report.ok
    assert report.bad_line == 2
    assert f"its {field!r} holds its record's values with a number written otherwise" in report.reason
    assert "re-encoded" in report.reason


@pytest.mark.parametrize(
    ("value", "edit"),
    [
        ({"flag": 1}, lambda f: f["data"]["value"].update(flag=True)),  # true is another value than 1
        ({"score": 0.0}, lambda f: f["data"]["value"].update(score=0.5)),
        ({"score": 0.0}, lambda f: f["data"]["value"].update(score=0, extra=1)),
        ([1.0, 2.0], lambda f: f["data"].update(value=[1])),
    ],
)
def test_a_changed_value_is_still_named_a_change(tmp_path: Path, value: Any, edit: Any) -> None:
    lines = _lines(tmp_path, value)
    lines[1] = _reencoded(lines[1], edit)

    report = verify_export(lines)

    assert not report.ok
    assert "its 'data' is not what its record holds" in report.reason
