"""``verify`` names a keyed journal's chain head whose tag was made without the key (session 63, helper h3).

The head names the last record and its chain link rightly, but its tag was made with
another key (or none): someone without the key cut records off the end and pointed the
head at the last one left. ``_head_problem``'s last branch names it; no test reached it.
Every public entry point that verifies does: ``verify()`` on a read-only open (which
skips the writable open's head check), ``Runtime.open``'s verification, and
``cogfabric verify``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

import cogfabric as cf
from cogfabric.cli import main
from cogfabric.store import Journal
from cogfabric.store._record import head_value
from cogfabric.store.testing import make_events

from .test_contract_edges import _edit, _seq

if TYPE_CHECKING:
    from pathlib import Path

KEY = b"the journal's chain key"
REASON = "the chain head's tag does not match it: the head at seq 5 was set without the key"


@pytest.fixture
def forged(tmp_path: Path) -> Path:
    """A keyed journal of 5 records whose head (at 5, with record 5's link) is tagged with another key."""
    path = tmp_path / "j"
    with Journal.open(path, key=KEY) as journal:
        journal.append(make_events(5))

    def retag(txn: Any, dbs: dict[bytes, Any]) -> None:
        chain = bytes(txn.get(_seq(5), db=dbs[b"events"]))[-16:]
        txn.put(b"head", head_value(_seq(5), chain, b"a forger's key"), db=dbs[b"meta"])

    _edit(path, retag)
    return path


def test_verify_of_a_read_only_open_names_a_head_tagged_without_the_key(forged: Path) -> None:
    with Journal.open(forged, key=KEY, readonly=True) as journal:
        report = journal.verify()

    assert (report.ok, report.checked, report.first_bad_seq, report.head_seq) == (False, 5, 5, 5)
    assert report.reason == REASON


def test_runtime_open_refuses_it_with_that_reason(forged: Path) -> None:
    with pytest.raises(cf.JournalIntegrityError) as refused:
        cf.Runtime.open(forged, key=KEY)

    assert str(refused.value).startswith(f"the journal failed verification at seq 5: {REASON}; ")


def test_cogfabric_verify_names_it_and_exits_1(forged: Path) -> None:
    text = CliRunner().invoke(main, ["verify", str(forged), "--key", KEY.decode()])
    as_json = CliRunner().invoke(main, ["verify", str(forged), "--key", KEY.decode(), "--json"])

    assert text.exit_code == 1
    assert text.stdout.splitlines()[0] == f"FAILED at seq 5: {REASON} (5 records checked)"
    assert as_json.exit_code == 1
    document = json.loads(as_json.stdout)
    assert (document["ok"], document["first_bad_seq"], document["reason"]) == (False, 5, REASON)
