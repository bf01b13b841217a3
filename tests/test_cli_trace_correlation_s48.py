"""``cogfabric trace --id`` takes a request's correlation id too, what a request's error names.

``IpcTimeoutError`` and the other request errors name ``message_id`` and
``correlation_id``; an auditor handed the second got "no record holds the event id".
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

import cogfabric as cf
from cogfabric.cli import main

if TYPE_CHECKING:
    from pathlib import Path


def test_a_timed_out_request_is_traced_by_its_correlation_id(tmp_path: Path) -> None:
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        rt.spawn("asker")
        rt.spawn("quiet")  # no behavior: the request fails at once
        rt.bus.send("asker", "quiet", "before")
        with pytest.raises(cf.IpcNoHandlerError) as failed:
            rt.bus.request("asker", "quiet", "question", {"q": 1}, timeout=5)
    correlation_id = failed.value.correlation_id
    assert correlation_id is not None
    assert correlation_id != failed.value.message_id

    by_id = CliRunner().invoke(
        main, ["trace", str(tmp_path / "j"), "--id", str(failed.value.message_id), "--json"]
    )
    by_correlation = CliRunner().invoke(
        main, ["trace", str(tmp_path / "j"), "--id", correlation_id, "--json"]
    )

    assert (by_id.exit_code, by_correlation.exit_code) == (0, 0), by_correlation.output
    assert by_correlation.output == by_id.output
    shown = json.loads(by_id.output)["record"]["data"]
    assert (shown["id"], shown["topic"], shown["kind"]) == (failed.value.message_id, "question", "request")


def test_an_unknown_correlation_id_is_no_record(tmp_path: Path) -> None:
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        rt.spawn("a")

    result = CliRunner().invoke(main, ["trace", str(tmp_path / "j"), "--id", "nobody-corr"])

    assert result.exit_code == 2
    assert "no record up to seq 1 holds the event id 'nobody-corr'" in result.output
