"""The commands inside shell pipelines and CI jobs: encodings, closed pipes, exit statuses, timeouts.

Each test runs ``python -m cogfabric`` in a subprocess, as a CI job would, with a timeout.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import cogfabric as cf

if TYPE_CHECKING:
    from collections.abc import Iterator

_TIMEOUT = 60

#: Names and values no 8-bit encoding holds all of: an accented letter, an astral emoji,
#: and an escape sequence a terminal would act on.
_ACCENTED = "r\u00e9v"
_ASTRAL = "bot-\U0001f600"


def _run(
    *args: str, env: dict[str, str] | None = None, stdout: int | None = subprocess.PIPE, **kw: object
) -> subprocess.CompletedProcess[bytes]:
    environ = dict(os.environ)
    environ.pop("PYTHONIOENCODING", None)
    environ.update(env or {})
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-m", "cogfabric", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        env=environ,
        timeout=_TIMEOUT,
        check=False,
        **kw,
    )


@pytest.fixture(scope="module")
def odd_journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A journal whose agent ids, topic, task and values hold non-ASCII, astral and control characters."""
    path = tmp_path_factory.mktemp("pipelines") / "journal"
    with cf.Runtime.open(path) as rt:
        rt.spawn(_ACCENTED, task_id="t\x1b[1m", task_context={"goal": "find X \u00e9 \U0001f600"})
        rt.spawn(_ASTRAL, task_id="t\x1b[1m")
        rt.agent(_ACCENTED).set_private("k\x1b[2J", {"v": "\x1b]0;title\x07 \u00fc \U0001f600"})
        rt.bus.send(_ACCENTED, _ASTRAL, "top\x1b[Kic\U0001f600", {"claim": "\u00e9"})
    return path


def _no_traceback(result: subprocess.CompletedProcess[bytes]) -> str:
    err = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    assert "Exception ignored" not in err, err
    return err


@pytest.mark.parametrize("encoding", ["latin-1", "ascii"])
@pytest.mark.parametrize(
    "command",
    [
        ("replay",),
        ("replay", "--agent", _ACCENTED),
        ("inspect",),
        ("trace", "--seq", "4"),
    ],
    ids=["replay-overview", "replay-agent", "inspect", "trace"],
)
def test_a_non_utf8_stdout_gets_escapes_not_a_traceback_and_exit_1(
    odd_journal: Path, encoding: str, command: tuple[str, ...]
) -> None:
    """``PYTHONIOENCODING=latin-1`` (or ascii): a name the encoding lacks is escaped, exit 0.

    Before, ``replay``'s tables (both encodings) and ``inspect``'s stream list (latin-1: an
    astral agent id) raised ``UnicodeEncodeError``: a traceback and exit 1, which a CI job
    reads as a damaged journal.
    """
    name, *rest = command
    result = _run(name, str(odd_journal), *rest, env={"PYTHONIOENCODING": encoding})
    _no_traceback(result)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert b"\x1b" not in out  # the journal's escape sequences stay escaped too
    if name == "replay" and not rest:  # the overview names both agents, one way or another
        assert b"\\U0001f600" in out or "\U0001f600".encode() in out


