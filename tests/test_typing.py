"""The published types, as a user's strict type checker sees them (cogfabric ships ``py.typed``).

One ``mypy --strict`` run over small user programs written from README and the
docstrings: the correct ones must pass, the wrong ones must be refused for the
reason given. mypy comes with the ``dev`` extra.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

README = Path(__file__).resolve().parent.parent / "README.md"

CORRECT = {
    "provider_needs_generate_only": """
        from typing import Any

        import cogfabric
        from cogfabric import LLMClient, LLMConfig, OpenAICompatibleProvider, Runtime


        class Echo:
            def generate(self, prompt: str, **params: Any) -> str:
                return "echo: " + prompt


        class Named:
            @property
            def name(self) -> str:
                return "named"

            def generate(self, prompt: str, **params: Any) -> str:
                return prompt


        client = LLMClient(Echo(), {"max_prompt_length": 10})
        LLMClient(Named(), LLMConfig(max_prompt_length=10))
        OpenAICompatibleProvider({"model": "m", "base_url": "http://127.0.0.1:1/v1"})
        with Runtime.open(None, llm_provider=Echo()) as runtime:
            runtime.llm(Named())
        text: str = client.generate("hi")
        error: TypeError = cogfabric.SpawnSpecTypeError("x")
    """,
    "subpackages_after_a_bare_import": """
        import cogfabric

        config: cogfabric.config.Config = cogfabric.config.parse_config("journal: {durability: batch}")
        layer: cogfabric.events.ContextLayer = cogfabric.events.ContextLayer.IPC
    """,
}

WRONG = {
    "misspelt_root_name": ("import cogfabric\n\ncogfabric.Journl\n", 'Module has no attribute "Journl"'),
    "subpackage_function_misused": (
        'import cogfabric\n\nn: int = cogfabric.config.parse_config("{}")\n',
        'Incompatible types in assignment (expression has type "Config", variable has type "int")',
    ),
}


def _readme_block(heading: str) -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, heading
    return match.group(1)


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """Each program's mypy errors, by name, from one strict run."""
    folder = tmp_path_factory.mktemp("typed")
    programs = {name: textwrap.dedent(code) for name, code in CORRECT.items()}
    programs.update({name: code for name, (code, _) in WRONG.items()})
    programs["readme_journal_in_20_lines"] = _readme_block("## The journal in 20 lines")
    programs["readme_checkpoint"] = _readme_block("A checkpoint outlives its agent")
    for name, code in programs.items():
        (folder / f"{name}.py").write_text(code, encoding="utf-8")
    stdout, stderr, _ = mypy_api.run(
        [
            "--strict",
            "--python-version",
            "3.11",
            "--cache-dir",
            str(folder / ".mypy_cache"),
            "--no-error-summary",
            "--hide-error-context",
            *(str(folder / f"{name}.py") for name in programs),
        ]
    )
    assert not stderr, stderr
    errors: dict[str, list[str]] = {name: [] for name in programs}
    for line in stdout.splitlines():
        file, _, rest = line.partition(":")
        errors[Path(file).stem].append(rest)
    return errors


@pytest.mark.parametrize("name", [*CORRECT, "readme_journal_in_20_lines", "readme_checkpoint"])
def test_a_correct_documented_program_passes_strict_type_checking(
    checked: dict[str, list[str]], name: str
) -> None:
    assert checked[name] == []


@pytest.mark.parametrize("name", list(WRONG))
def test_a_wrong_program_is_refused_for_its_mistake(checked: dict[str, list[str]], name: str) -> None:
    want = WRONG[name][1]
    assert any(want in error for error in checked[name]), checked[name]
