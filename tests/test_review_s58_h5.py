"""Review of ``inspect --skip-newer``'s unknown types and ``salvage``'s refusal of newer records.

Session 58, helper h5:


- ``inspect`` said "(--skip-newer summarises the journal)" after the error of any
  record of a version this code does not read: an older one no upcaster reads too,
  which ``--skip-newer`` refuses alike, and with ``--skip-newer`` given, where it
  had just failed to summarise it. The hint is now given for a record newer code
  wrote, without ``--skip-newer``, alone.
- ``salvage`` took a record of an unknown type met before a damaged page for one a
  newer cogfabric wrote without checking its chain link (the page path verifies no
  chain first): a record that fails its link is damage, whatever its tag reads as.
- ``salvage``'s refusal of a record of an unknown type said to salvage the journal
  "with the cogfabric that wrote it", the one in hand for a journal of event types of
  your own, which the command cannot read: it now says such a journal is salvaged in
  Python, with their codec (README, "When a journal fails verification").
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import pytest

from cogfabric.events import EVENT_TYPES, AgentEvent, EventCodec, PrivateSet
from cogfabric.store import Journal, LmdbJournal
from cogfabric.store.testing import make_events
from tests.test_cli_json_s56_h4 import _error, _run
from tests.test_cli_json_s56_h4 import journal as journal  # noqa: PLC0414 - the fixture, used by name
from tests.test_inspect_unknown_types_s58_h2 import _NEWER_CODEC, _Budget, _with
from tests.test_salvage_s54_h12 import _PAGE_SEQS, _link, _nothing_under

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


class _PrivateSetV0(AgentEvent, frozen=True, kw_only=True, tag="PrivateSet"):
    """``PrivateSet`` at a version before any this cogfabric upcasts from."""

    key: str
    value: Any = None
    v: Annotated[int, msgspec.Meta(ge=0, le=0)] = 0


def _with_an_old_record(path: Path) -> Path:
    """``path`` with a ``PrivateSet`` at version 0 appended (seq 7): no upcaster reads it."""
    old = EventCodec([_PrivateSetV0 if t is PrivateSet else t for t in EVENT_TYPES])
    with LmdbJournal.open(path, codec=old) as opened:
        opened.append([_PrivateSetV0(at=9.0, agent="a", key="k")])
    return path


@pytest.mark.parametrize("skip_newer", [False, True])
def test_inspect_suggests_skip_newer_for_no_record_it_does_not_summarise(
    journal: Path, skip_newer: bool
) -> None:
    _with_an_old_record(journal)

    code, stdout, stderr = _run(["inspect", str(journal), "--json", *(["--skip-newer"] * skip_newer)])

    assert (code, stdout) == (1, "")
    message = (
        "record at seq 7: event type 'PrivateSet' is at version 0, not upgradable to the known version 1: "
        "no upcaster from version 0"
    )
    assert stderr.splitlines()[0] == f"error: {message}"  # no "(--skip-newer summarises the journal)"
    error = _error(stderr)
    assert (error["kind"], error["message"], error["seq"]) == ("JournalRecordVersionError", message, 7)
    assert (error["stored"], error["known"]) == (0, 1)


def test_inspect_still_suggests_skip_newer_for_a_record_it_summarises(journal: Path) -> None:
    _with(journal, _Budget(at=9.0, agent="a"))

    code, _, stderr = _run(["inspect", str(journal)])

    assert code == 1
    assert stderr.startswith("error: record at seq 7: unknown event type 'BudgetSet': ")
    assert stderr.endswith("or upgrade this one (--skip-newer summarises the journal)\n")


def _with_a_page_after(path: Path, damage_page: Callable[[Path, bytes], None], *, broken: bool) -> Path:
    """Seqs 1 to 4, seq 5 of a type this cogfabric does not know (its link ``broken``), a damaged page."""
    with Journal.open(path, max_map_size=1 << 26) as opened:
        opened.append(make_events(4))
    with LmdbJournal.open(path, codec=_NEWER_CODEC) as opened:
        opened.append([_Budget(at=9.0, agent="a")])  # seq 5
    with Journal.open(path, max_map_size=1 << 26) as opened:
        opened.append(make_events(295, start=5))  # one batch: each record's link on one page only
    if broken:
        from tests.conftest import _break_link  # noqa: PLC0415 - the fixture's function, before the page breaks

        _break_link(path, 5)
    damage_page(path, _link(path, 250))
    return path


def test_salvage_takes_a_broken_record_of_an_unknown_type_before_a_damaged_page_for_damage(
    tmp_path: Path, damage_page: Callable[[Path, bytes], None]
) -> None:
    path = _with_a_page_after(tmp_path / "j", damage_page, broken=True)
    dest = tmp_path / "saved"

    code, stdout, stderr = _run(["salvage", str(path), str(dest), "--json"])

    assert code == 1
    warning, error = stderr.splitlines()
    found = _PAGE_SEQS.search(warning)
    assert found is not None, warning
    assert int(found[1]) > 5
    verdict = json.loads(stdout)
    assert (verdict["ok"], verdict["first_bad_seq"], verdict["until"]) == (False, 5, None)
    assert "the cogfabric that wrote" not in verdict["reason"]  # no newer cogfabric's: damage
    assert verdict["reason"] == (
        f"cannot salvage {path} into {dest}: seq 5 does not match its hash chain link, so {path} is damaged "
        f"there too; give --until 4 to salvage the records before it; nothing was written to {dest}"
    )
    assert error == f"error: {verdict['reason']}"
    _nothing_under(dest)
    code, stdout, _ = _run(["salvage", str(path), str(dest), "--until", "4"])
    assert code == 0, stdout
    assert stdout.startswith(f"ok: salvaged seqs 1 to 4 of {path} into {dest}, chain 4:")


def test_salvage_still_refuses_an_intact_one_before_a_damaged_page_as_a_newer_cogfabrics(
    tmp_path: Path, damage_page: Callable[[Path, bytes], None]
) -> None:
    path = _with_a_page_after(tmp_path / "j", damage_page, broken=False)
    dest = tmp_path / "saved"

    code, stdout, _ = _run(["salvage", str(path), str(dest), "--json"])

    assert code == 1
    verdict = json.loads(stdout)
    assert (verdict["first_bad_seq"], verdict["until"]) == (5, None)
    assert f"salvage {path} with the cogfabric that wrote that record" in verdict["reason"]
    _nothing_under(dest)


class _Own(AgentEvent, frozen=True, kw_only=True, tag="OrderPlaced"):
    """An event type of an application's own, in its journal beside the built-in ones."""

    order: int = 0


