"""Review of two commits (helper h13): ``trace --id`` by a request error's ids, and the tables' width.

A request refused at a full mailbox was never journaled: its ``MailboxFullError`` names
a ``message_id`` only its dead letter holds, which ``trace --id`` did not find. The
tables' width read ``COLUMNS`` as rich does: ``0`` printed no table at all (exit 0), a
small one cut the field names short, ``²`` (a digit to ``str.isdigit``, none to ``int``)
raised a ValueError (exit 1, the code of a bad journal), and one that is no number made
a table written to a file as wide as some terminal, or 80 columns, not 120.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

import cogfabric as cf
from cogfabric.cli import main
from tests.actors.test_mailbox_full_names_message_s48 import refused_at_a_full_mailbox
from tests.test_cli_table_width_s48 import _widest

if TYPE_CHECKING:
    from pathlib import Path


def test_a_request_refused_at_a_full_mailbox_is_traced_to_its_dead_letter_by_its_message_id(
    tmp_path: Path,
) -> None:
    _, asked = refused_at_a_full_mailbox(tmp_path / "j")
    assert asked.message_id is not None

    message_id = asked.message_id
    result = CliRunner().invoke(main, ["trace", str(tmp_path / "j"), "--id", message_id, "--json"])

    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)["record"]
    assert shown["type"] == "IpcDeadLettered"
    assert (shown["data"]["message_id"], shown["data"]["topic"], shown["data"]["reason"]) == (
        asked.message_id,
        "fourth",
        "mailbox full",
    )


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    """The agent ``_widest`` shows, with a field name ``_WIDTH_MIN`` columns show whole."""
    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        agent = rt.spawn("researcher-with-a-long-name-001", task_id="a-task")
        agent.set_private("notes", {"text": "x" * 300})
    return tmp_path / "j"


@pytest.mark.parametrize("columns", ["0", "1", "20"])
def test_a_tiny_columns_gives_the_narrowest_whole_table(journal: Path, columns: str) -> None:
    assert _widest(journal, {"COLUMNS": columns}) == 40
    shown = CliRunner(env={"COLUMNS": columns}).invoke(
        main, ["replay", str(journal), "--agent", "researcher-with-a-long-name-001"]
    )
    assert "…" not in shown.output
    assert "capabilities" in shown.output


@pytest.mark.parametrize("columns", ["abc", "-5", "²", "7 0"])
def test_a_columns_that_is_no_number_is_not_set(journal: Path, columns: str) -> None:
    assert _widest(journal, {"COLUMNS": columns}) == 120
