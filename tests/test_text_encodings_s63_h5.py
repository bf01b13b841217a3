"""The tests, bench/ and the sources name the encoding of every text they read, write or run.

A test that wrote a file with ``write_text(text)`` and read it back, decoded a child's
output with ``subprocess.run(..., text=True)`` or logged to a ``logging.FileHandler`` used
the locale's encoding: under a non-UTF-8 locale (Windows, an old system's ``LANG``) the
README, a journal path or a child's output outside ASCII was misread or refused, and under
``-X warn_default_encoding -W error`` each such call raised ``EncodingWarning`` (about 200
calls in the tests, a few in bench/). This walks the code's syntax, not the running code:
what it cannot see, a ``Path.open()`` without a mode (``Runtime.open()`` looks the same) or
a call built from ``**kwargs``, it leaves alone; ``gzip``, ``bz2`` and ``lzma``'s ``open``
read and write bytes unless their mode has a ``t``, as ``tempfile``'s files do unless their
mode lacks a ``b`` (``NamedTemporaryFile("w")``); ``os.fdopen`` is ``open``'s twin;
``tarfile`` and ``zipfile`` open archives, of bytes. So that it does not pass for want of
code, each folder's walk must see the text calls there that name their encoding.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import textwrap
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parent.parent
_SUBPROCESS = {"run", "Popen", "check_output", "check_call", "call"}
_LOG_FILES = {"FileHandler", "WatchedFileHandler", "RotatingFileHandler", "TimedRotatingFileHandler"}
_MODE = re.compile(r"[rwaxbt+]+")
_BINARY = {"gzip", "bz2", "lzma"}  # their open's mode is "rb" if not given, text only with a "t"
_ARCHIVES = {"tarfile", "zipfile"}  # their open's mode ("w", "r:gz") is the archive's: of bytes
_TEMPORARY = {"NamedTemporaryFile": 0, "TemporaryFile": 0, "SpooledTemporaryFile": 1}
"""tempfile's files, each at its mode's position: binary ("w+b") unless it is given; its encoding two on."""
_CALLS = re.compile(r"(open|_text|run|Popen|check_output|check_call|call|TemporaryFile)\(")  # a program's?
_FIELD = re.compile(r"\{(\w+)(![rsa])?(:[^{}]*)?\}")


def _mode(node: ast.Call, position: int, default: str = "r") -> str | None:
    """The call's mode if it is a literal, ``default`` if not given, None if it is computed."""
    given = node.args[position] if len(node.args) > position else None
    for keyword in node.keywords:
        if keyword.arg == "mode":
            given = keyword.value
    if given is None:
        return default
    return given.value if isinstance(given, ast.Constant) and isinstance(given.value, str) else None


def _run_as_text(node: ast.Call, name: str) -> str | None:
    """``run(text=...)`` if ``node``, a subprocess call, decodes its streams as text."""
    for keyword in node.keywords:
        if keyword.arg in {"text", "universal_newlines"} and not (
            isinstance(keyword.value, ast.Constant) and keyword.value.value is False
        ):
            return f"{name}({keyword.arg}=...)"
    return None


def _opened_as_text(node: ast.Call, func: ast.expr, name: str) -> str | None:
    """``open('w')`` if ``node``, an ``open`` or ``fdopen`` call, opens a file as text; None if not."""
    module = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else None
    if isinstance(func, ast.Name) or module in {"io", "codecs"} or name == "fdopen":  # os.fdopen: open's twin
        if len(node.args) > (2 if module == "codecs" else 3):  # open(file, mode, buffering, encoding),
            return None  # codecs.open(file, mode, encoding): named where it may be
        mode = _mode(node, 1)  # open(file, mode)
    elif module in _BINARY:
        mode = _mode(node, 1) or "rb"  # gzip.open(file, mode): bytes unless its mode has a t
        return f"open({mode!r})" if "t" in mode else None
    elif module in _ARCHIVES:
        return None
    elif node.args and isinstance(node.args[0], ast.Constant) and _MODE.fullmatch(str(node.args[0].value)):
        if len(node.args) > 2:  # a Path's open(mode, buffering, encoding): named where it may be
            return None
        mode = _mode(node, 0)  # a Path's open(mode); Runtime.open(path) and the like take no mode
    elif not node.args and any(keyword.arg == "mode" for keyword in node.keywords):
        mode = _mode(node, 0)  # a Path's open(mode=...); ZipFile.open(name, mode=...) reads bytes
    else:
        return None
    return None if mode is not None and "b" in mode else f"{name}({mode!r})"


def _temporary_as_text(node: ast.Call, name: str) -> str | None:
    """``NamedTemporaryFile('w')`` if ``node``, a tempfile call, opens its file as text."""
    position = _TEMPORARY[name]
    if len(node.args) > position + 2:  # (mode, buffering, encoding): named where it may be
        return None
    mode = _mode(node, position, "w+b")
    return None if mode is not None and "b" in mode else f"{name}({mode!r})"


