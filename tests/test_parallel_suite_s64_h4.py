"""The suite under ``pytest -n auto``: a worker's reports reach the controller, lone surrogates and all.

Tests hand the runtime text UTF-8 cannot encode (``"\\udc80"``), and it comes back in their
captured logs, assertion messages and skip reasons. A worker sends each report through
execnet, which refuses such text: the whole run ended with an INTERNALERROR. conftest.py's
``pytest_report_to_serializable`` wrapper escapes it. These tests call that hook as the
worker does (``config.hook``, then ``execnet.dumps``) on reports of each kind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

execnet = pytest.importorskip("execnet")  # pytest-xdist's, in the dev extra

LONE = "\udc80"  # a byte that is not UTF-8, as surrogateescape decodes it
SHOWN = "\\udc80"


def _sent(config: pytest.Config, report: pytest.TestReport | pytest.CollectReport) -> dict[str, Any]:
    """``report`` as a worker sends it (xdist/remote.py) and the controller receives it."""
    data = config.hook.pytest_report_to_serializable(config=config, report=report)
    received: dict[str, Any] = execnet.loads(execnet.dumps(data))
    return received


def _received(config: pytest.Config, report: pytest.TestReport | pytest.CollectReport) -> Any:
    return config.hook.pytest_report_from_serializable(config=config, data=_sent(config, report))


def _failure(message: str) -> Any:
    """A failed assertion's representation, as a report's ``longrepr`` holds it."""
    with pytest.raises(AssertionError) as raised:
        raise AssertionError(message)
    return raised.getrepr(style="long")


def _report(when: str, outcome: str, longrepr: object, sections: list[tuple[str, str]]) -> pytest.TestReport:
    return pytest.TestReport(
        nodeid="tests/test_x.py::test_x",
        location=("tests/test_x.py", 1, "test_x"),
        keywords={"test_x": 1},
        outcome=outcome,  # type: ignore[arg-type]
        longrepr=longrepr,  # type: ignore[arg-type]
        when=when,  # type: ignore[arg-type]
        sections=sections,
    )


@pytest.mark.parametrize("when", ["setup", "call", "teardown"])
def test_a_failure_whose_message_and_log_hold_a_lone_surrogate_reaches_the_controller_escaped(
    request: pytest.FixtureRequest, when: str
) -> None:
    report = _report(
        when,
        "failed",
        _failure(f"user text {LONE}"),
        [(f"Captured log {when}", f"WARNING x:y.py:1 {LONE}\n")],
    )

    received = _received(request.config, report)

    assert (received.when, received.outcome) == (when, "failed")
    assert f"AssertionError: user text {SHOWN}" in received.longreprtext
    assert received.sections == [(f"Captured log {when}", f"WARNING x:y.py:1 {SHOWN}\n")]
    assert LONE not in received.longreprtext


def test_a_skip_reason_and_a_passing_tests_output_with_a_lone_surrogate_reach_the_controller(
    request: pytest.FixtureRequest,
) -> None:
    skipped = _report("call", "skipped", ("tests/test_x.py", 3, f"Skipped: {LONE}"), [])
    passed = _report("call", "passed", None, [("Captured stdout call", f"out {LONE}\n")])

    assert _received(request.config, skipped).longrepr == ("tests/test_x.py", 3, f"Skipped: {SHOWN}")
    assert _received(request.config, passed).sections == [("Captured stdout call", f"out {SHOWN}\n")]


def test_a_collection_error_with_a_lone_surrogate_reaches_the_controller(
    request: pytest.FixtureRequest,
) -> None:
    report = pytest.CollectReport("tests/test_x.py", "failed", f"ImportError: {LONE}", [])

    received = _received(request.config, report)

    assert (received.nodeid, received.outcome, received.longrepr) == (
        "tests/test_x.py",
        "failed",
        f"ImportError: {SHOWN}",
    )


def test_a_report_whose_text_utf8_encodes_is_sent_as_pytest_makes_it(request: pytest.FixtureRequest) -> None:
    report = _report("call", "failed", _failure("été \\udc80 ✓"), [("Captured stderr call", "été\n")])

    made = {"$report_type": "TestReport", **report._to_json()}  # pytest's own hook, unwrapped

    assert _sent(request.config, report) == execnet.loads(execnet.dumps(made))


_TINY = """
import logging

import pytest


def test_logs():
    logging.getLogger("x").warning("bad \\udc80")
    print("out \\udc80")


def test_fails():
    assert "\\udc80" == "x"


def test_skips():
    pytest.skip("skip \\udc80")
"""


@pytest.mark.slow  # two interpreters start: some seconds on a busy machine
def test_a_worker_run_of_tests_that_log_a_lone_surrogate_ends_with_their_outcomes(tmp_path: Path) -> None:
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_tiny.py").write_text(_TINY, encoding="utf-8")

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "1", "test_tiny.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="backslashreplace",
        timeout=120,
        check=False,
    )

    assert "INTERNALERROR" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 1 passed, 1 skipped" in done.stdout
    assert "AssertionError: assert '\\udc80' == 'x'" in done.stdout


_FIRST_IN_ITS_WORKER = """
from hypothesis import given, strategies as st
from hypothesis.internal import charmap


def test_hypothesis_was_set_up_before_the_first_test():
    assert charmap._charmap is not None  # its Unicode table: built in the first draw, else


@given(st.text(max_size=2))
def test_draws(text):
    assert isinstance(text, str)
"""


@pytest.mark.slow  # an interpreter starts, with a cold Hypothesis cache: some seconds
def test_hypothesis_is_set_up_before_a_workers_first_test_not_in_its_timed_draw(tmp_path: Path) -> None:
    # With no .hypothesis (a fresh clone), the first draw of a process builds Hypothesis's
    # tables, 3 to 8 s here: a test first in its worker failed its health check so.
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_first.py").write_text(_FIRST_IN_ITS_WORKER, encoding="utf-8")

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_first.py"],
        cwd=tmp_path,
        env={**os.environ, "HYPOTHESIS_STORAGE_DIRECTORY": str(tmp_path / "cold")},
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
