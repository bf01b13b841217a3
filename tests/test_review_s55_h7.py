"""Review of session 55's commits (helper h7).

- a provider's error whose note (``add_note``) or exception group member quotes
  ``config.llm.api_key`` printed the key in every traceback of the ``ProviderError``
  (the log, the requester's ``IpcHandlerError``): the scrub walked only ``__cause__``
  and ``__context__``, and text fields, not the notes a traceback prints;
- ``simulate`` given a ``--journal`` it cannot look into (a name too long) said "cannot
  write the output" instead of what was wrong with the journal's path (its look for a
  continued journal, on a terminal or not, raised before the open could say it).
"""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

import cogfabric.cli
from cogfabric.actors import LLMClient, ProviderError
from cogfabric.cli import main

if TYPE_CHECKING:
    from pathlib import Path

KEY = "sk-live-Qw7Er4Ty1Ui8Op5As2Df9Gh6Jk3"


def _printed(error: BaseException) -> str:
    return "".join(traceback.format_exception(error))


class _Failing:
    name = "vendor"

    def __init__(self, error: Exception) -> None:
        self.error = error

    def generate(self, prompt: str, **params: Any) -> str:  # noqa: ARG002
        raise self.error


def _noted() -> Exception:
    error = RuntimeError("401 Unauthorized")
    error.add_note(f"sent: Authorization: Bearer {KEY}")
    return error


def _grouped() -> Exception:
    member = RuntimeError("the call failed")
    member.__cause__ = ValueError(f"Incorrect API key provided: {KEY}")
    return ExceptionGroup("unhandled errors in a TaskGroup", [member])


def _with_body() -> Exception:
    error = RuntimeError("401 Unauthorized")
    error.body = {"error": {"message": f"Incorrect API key provided: {KEY}", "code": 401}}  # type: ignore[attr-defined]
    return error


@pytest.mark.parametrize("make", [_noted, _grouped, _with_body], ids=["note", "group-member", "body"])
def test_a_key_in_what_a_traceback_prints_or_a_field_holds_is_masked(make: Any) -> None:
    client = LLMClient(_Failing(make()), {"api_key": KEY})

    with pytest.raises(ProviderError) as caught:
        client.generate("hello")

    assert KEY not in _printed(caught.value)
    cause = caught.value.__cause__
    if cause is not None:  # chained only scrubbed: a handler reading its fields finds no key
        assert KEY not in repr(vars(cause))


def test_a_note_without_the_key_is_kept_as_it_was() -> None:
    error = RuntimeError("429 Too Many Requests")
    error.add_note("retry after 2 s")
    client = LLMClient(_Failing(error), {"api_key": KEY})

    with pytest.raises(ProviderError) as caught:
        client.generate("hello")

    assert caught.value.__cause__ is error
    assert error.__notes__ == ["retry after 2 s"]


@pytest.mark.parametrize("terminal", [True, False])
def test_simulate_names_a_journal_path_it_cannot_reach(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, terminal: bool
) -> None:
    monkeypatch.setattr(cogfabric.cli, "_stderr_is_terminal", lambda: terminal)
    path = tmp_path / ("x" * 300)  # longer than a name can be: Path.exists raises

    result = CliRunner().invoke(main, ["simulate", "--agents", "2", "--turns", "1", "--journal", str(path)])

    assert result.exit_code == 2, result.output
    assert "cannot write the output" not in result.stderr
    assert "cannot reach its data file" in result.stderr