_OWN_CODEC = EventCodec([*EVENT_TYPES, _Own])
_IN_PYTHON = " (a journal of event types of your own: in Python, with their codec)"


@pytest.mark.parametrize("until", [None, 7])
def test_salvage_of_a_journal_of_your_own_types_points_at_salvaging_it_in_python(
    journal: Path, until: int | None
) -> None:
    with LmdbJournal.open(journal, codec=_OWN_CODEC) as opened:
        opened.append([_Own(at=9.0, agent="a", order=1)])  # seq 7, written by this very cogfabric
    dest = journal.parent / "saved"

    code, _, stderr = _run(["salvage", str(journal), str(dest), *([] if until is None else ["--until", "7"])])

    assert code == (1 if until is None else 2)
    assert f"with the cogfabric that wrote it{_IN_PYTHON}, or give --until 6" in stderr
    _nothing_under(dest)


def test_salvage_of_a_newer_version_names_no_code_of_your_own(journal: Path) -> None:
    from tests.test_cli_json_s56_h4 import _with_a_newer_record  # noqa: PLC0415

    _with_a_newer_record(journal)
    dest = journal.parent / "saved"

    code, _, stderr = _run(["salvage", str(journal), str(dest)])

    assert code == 1
    assert "salvage it with the cogfabric that wrote it, or give --until 6" in stderr
    assert "your own" not in stderr
