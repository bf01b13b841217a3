"""A private value of a type only msgpack has (``msgspec.msgpack.Ext``) in an export (s53 h3 coverage audit).

``set_private`` stores any value msgspec encodes, an extension type too; the audits write it
as ``{"msgpack_ext": code, "data": base64}`` (``_audit._ext_as_builtin``), also inside a map
with a bytes key. The suite never stored one.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import msgspec
from click.testing import CliRunner

import cogfabric as cf
from cogfabric.cli import main

if TYPE_CHECKING:
    from pathlib import Path


def test_an_ext_private_value_is_exported_as_its_code_and_bytes(tmp_path: Path) -> None:
    path = tmp_path / "j"
    with cf.Runtime.open(path) as rt:
        agent = rt.spawn("a")
        agent.set_private("k", msgspec.msgpack.Ext(5, b"ab"))
        agent.set_private("m", {b"x": msgspec.msgpack.Ext(7, b"\x00")})
        rt.flush()

    result = CliRunner().invoke(main, ["export", str(path)])

    assert result.exit_code == 0, result.output
    values = {
        record["data"]["key"]: record["data"]["value"]
        for record in map(json.loads, result.stdout.splitlines())
        if record["type"] == "PrivateSet"
    }
    assert values == {
        "k": {"msgpack_ext": 5, "data": "YWI="},
        "m": {"$map": [["eA==", {"msgpack_ext": 7, "data": "AA=="}]]},
    }
