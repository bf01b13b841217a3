"""Review of the configuration-error hints (session 61, helper h11).

A whole-number key written ``1e3`` was told to write ``1.0e+3``, which it then refused
as a float; a file saved as UTF-16 without its byte order mark was told of a control
character "at position 1", or, holding an ``é``, that it was Latin-1. The rest pin lines
of the hints no earlier test failed without (the column in characters, a line ended by a
lone CR, a tab libyaml names itself, the simulate hint with no --config file).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

import cogfabric._simulation
from cogfabric.actors import ActorTimeoutError
from cogfabric.cli import main
from cogfabric.config import InvalidConfigError, load_config, parse_config

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("journal: {snapshot_interval: 1e3}\n", "journal.snapshot_interval"),
        ("memory: {max_sessions: 5E2}\n", "memory.max_sessions"),
        ("journal: {max_map_size: 1e9}\n", "journal.max_map_size"),  # int | None
    ],
)
def test_a_whole_number_key_written_1e3_is_told_to_write_digits_not_a_float_it_refuses(
    text: str, path: str
) -> None:
    with pytest.raises(InvalidConfigError) as raised:
        parse_config(text)

    message = str(raised.value)
    assert message.endswith(
        f"at `$.{path}` (YAML 1.1 reads a number such as 1e3, with no dot, as text: this key takes "
        "a whole number: write it in digits, 1e3 as 1000)"
    )
    assert "1.0e+3" not in message
    # what the old hint said to write is refused: a float where an int goes
    section, key = path.split(".")
    with pytest.raises(InvalidConfigError, match=r"Expected `int( \| null)?`, got `float`"):
        parse_config(f"{section}: {{{key}: 1.0e+3}}\n")
    parse_config(f"{section}: {{{key}: 1000}}\n")


@pytest.mark.parametrize(
    ("encoding", "where"),
    [("utf-16-le", "line 1, column 2"), ("utf-16-be", "line 1, column 1")],
)
def test_utf16_without_its_byte_order_mark_is_named_as_such(
    tmp_path: Path, encoding: str, where: str
) -> None:
    # libyaml said "unacceptable character #x0000: control characters are not allowed at
    # position 1"; with an é in the file, it was called Latin-1 ("byte 0xe9")
    path = tmp_path / "cogfabric.yaml"
    path.write_bytes("journal:\n  durability: batch  # été\n".encode(encoding))

    with pytest.raises(InvalidConfigError) as raised:
        load_config(path)

    assert str(raised.value) == (
        f"{path}: a NUL byte (0x00), which no YAML holds, at {where} (saved as UTF-16 without its "
        "byte order mark? save it as UTF-8)"
    )


def test_a_nul_byte_in_utf8_text_is_named_with_its_line() -> None:
    # libyaml named the position in the text (22), not the line
    with pytest.raises(
        InvalidConfigError,
        match=r"^<config>: a NUL byte \(0x00\), which no YAML holds, at line 2, column 14 ",
    ):
        parse_config(b"journal:\n  durability:\x00 sync\n")


def test_the_column_of_a_bad_byte_counts_characters_not_bytes() -> None:
    # "  # café " is 9 characters, 10 bytes: libyaml's columns count characters
    with pytest.raises(InvalidConfigError, match=r"byte 0xe9 at line 2, column 10 "):
        parse_config(b"journal:\n  # caf\xc3\xa9 \xe9\n")


@pytest.mark.parametrize("text", ["journal:\r\tdurability: sync\r", b"journal:\r\n\tdurability: sync\r\n"])
def test_a_tab_is_named_on_lines_ended_by_cr_as_libyaml_counts_them(text: str | bytes) -> None:
    with pytest.raises(
        InvalidConfigError, match=r"at line 2, column 1 \(a tab: YAML indents with spaces only\)$"
    ):
        parse_config(text)


def test_a_tab_libyaml_names_itself_is_not_named_twice() -> None:
    with pytest.raises(InvalidConfigError) as raised:
        parse_config("journal:\n  - 1\n\t- 2\n")

    assert str(raised.value).endswith("found a tab character that violates indentation at line 3, column 1")


def test_a_quoted_number_with_spaces_around_it_is_told_to_lose_its_quotes() -> None:
    with pytest.raises(InvalidConfigError, match=r"\(' 100 ' is text: write the number without quotes\)$"):
        parse_config("runtime: {mailbox_size: ' 100 '}\n")


def _stopped_by(monkeypatch: pytest.MonkeyPatch, exc: BaseException, *args: str) -> str:
    def stops(*_: object, **__: object) -> None:
        raise exc

    monkeypatch.setattr(cogfabric._simulation, "run_simulation", stops)
    result = CliRunner().invoke(main, ["simulate", *args])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    return result.stderr.rstrip()


def test_a_simulation_stopped_by_call_timeout_with_no_config_file_names_the_default_and_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = _stopped_by(
        monkeypatch,
        ActorTimeoutError("agent 'r0' did not answer x within 30.0 s"),
        "--journal",
        str(tmp_path),
    )

    assert said.endswith(
        "within 30.0 s (runtime.call_timeout is 30 s; a slow disk may need more: raise it in a --config file)"
    )


def test_a_simulation_that_stalled_is_not_told_of_call_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the driver's own 120 s wait for a turn (a bare TimeoutError) is no call_timeout
    said = _stopped_by(
        monkeypatch,
        TimeoutError("the simulation stalled: a turn did not finish within 120 s"),
        "--journal",
        str(tmp_path),
    )

    assert said.endswith("the simulation stopped: the simulation stalled: a turn did not finish within 120 s")
