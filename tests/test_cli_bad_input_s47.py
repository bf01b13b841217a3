"""Bad input at the edges a user touches first: `cogfabric simulate` and `export`, the YAML file."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from cogfabric.cli import main
from cogfabric.config import InvalidConfigError, parse_config

if TYPE_CHECKING:
    from pathlib import Path

_SMALL = ("--agents", "2", "--turns", "1")


def _simulate(journal: Path, *, expect: int = 0) -> str:
    result = CliRunner().invoke(main, ["simulate", "--journal", str(journal), *_SMALL])
    assert result.exit_code == expect, result.output
    return result.output


def test_simulate_refuses_a_directory_of_other_files_and_leaves_it_as_it_was(tmp_path: Path) -> None:
    # `--journal .` in a project, or a typo naming an existing directory: the journal's
    # files would land among the user's (as `--journal ""` is refused for)
    project = tmp_path / "project"
    project.mkdir()
    (project / "main.py").write_text("print(1)\n", encoding="utf-8")

    output = _simulate(project, expect=2)

    assert f"{project} holds other files (main.py) and no journal" in output
    assert "Traceback" not in output
    assert sorted(p.name for p in project.iterdir()) == ["main.py"]
    # an empty directory is still a new journal's, continued there; so is one a creation
    # cut short left a journal's own lock file in
    empty, left = tmp_path / "empty", tmp_path / "left"
    empty.mkdir()
    left.mkdir()
    (left / "writer.lock").touch()
    _simulate(empty)
    _simulate(empty)
    _simulate(left)
    assert sorted(p.name for p in empty.iterdir()) == ["data.mdb", "lock.mdb", "writer.lock"]


@pytest.mark.parametrize(
    ("after", "until", "message"),
    [
        ("200", None, "--after 200 is past the journal's last seq"),
        ("10", "5", "--after 10 is not before --until 5: the range holds no record"),
        ("5", "5", "--after 5 is not before --until 5: the range holds no record"),
    ],
)
def test_export_refuses_a_range_that_holds_no_record_and_keeps_the_file_it_would_replace(
    tmp_path: Path, after: str, until: str | None, message: str
) -> None:
    # a typo'd seq would write an empty export, exit 0, over the one the file held
    journal = tmp_path / "j"
    _simulate(journal)
    kept = tmp_path / "all.jsonl"
    kept.write_text("an earlier export\n", encoding="utf-8")
    options = ["--after", after, *(["--until", until] if until is not None else [])]

    result = CliRunner().invoke(main, ["export", str(journal), *options, "-o", str(kept)])

    assert result.exit_code == 2, result.output
    assert message in result.output
    assert kept.read_text(encoding="utf-8") == "an earlier export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all.jsonl", "j"]  # no partial file either
    # "what is new since the last seq", with nothing new, is still an empty export
    head = CliRunner().invoke(main, ["inspect", str(journal), "--json"])
    last = str(json.loads(head.output)["head_seq"])
    since = CliRunner().invoke(main, ["export", str(journal), "--after", last])
    assert (since.exit_code, since.output) == (0, "")


@pytest.mark.parametrize(
    ("text", "where", "example"),
    [
        ("journal:\n  # durability: batch\n", "$.journal", "journal: {}"),
        ("memory:\n  clean:\n    # max_user_len: 100\n", "$.memory.clean", "clean: {}"),
    ],
)
def test_a_section_whose_keys_are_all_commented_out_says_how_to_write_it(
    text: str, where: str, example: str
) -> None:
    with pytest.raises(InvalidConfigError) as info:
        parse_config(text, source="c.yaml")

    message = str(info.value)
    assert message.startswith(f"c.yaml: Expected `object`, got `null` - at `{where}`")
    assert f"a section with no keys: leave it out, or write `{example}`" in message


def test_export_to_dash_writes_stdout_not_a_file_named_dash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # verify-export reads - as stdin; export -o - wrote a file called "-" in the working directory
    journal = tmp_path / "j"
    _simulate(journal)
    monkeypatch.chdir(tmp_path)

    to_dash = CliRunner().invoke(main, ["export", str(journal), "--until", "3", "-o", "-"])
    plain = CliRunner().invoke(main, ["export", str(journal), "--until", "3"])

    assert to_dash.exit_code == 0, to_dash.output
    assert to_dash.output == plain.output
    assert [json.loads(line)["seq"] for line in to_dash.output.splitlines()] == [1, 2, 3]
    assert not (tmp_path / "-").exists()
