"""Under ``-X warn_default_encoding -W error`` (PEP 597) cogfabric reads no text in the locale's encoding.

A strict host runs its suite with ``EncodingWarning`` made an error: a second process that
opened a journal another one held got ``EncodingWarning: 'encoding' argument not
specified`` from reading ``/proc/locks``, not ``JournalLockedError``; ``cogfabric bench``
read ``/proc`` and ran git the same way.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cogfabric.store import Journal

_STRICT = ("-X", "dev", "-X", "warn_default_encoding", "-W", "error")
_SOURCES = Path(__file__).resolve().parent.parent / "src" / "cogfabric"

_OPEN_HELD = """
import sys
from cogfabric.store import Journal, JournalLockedError
try:
    Journal.open(sys.argv[1])
except JournalLockedError as exc:
    print(type(exc).__name__, exc)
"""

_BENCH_MACHINE = """
from cogfabric import _bench
machine = _bench._machine()
print(sorted(machine), _bench._status_bytes("VmRSS") > 0)
_bench._reset_peak()
"""


def _strict(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, *_STRICT, "-c", code, *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=60,
        check=False,
    )


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="Linux's /proc/locks")
def test_a_journal_another_process_holds_is_refused_as_locked_under_warn_default_encoding(
    tmp_path: Path,
) -> None:
    with Journal.open(tmp_path / "j"):
        done = _strict(_OPEN_HELD, str(tmp_path / "j"))

    assert done.stderr == ""  # was: EncodingWarning, raised from _only_readers_hold
    assert done.returncode == 0
    assert done.stdout.startswith("JournalLockedError ")
    assert "held by another writer" in done.stdout


def test_the_bench_machine_description_reads_proc_and_git_under_warn_default_encoding() -> None:
    done = _strict(_BENCH_MACHINE)

    assert done.stderr == ""
    assert done.returncode == 0


def _calls_without_encoding(tree: ast.AST) -> list[int]:
    """Lines of ``.read_text()``/``.write_text()`` and ``subprocess.run(text=True)`` without ``encoding=``."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        keywords = {keyword.arg for keyword in node.keywords}
        texts = node.func.attr in {"read_text", "write_text"} or (
            node.func.attr in {"run", "Popen", "check_output"} and "text" in keywords
        )
        if texts and "encoding" not in keywords:
            lines.append(node.lineno)
    return lines


def test_no_product_source_reads_or_writes_text_in_the_locale_encoding() -> None:
    # actors/, events/ and store/ are symbolic links in src/cogfabric: walked through
    sources = [Path(top, name) for top, _, names in os.walk(_SOURCES, followlinks=True) for name in names]
    scanned = sorted(path for path in sources if path.suffix == ".py")
    found = {
        str(path.relative_to(_SOURCES)): lines
        for path in scanned
        if (lines := _calls_without_encoding(ast.parse(path.read_text(encoding="utf-8"))))
    }

    assert any(path.name == "_lmdb.py" for path in scanned)
    assert found == {}


_EMBEDDED = """
import gc, http.server, json, sys, threading
from pathlib import Path
from click.testing import CliRunner
import cogfabric as cf
from cogfabric.cli import main


class Model(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        failing = body["messages"][0]["content"].endswith("fail")
        data = b'{"error": "busy"}' if failing else b'{"choices": [{"message": {"content": "ok"}}]}'
        self.send_response(503 if failing else 200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class Chat:
    def on_message(self, ctx, message):
        try:
            return ctx.llm.turn(message.payload, message.topic)
        except cf.ProviderError:
            return "failed"


class Holder:
    def __init__(self, path):
        self.rt = cf.Runtime.open(path)

    def __del__(self):
        self.rt.close()


def dropped(path):
    cf.Runtime.open(path).spawn("left")


path = Path(sys.argv[1])
httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Model)
serving = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01})
serving.start()
url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
for base in (url, "http://127.0.0.1:9/v1"):  # the second refuses the connection
    model = cf.OpenAICompatibleProvider({"base_url": base, "model": "m", "timeout": 5})
    with cf.Runtime.open(path / "j", behaviors={"chat": Chat}, llm_provider=model) as rt:
        if not rt.agents():
            rt.spawn("bot", behavior="chat")
        session = rt.memory.create_session("u1", agent_id="bot")
        print([rt.bus.request("app", "bot", text, session, timeout=5).payload for text in ("hi", "fail")])
httpd.shutdown()
httpd.server_close()
serving.join()
for command in ("inspect", "verify", "export"):
    print(command, CliRunner().invoke(main, [command, str(path / "j")], catch_exceptions=False).exit_code)
Holder(path / "h")
dropped(path / "d")
gc.collect()
"""


# README, Testing your agents, Leaks: a strict suite gets no warning from an embedding run (a
# provider failure, a refused connection, close() from a finalizer, a runtime dropped unclosed).
def test_an_embedding_run_under_python_x_dev_w_error_warns_of_nothing(tmp_path: Path) -> None:
    done = _strict(_EMBEDDED, str(tmp_path))

    assert done.stderr == ""
    assert done.returncode == 0
    assert done.stdout.splitlines() == [
        "['ok', 'failed']",
        "['failed', 'failed']",
        *(f"{command} 0" for command in ("inspect", "verify", "export")),
    ]
