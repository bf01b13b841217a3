"""A datetime key in a cognitive state stays a key of its own in export and replay (session 52, helper h6).

A msgpack timestamp reads back as a datetime, so a state's map may be keyed by one.
Inside a Struct, ``encode_json`` went through ``msgspec.to_builtins``, which turned such
a key into its RFC 3339 text and merged it with a text key of that spelling: the value
under the datetime key was gone from `export` and `replay --json`, with no sign.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
from typing import TYPE_CHECKING

import msgspec
from click.testing import CliRunner

from cogfabric import CognitiveState, FakeClock, Runtime
from cogfabric._audit import encode_json
from cogfabric.cli import main
from cogfabric.events import PrivateSet
from cogfabric.store import LmdbJournal

if TYPE_CHECKING:
    from pathlib import Path

WHEN = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
SPELLED = "2020-01-01T00:00:00Z"  # how JSON writes WHEN
BESIDE = {WHEN: "under the datetime key", SPELLED: "under its text"}
IN_TUPLE = {(1, WHEN): "under the datetime-in-tuple key", (1, SPELLED): "under its text in a tuple"}


def _values(pairs: object) -> list[str]:
    assert isinstance(pairs, dict), pairs
    return sorted(value for _, value in pairs["$map"])


def test_encode_json_keeps_a_datetime_key_in_a_struct_apart_from_its_text() -> None:
    state = CognitiveState(schema_version=1, context=BESIDE, working_memory=IN_TUPLE)

    written = json.loads(encode_json(state))

    assert _values(written["context"]) == sorted(BESIDE.values())
    assert _values(written["working_memory"]) == sorted(IN_TUPLE.values())
    assert written["context"] == json.loads(encode_json(BESIDE))  # as the same map outside a Struct


def test_a_datetime_value_in_a_struct_is_written_as_before() -> None:
    state = CognitiveState(schema_version=1, context={"at": WHEN}, observation=[WHEN])

    assert json.loads(encode_json(state))["context"] == {"at": SPELLED}
    assert b'"observation":["2020-01-01T00:00:00Z"]' in encode_json(state)


def test_export_and_replay_keep_a_state_keyed_by_a_datetime_and_by_its_text(tmp_path: Path) -> None:
    path = tmp_path / "journal"
    with Runtime.open(path, clock=FakeClock()) as runtime:
        agent = runtime.spawn("a")
        agent.set_cognitive_state(CognitiveState(schema_version=1, context=BESIDE, working_memory=IN_TUPLE))
        assert agent.cognitive_state().context == BESIDE  # the runtime keeps both

    runner = CliRunner()
    exported = runner.invoke(main, ["export", str(path), "--type", "CognitiveStateSet"])
    replayed = runner.invoke(main, ["replay", str(path), "--agent", "a", "--json"])
    verifiable = runner.invoke(main, ["export", str(path), "--verifiable"])

    assert (exported.exit_code, replayed.exit_code, verifiable.exit_code) == (0, 0, 0), exported.output
    line = json.loads(exported.output)["data"]["state"]
    cognitive = json.loads(replayed.output)["cognitive"]
    for shown in (line, cognitive):
        assert _values(shown["context"]) == sorted(BESIDE.values())
        assert _values(shown["working_memory"]) == sorted(IN_TUPLE.values())
    checked = runner.invoke(main, ["verify-export", "-", "--json"], input=verifiable.output)
    assert checked.exit_code == 0, checked.output


def test_a_verifiable_exports_record_gives_the_values_exactly_as_stored(tmp_path: Path) -> None:
    # README: the lossless route for a pipeline, beside the JSON's null, base64 and text
    when = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
    value = {"nan": math.nan, "b": b"\x00\x01", 1: "int key", "t": when}
    path = tmp_path / "j"
    with LmdbJournal.open(path) as journal:
        journal.append([PrivateSet(at=1.0, agent="a", key="k", value=value)])
    result = CliRunner().invoke(main, ["export", str(path), "--verifiable"])
    [line] = [json.loads(text) for text in result.stdout.splitlines()]
    event = msgspec.msgpack.decode(base64.b64decode(line["record"]))[1]
    stored = event["value"]
    assert math.isnan(stored.pop("nan"))
    assert stored == {"b": b"\x00\x01", 1: "int key", "t": when}
    assert line["data"]["value"]["$map"][0] == ["nan", None]  # the JSON's own, beside it
