"""An event whose ``at`` is NaN or infinite (session 63, helper h3).

``Journal.append`` stored one: msgpack holds it and every reader decodes it, but no
session stamped with it expires, and the audit commands print it as JSON's ``null``
(strict JSON has no NaN). ``append`` now refuses it, with ``InvalidEventError`` as any
event that would not read back, the batch whole; a journal that holds one (written
before the check, or with ``validate=False``) still reads and verifies.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.events import InvalidEventError, PrivateSet, SessionCreated
from cogfabric.store import Journal
from cogfabric.store.testing import make_events

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize("at", [math.nan, math.inf, -math.inf])
def test_append_refuses_a_time_that_is_not_finite_and_stores_nothing_of_the_batch(
    tmp_path: Path, at: float
) -> None:
    with Journal.open(tmp_path / "j") as journal:
        journal.append(make_events(1))
        batch = [*make_events(2, start=1), SessionCreated(at=at, session="s", user_id="u")]
        with pytest.raises(InvalidEventError) as refused:
            journal.append(batch)

        assert str(refused.value) == (
            f"event 2 (SessionCreated): its time `at` must be finite seconds since the epoch, got {at!r}"
        )
        assert isinstance(refused.value, ValueError)
        assert isinstance(refused.value, TypeError)
        assert journal.last_seq == 1
        assert journal.streams("session/") == []
        assert journal.append(batch[:2]) == [2, 3]  # refused before the transaction: still usable


def test_a_journal_that_holds_one_still_reads_verifies_and_exports_it_as_null(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with Journal.open(path) as journal:  # as a journal written before the check holds one
        journal.append([PrivateSet(at=math.nan, agent="a", key="k", value=1)], validate=False)
        journal.append(make_events(1))

    with Journal.open(path, readonly=True) as journal:
        records = list(journal.read())
        assert [r.seq for r in records] == [1, 2]
        assert math.isnan(records[0].event.at)
        assert journal.verify(decode=True).ok

    exported = CliRunner().invoke(main, ["export", str(path)])
    assert exported.exit_code == 0, exported.output
    first = json.loads(exported.stdout.splitlines()[0])
    assert (first["seq"], first["time"], first["data"]["at"]) == (1, None, None)
