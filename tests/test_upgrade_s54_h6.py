"""What someone upgrading (or rolling back) cogfabric over a journal is told (session 54, helper h6).

A journal of another format is refused with both formats as attributes, not only in
the message; a record newer than this code says which code writes it, and that this
cogfabric (naming its version) is the one to upgrade.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Annotated

import lmdb
import msgspec
import pytest
from click.testing import CliRunner

import cogfabric
from cogfabric.cli import main
from cogfabric.events import (
    DEFAULT_CODEC,
    EVENT_TYPES,
    AgentEvent,
    EventCodec,
    EventVersionError,
    NewerCognitiveStateError,
    PrivateSet,
)
from cogfabric.store import FORMAT_VERSION, Journal, JournalFormatError, JournalRecordVersionError
from tests.test_events_config_contract_edges import _forged

if TYPE_CHECKING:
    from pathlib import Path


def _journal_of_format(path: Path, fmt: int) -> Path:
    with Journal.open(path, max_map_size=1 << 22) as journal:
        journal.append([PrivateSet(at=0.0, agent="a", key="k", value=1)])
    env = lmdb.open(str(path), max_dbs=8)
    try:
        with env.begin(write=True, db=env.open_db(b"meta")) as txn:
            txn.put(b"format", fmt.to_bytes(4, "big"))
    finally:
        env.close()
    return path


@pytest.mark.parametrize("fmt", [FORMAT_VERSION + 1, FORMAT_VERSION - 1])
def test_a_journal_of_another_format_is_refused_with_both_formats_as_attributes(
    tmp_path: Path, fmt: int
) -> None:
    path = _journal_of_format(tmp_path / "j", fmt)

    with pytest.raises(JournalFormatError) as caught:
        Journal.open(path, readonly=True)

    assert (caught.value.stored, caught.value.known) == (fmt, FORMAT_VERSION)
    assert f"format version {fmt}" in str(caught.value)
    copied = copy.copy(caught.value)  # by __reduce_ex__, as a process pool hands an error back
    assert (copied.stored, copied.known) == (fmt, FORMAT_VERSION)


def test_a_path_that_is_no_journal_has_no_format_versions(tmp_path: Path) -> None:
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "data.mdb").write_bytes(b"")

    with pytest.raises(JournalFormatError) as caught:
        Journal.open(tmp_path / "j", readonly=True)

    assert (caught.value.stored, caught.value.known) == (None, None)


def test_verify_json_prints_no_verdict_for_a_journal_of_a_newer_format(tmp_path: Path) -> None:
    path = _journal_of_format(tmp_path / "j", FORMAT_VERSION + 1)

    result = CliRunner().invoke(main, ["verify", "--json", str(path)])

    assert result.exit_code == 2  # as README "The commands' JSON" says: not a verdict on the journal
    assert result.stdout == ""
    assert "upgrade this one" in result.stderr


def test_a_built_in_record_of_a_newer_version_says_to_upgrade_this_cogfabric() -> None:
    raw = msgspec.to_builtins(PrivateSet(at=0.0, agent="a", key="k", value=1))
    raw["v"] = 2

    with pytest.raises(EventVersionError) as caught:
        DEFAULT_CODEC.decode(msgspec.msgpack.encode(raw))

    assert (caught.value.type_name, caught.value.stored, caught.value.known) == ("PrivateSet", 2, 1)
    text = str(caught.value)
    assert "is at version 2, newer than the known version 1" in text
    assert f"a newer cogfabric than this one ({cogfabric.__version__})" in text
    assert "upgrade this one" in text


def test_a_newer_cognitive_state_says_to_upgrade_this_cogfabric() -> None:
    with pytest.raises(NewerCognitiveStateError) as caught:
        DEFAULT_CODEC.decode(_forged(2))

    assert f"a newer cogfabric than this one ({cogfabric.__version__})" in str(caught.value)


class Note(AgentEvent, frozen=True, kw_only=True, tag="NoteS54"):
    text: str


class NoteV2(AgentEvent, frozen=True, kw_only=True, tag="NoteS54"):
    text: str
    lang: str
    v: Annotated[int, msgspec.Meta(ge=2, le=2)] = 2


def test_a_record_of_your_own_newer_type_points_at_your_code_not_at_cogfabric(tmp_path: Path) -> None:
    newer, older = EventCodec((*EVENT_TYPES, NoteV2)), EventCodec((*EVENT_TYPES, Note))
    with Journal.open(tmp_path / "j", codec=newer, max_map_size=1 << 22) as journal:
        journal.append([NoteV2(at=0.0, agent="a", text="hi", lang="en")])

    with (
        Journal.open(tmp_path / "j", codec=older, readonly=True) as journal,
        pytest.raises(JournalRecordVersionError) as caught,
    ):
        list(journal.read())

    err = caught.value
    assert (err.seq, err.type_name, err.stored, err.known) == (1, "NoteS54", 2, 1)
    assert "newer code of this event type writes such records" in str(caught.value)
    assert "cogfabric than this one" not in str(caught.value)