def _locale_encoded(node: ast.Call) -> str | None:
    """What ``node`` does in the locale's encoding (``"read_text"``, ``"open('w')"``), or None."""
    keywords = {keyword.arg for keyword in node.keywords}
    if "encoding" in keywords or None in keywords:  # named, or maybe in a **mapping
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    # read_text(encoding) and write_text(data, encoding): an encoding may come positionally
    if (name == "read_text" and not node.args) or (name == "write_text" and len(node.args) < 2):
        return name
    if name in _SUBPROCESS:
        return _run_as_text(node, name)
    if name in _LOG_FILES or (name == "basicConfig" and "filename" in keywords):
        return name  # logging opens the file as text
    if name in _TEMPORARY:
        return _temporary_as_text(node, name)
    return _opened_as_text(node, func, name) if name in {"open", "fdopen"} else None


def _without_encoding(source: str, start: int = 0, tree: ast.Module | None = None) -> list[str]:
    """The lines of ``source``'s text calls in the locale's encoding, its strings' programs' too.

    A string that names such a call and parses as Python is a program (a child's ``-c``
    code): its lines count from the string's first; a ``str.format`` template's ``{name!r}``
    fields are read as names. ``tree``: ``source`` parsed already.
    """
    found = []
    for node in ast.walk(tree or ast.parse(source)):
        if type(node) is ast.Call and (what := _locale_encoded(node)):
            found.append(f"{start + node.lineno}: {what}")
        elif type(node) is ast.Constant and type(node.value) is str and _CALLS.search(node.value):
            code = textwrap.dedent(node.value)
            for attempt in (code, _FIELD.sub(r"_\1", code).replace("{{", "{").replace("}}", "}")):
                with contextlib.suppress(SyntaxError, ValueError):  # prose, or a surrogate
                    found += _without_encoding(attempt, start + node.lineno - 1)
                    break
    return found


def _groups() -> list[str]:
    """The folders walked, each a test of its own (a few seconds each): tests/ is its own files only."""
    tests = sorted(f"tests/{path.name}" for path in (_ROOT / "tests").iterdir() if any(path.glob("*.py")))
    return ["src", "bench", "tests", *tests]


def _python_files(group: str) -> list[Path]:
    where = _ROOT / group
    if group == "tests":
        walked = list(where.glob("*.py"))
    else:  # actors/, events/ and store/ are symbolic links in src/cogfabric: walked through
        walked = [Path(top, name) for top, _, names in os.walk(where, followlinks=True) for name in names]
    # not this file: the strings of its last two tests are programs that hold such calls
    return sorted(path for path in walked if path.suffix == ".py" and path != Path(__file__).resolve())


def test_the_groups_hold_every_python_file_of_the_tests() -> None:
    grouped = {path for group in _groups() if group.startswith("tests") for path in _python_files(group)}

    assert grouped == set((_ROOT / "tests").rglob("*.py")) - {Path(__file__).resolve()}
    assert {"tests/actors", "tests/store"} <= set(_groups())


@pytest.mark.parametrize("group", _groups())
def test_no_test_bench_script_or_source_reads_writes_or_runs_text_in_the_locale_encoding(group: str) -> None:
    scanned = _python_files(group)
    found, seen = {}, 0
    for path in scanned:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        if lines := _without_encoding(text, tree=tree):
            found[str(path.relative_to(_ROOT))] = lines
        seen += _named_text_calls(tree)

    assert scanned
    if group == "src":  # actors/, events/ and store/ followed through src/cogfabric's links
        packages = {path.relative_to(_ROOT / group / "cogfabric").parts[0] for path in scanned}
        assert packages >= {"actors", "events", "store"}
    assert seen >= _LEAST_SEEN.get(group, 0), seen  # a walk that reads the code sees its text calls
    assert found == {}


def _named_text_calls(tree: ast.Module) -> int:
    """How many of ``tree``'s calls the check reads as text calls that name their encoding."""
    calls = (node for node in ast.walk(tree) if type(node) is ast.Call)
    return sum(
        _locale_encoded(
            ast.Call(
                node.func, node.args, [keyword for keyword in node.keywords if keyword.arg != "encoding"]
            )
        )
        is not None
        for node in calls
        if any(keyword.arg == "encoding" for keyword in node.keywords)
    )


_LEAST_SEEN = {"src": 5, "bench": 5, "tests": 100}
"""The fewest text calls naming their encoding that a folder holds (at 6cd2275: 7, 8 and 166)."""


