"""Session 52, helper h7: a suggested command's shell words read back in any locale;
export -o never follows a link planted after its check."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cogfabric import cli
from cogfabric.cli import _shown, main
from cogfabric.events import PrivateSet
from cogfabric.store import LmdbJournal
from tests.reliability.test_security_s52_h3 import _journal_of_3

_BASH = pytest.mark.skipif(shutil.which("bash") is None, reason="the $'...' word is bash's")


def _bash_prints(word: str, locale: str) -> bytes:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": locale}
    command = ["bash", "-c", f"printf %s {word}"]
    return subprocess.run(command, capture_output=True, check=True, env=env).stdout


@_BASH
@pytest.mark.parametrize("locale", ["C", "C.UTF-8"])
@pytest.mark.parametrize(
    "name",
    ["c1\x85\x9b", "bidi\u202eexe", "zero\u200bwidth\x1b", "tag\U000e0041", os.fsdecode(b"not\xffutf8")],
)
def test_a_shown_path_names_the_same_bytes_in_any_locale(name: str, locale: str) -> None:
    # \u0085 is read as U+0085's UTF-8 only in a UTF-8 locale: bash in the C locale (a
    # container's default) leaves the six characters, naming another file
    word = _shown(Path(name))

    assert word.isprintable()
    assert _bash_prints(word, locale) == os.fsencode(name)


@_BASH
def test_the_export_command_suggested_for_a_never_spawned_agent_names_its_stream(tmp_path: Path) -> None:
    # the stream was quoted raw, then _say escaped it as Python writes it: inside the
    # quotes bash read 'agent/s\u200bx', a stream the journal does not have
    agent = "s\u200bx"
    path = tmp_path / "j"
    with LmdbJournal.open(path) as journal:
        journal.append([PrivateSet(at=1.0, agent=agent, key="k", value=1)])

    result = CliRunner().invoke(main, ["replay", str(path), "--agent", agent])

    assert result.exit_code == 2
    found = re.search(r"--stream (\S+) --until 1 shows", result.stderr)
    assert found is not None, result.stderr
    assert _bash_prints(found.group(1), "C") == f"agent/{agent}".encode()


def test_export_does_not_follow_a_link_put_in_place_after_its_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # O_NOFOLLOW: written in place (as in a directory it cannot write, not beside and
    # renamed), a name the check saw no link at (is_symlink False) is never opened through
    # one planted since
    journal = _journal_of_3(tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("the auditor's own\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    out.symlink_to(victim)
    is_symlink = Path.is_symlink
    monkeypatch.setattr(Path, "is_symlink", lambda self: False if self == out else is_symlink(self))
    monkeypatch.setattr(cli, "_replaceable", lambda _output: False)

    result = CliRunner().invoke(main, ["export", str(journal), "-o", str(out)])

    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: cannot write --output {out}: ")
    assert victim.read_text(encoding="utf-8") == "the auditor's own\n"