def test_a_c_locale_without_utf8_mode_prints_the_table(odd_journal: Path) -> None:
    """``LC_ALL=C`` with UTF-8 mode and locale coercion off: stdout is ASCII with surrogateescape."""
    env = {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    result = _run("replay", str(odd_journal), env=env)
    _no_traceback(result)
    assert result.returncode == 0, result.stderr
    assert b"r\\xe9v" in result.stdout


@pytest.mark.parametrize(
    "args",
    [("replay", "--agent", _ACCENTED, "--json"), ("export", "--stream", f"agent/{_ACCENTED}")],
    ids=["replay-agent", "export-stream"],
)
def test_a_name_on_the_command_line_is_read_as_utf8_in_an_ascii_locale(
    odd_journal: Path, args: tuple[str, ...]
) -> None:
    """``LC_ALL=C PYTHONUTF8=0``: ``--agent rév`` names the agent, not ``r\\udcc3\\udca9v`` (exit 2)."""
    env = {"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    name, *rest = args
    result = _run(name, str(odd_journal), *rest, env=env)
    _no_traceback(result)
    assert result.returncode == 0, result.stderr
    first = json.loads(result.stdout.splitlines()[0] if name == "export" else result.stdout)
    assert _ACCENTED in (first.get("agent"), first.get("data", {}).get("agent"))


def test_the_json_outputs_stay_utf8_json_under_latin1(odd_journal: Path) -> None:
    """``--json`` writes UTF-8 whatever the encoding: a JSON reader gets the names exactly."""
    result = _run("replay", str(odd_journal), "--json", env={"PYTHONIOENCODING": "latin-1"})
    _no_traceback(result)
    assert result.returncode == 0
    agents = {agent["agent"] for agent in json.loads(result.stdout)["agents"]}
    assert agents == {_ACCENTED, _ASTRAL}


def test_a_reader_that_stops_early_ends_every_command_quietly(odd_journal: Path) -> None:
    """``cogfabric export J | python -c 'sys.stdin.readline()'``: exit 0, no BrokenPipeError."""
    reader = subprocess.Popen(  # reads one line, then goes
        [sys.executable, "-c", "import sys; sys.stdin.buffer.readline()"], stdin=subprocess.PIPE
    )
    try:
        assert reader.stdin is not None
        writer = subprocess.run(
            [sys.executable, "-m", "cogfabric", "replay", str(odd_journal), "--agent", _ACCENTED],
            stdout=reader.stdin,
            stderr=subprocess.PIPE,
            timeout=_TIMEOUT,
            check=False,
            env={**os.environ, "PYTHONIOENCODING": "latin-1", "COLUMNS": "20"},
        )
        reader.stdin.close()
    finally:
        reader.wait(timeout=_TIMEOUT)
    _no_traceback(writer)
    assert writer.returncode == 0


def test_json_on_a_full_disk_is_exit_2_with_the_error_object_last_on_stderr(odd_journal: Path) -> None:
    with Path("/dev/full").open("wb") as full:
        result = _run("replay", str(odd_journal), "--json", stdout=full.fileno())
    err = _no_traceback(result)
    assert result.returncode == 2
    error = json.loads(err.splitlines()[-1])["error"]
    assert (error["kind"], error["exit"]) == ("OutputError", 2)


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ("inspect",),
        ("inspect", "--json"),
        ("verify",),
        ("verify", "--json"),
        ("replay",),
        ("replay", "--json"),
        ("export",),
        ("trace", "--seq", "4"),
        ("trace", "--seq", "4", "--json"),
    ],
)
@pytest.mark.parametrize("encoding", ["latin-1", "ascii", "utf-8"])
def test_every_command_in_every_encoding_exits_0_and_keeps_the_journals_escapes_out(
    odd_journal: Path, command: tuple[str, ...], encoding: str
) -> None:
    name, *rest = command
    result = _run(name, str(odd_journal), *rest, env={"PYTHONIOENCODING": encoding, "NO_COLOR": "1"})
    _no_traceback(result)
    assert result.returncode == 0, result.stderr
    assert b"\x1b" not in result.stdout
    assert b"\x1b" not in result.stderr
    if "--json" in rest:
        json.loads(result.stdout)


def test_in_process_the_escapes_apply_to_the_command_only(odd_journal: Path) -> None:
    """A program running ``main`` itself on a latin-1 stdout: escaped output, its stream's errors set back."""
    from click.testing import CliRunner  # noqa: PLC0415

    from cogfabric.cli import main  # noqa: PLC0415

    seen: list[str] = []

    class _Runner(CliRunner):
        def isolation(self, *args: object, **kwargs: object) -> Any:
            @contextlib.contextmanager
            def wrapped() -> Iterator[Any]:
                with super(_Runner, self).isolation(*args, **kwargs) as streams:  # type: ignore[arg-type]
                    yield streams
                    seen.append(sys.stdout.errors or "")

            return wrapped()

    result = _Runner(charset="latin-1").invoke(main, ["replay", str(odd_journal)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 0
    assert "\\U0001f600" in result.output
    assert seen == ["strict"]