@pytest.mark.parametrize(
    ("code", "found"),
    [
        ("open(p)", ["1: open('r')"]),
        ("open(p, 'w')", ["1: open('w')"]),
        ("io.open(p, mode='a')", ["1: open('a')"]),
        ("open(p, mode)", ["1: open(None)"]),
        ("path.open('w')", ["1: open('w')"]),
        ("path.open(mode='r')", ["1: open('r')"]),
        ("open(p, 'r', -1)", ["1: open('r')"]),
        ("gzip.open(p, 'wt')", ["1: open('wt')"]),
        ("bz2.open(p, mode='rt')", ["1: open('rt')"]),
        ("p.read_text()", ["1: read_text"]),
        ("p.write_text(s)", ["1: write_text"]),
        ("subprocess.run(c, text=True)", ["1: run(text=...)"]),
        ("subprocess.Popen(c, universal_newlines=flag)", ["1: Popen(universal_newlines=...)"]),
        ("check_output(c, text=True)", ["1: check_output(text=...)"]),
        ("logging.FileHandler(p)", ["1: FileHandler"]),
        ("logging.basicConfig(filename=p)", ["1: basicConfig"]),
        ("x = 1\nCHILD = '''\nimport sys\nprint(open(sys.argv[1]).read())\n'''", ["4: open('r')"]),
        ("CHILD = '''\nopen({path!r}).read()\n'''", ["2: open('r')"]),
        ("CODE = 'import sys; print(open(sys.argv[1]).read())'", ["1: open('r')"]),
        # (s64 h2) os.fdopen is open's twin; tempfile's files are text once their mode lacks a b
        ("os.fdopen(fd, 'w')", ["1: fdopen('w')"]),
        ("codecs.open(p, mode='w')", ["1: open('w')"]),
        ("os.fdopen(fd)", ["1: fdopen('r')"]),
        ("fdopen(fd, mode='a')", ["1: fdopen('a')"]),
        ("os.fdopen(fd, mode)", ["1: fdopen(None)"]),
        ("tempfile.NamedTemporaryFile('w')", ["1: NamedTemporaryFile('w')"]),
        ("tempfile.NamedTemporaryFile(mode='w+', delete=False)", ["1: NamedTemporaryFile('w+')"]),
        ("NamedTemporaryFile('w', -1)", ["1: NamedTemporaryFile('w')"]),
        ("tempfile.TemporaryFile('w+')", ["1: TemporaryFile('w+')"]),
        ("tempfile.TemporaryFile(mode)", ["1: TemporaryFile(None)"]),
        ("tempfile.SpooledTemporaryFile(1024, 'w+')", ["1: SpooledTemporaryFile('w+')"]),
        ("SpooledTemporaryFile(mode='w')", ["1: SpooledTemporaryFile('w')"]),
        ("CHILD = '''\nimport os\nos.fdopen(1, 'w').write('x')\n'''", ["3: fdopen('w')"]),
        ("CHILD = '''\nimport tempfile\ntempfile.TemporaryFile('w')\n'''", ["3: TemporaryFile('w')"]),
    ],
)
def test_the_check_finds_each_text_call_without_an_encoding(code: str, found: list[str]) -> None:
    assert _without_encoding(code) == found


@pytest.mark.parametrize(
    "code",
    [
        "open(p, encoding='utf-8')",
        "open(p, 'rb')",
        "open(p, mode='wb')",
        "path.open('rb')",
        "open(p, 'r', -1, 'utf-8')",
        "io.open(p, 'w', 1, 'ascii')",
        "gzip.open(p)",
        "bz2.open(p, mode='w')",
        "lzma.open(p, 'wb')",
        "p.read_text(encoding='ascii')",
        "p.read_text('utf-8')",
        "p.write_text(s, encoding='utf-8')",
        "p.read_bytes()",
        "subprocess.run(c, text=True, encoding='utf-8')",
        "subprocess.run(c, capture_output=True)",
        "subprocess.run(c, text=False)",
        "subprocess.run(c, **options)",
        "logging.FileHandler(p, encoding='utf-8')",
        "logging.basicConfig(level=logging.INFO)",
        "Runtime.open(path)",
        "Journal.open(path, readonly=True)",
        "Runtime.open()",
        "os.open(p, os.O_RDONLY)",
        # (s64 h2) an encoding by position, binary modes, archives (of bytes whatever their mode)
        "path.open('w', -1, 'utf-8')",
        "os.fdopen(fd, 'wb')",
        "codecs.open(p, 'w', 'utf-8')",
        "os.fdopen(fd, 'w', -1, 'utf-8')",
        "os.fdopen(fd, 'w', encoding='utf-8')",
        "tempfile.NamedTemporaryFile()",
        "tempfile.NamedTemporaryFile('w+b', delete=False)",
        "tempfile.NamedTemporaryFile('w', -1, 'utf-8')",
        "tempfile.NamedTemporaryFile(mode='w', encoding='utf-8')",
        "tempfile.TemporaryFile(dir=d)",
        "tempfile.TemporaryFile(mode='rb+')",
        "tempfile.SpooledTemporaryFile(1024)",
        "tempfile.SpooledTemporaryFile(1024, 'w', -1, 'utf-8')",
        "zipfile.ZipFile(p, 'w')",
        "zipfile.ZipFile(p, mode='a')",
        "archive.open(info, mode='r')",
        "tarfile.open(p, 'w')",
        "tarfile.open(p, mode='w:gz')",
        "tarfile.open(fileobj=f, mode='r')",
        "CHILD = '''\nnot python: open(\n'''",
    ],
)
def test_the_check_passes_a_named_encoding_bytes_and_what_is_not_a_file(code: str) -> None:
    assert _without_encoding(code) == []
