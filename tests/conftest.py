from __future__ import annotations

import http.server
import threading
import warnings
from typing import TYPE_CHECKING

import lmdb
import pykka
import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.errors import NonInteractiveExampleWarning

# Hypothesis's explain phase traces every line (sys.settrace) of each run that shrinks a
# failure: the model-based test's shrinking then outlasted faulthandler_timeout, whose
# dump of the running threads crashed the interpreter (SIGSEGV) in CI before the failing
# case was printed. Without it a failure is shrunk untraced and reported as usual.
settings.register_profile("cogfabric", phases=[p for p in Phase if p is not Phase.explain])
settings.load_profile("cogfabric")

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterator
    from pathlib import Path


def _escaped(value: object) -> object:
    """``value`` with each lone surrogate in its text written as a backslash escape."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return value.encode(errors="backslashreplace").decode()
        return value
    if isinstance(value, dict):
        return {key: _escaped(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_escaped(item) for item in value)
    return value


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable() -> Generator[None, object, object]:
    """A report as pytest-xdist's worker sends it, its text with lone surrogates escaped.

    Several tests hand the runtime text that UTF-8 cannot encode (a user's ``"\\udc80"``)
    and its log lines carry it: execnet refuses such text, and the whole run ended
    with an internal error.
    """
    data = yield
    return _escaped(data)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Hypothesis's one-off set-up in this process, done before any test's health check times it.

    A process's first draw builds Hypothesis's Unicode table and reads the constants of the
    project's modules, cached in ``.hypothesis`` (which a fresh clone has not): 3 to 8 s on a
    busy 2-core machine, counted against the first test that draws. Under ``-n auto`` each
    worker has a first test of its own: test_codec's mapping test, first in its worker, failed
    "Input generation is slow" (FailedHealthCheck). Not done in a run without Hypothesis tests,
    nor in xdist's controller, which collects nothing.
    """
    if any(getattr(getattr(item, "obj", None), "is_hypothesis_test", False) for item in session.items):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NonInteractiveExampleWarning)
            st.text().example()


@pytest.fixture(autouse=True)
def _stop_all_actors() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all(block=True, timeout=10)


@pytest.fixture(autouse=True)
def _no_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands' tables at their width for output that is no terminal, whatever the shell exported."""
    monkeypatch.delenv("COLUMNS", raising=False)


def _damage_page(directory: Path, marker: bytes) -> None:
    env = lmdb.open(str(directory), readonly=True, max_dbs=8)
    page_size = env.stat()["psize"]
    env.close()
    data = bytearray((directory / "data.mdb").read_bytes())
    page = data.index(marker) // page_size * page_size  # the leaf page that holds ``marker``
    data[page + 10] ^= 0xFF  # its page flags: LMDB finds a page of the wrong type
    (directory / "data.mdb").write_bytes(bytes(data))


@pytest.fixture
def damage_page() -> Callable[[Path, bytes], None]:
    """``damage_page(directory, marker)`` breaks the LMDB page that holds ``marker`` in
    ``directory/data.mdb``, as a damaged disk would: LMDB itself refuses to read it."""
    return _damage_page


def _break_link(directory: Path, seq: int) -> None:
    env = lmdb.open(str(directory), max_dbs=8)
    with env.begin(write=True, db=env.open_db(b"events")) as txn:
        value = bytearray(txn.get(seq.to_bytes(8, "big")) or b"")
        value[-1] ^= 0x01
        txn.put(seq.to_bytes(8, "big"), bytes(value))
    env.close()


@pytest.fixture
def break_link() -> Callable[[Path, int], None]:
    """``break_link(directory, seq)`` changes the last byte (its chain link's) of record
    ``seq`` in the journal at ``directory``, with the plain lmdb package."""
    return _break_link


@pytest.fixture
def serve_http() -> Iterator[Callable[..., str]]:
    """``serve_http(handler, release=None)`` serves ``handler`` (a ``BaseHTTPRequestHandler``
    class) on 127.0.0.1 for the test and returns its ``/v1`` URL. At the test's end
    ``release`` is set (for handlers that hold an answer until it is), then the server stops."""
    servers: list[tuple[http.server.ThreadingHTTPServer, threading.Thread, threading.Event | None]] = []

    def serve(
        handler: type[http.server.BaseHTTPRequestHandler], release: threading.Event | None = None
    ) -> str:
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        # shutdown() returns once serve_forever's loop next looks at its flag, every
        # poll_interval: at the default 0.5 s each test's teardown waited about that long.
        thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        thread.start()
        servers.append((httpd, thread, release))
        return f"http://127.0.0.1:{httpd.server_address[1]}/v1"

    yield serve
    for httpd, thread, release in servers:
        if release is not None:
            release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)
