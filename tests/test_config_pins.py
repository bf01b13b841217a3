"""Loading the YAML configuration (src/cogfabric/config.py), pinned where a mutation test found it unheld.

Each test here failed under a small change of ``config.py`` (a path left out of a
message, a sequence's index off by one, a collection's end not tracked) that every
other test of the configuration let through.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cogfabric.config import MAX_CONFIG_BYTES, InvalidConfigError, load_config, parse_config

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(
    "text",
    [
        "memory:\n  max_history: 0\n",  # out of range
        "memory:\n  max_histroy: 3\n",  # an unknown key
        "runtime: {call_timeout: soon}\n",  # a wrong type
        "memory: [\n",  # malformed YAML
        "memory: {max_history: 3, max_history: 4}\n",  # a key given twice
        "x: &a 1\ny: *a\n",  # an alias
    ],
    ids=["range", "unknown key", "type", "malformed", "repeated key", "alias"],
)
def test_every_error_of_load_config_starts_with_the_path(tmp_path: Path, text: str) -> None:
    # load_config: "the message starts with the path", whatever the error. Kills:
    # load_config calling parse_config without source=
    path = tmp_path / "cogfabric.yaml"
    path.write_text(text, encoding="utf-8")

    with pytest.raises(InvalidConfigError) as raised:
        load_config(path)
    assert str(raised.value).startswith(f"{path}: ")


def test_a_config_file_refused_for_its_length_is_named_first(tmp_path: Path) -> None:
    # Kills: the "holds at most MAX_CONFIG_BYTES" message without "{where}: " in front
    path = tmp_path / "big.yaml"
    path.write_bytes(b"#" * (MAX_CONFIG_BYTES + 1))

    with pytest.raises(InvalidConfigError, match="holds at most") as raised:
        load_config(path)
    assert str(raised.value).startswith(f"{path}: ")


def test_text_utf8_cannot_encode_is_refused_naming_its_source() -> None:
    # as every other InvalidConfigError of parse_config. Kills: the surrogate check's
    # message without "{source}: " in front
    with pytest.raises(InvalidConfigError, match=r"^site\.yaml: text UTF-8 cannot encode"):
        parse_config("llm: {model: x\udc80y}\n", source="site.yaml")


def test_a_repeated_key_inside_a_sequence_names_the_items_index() -> None:
    # "the message names the key": the second item of a list is [1]. Kills: the
    # sequence's index not counted (every item named [0])
    text = "llm: {extra: {items: [{a: 1}, {b: 1}, {a: 1, a: 2}]}}\n"

    with pytest.raises(InvalidConfigError, match=r"at \$\.llm\.extra\.items\[2\]\.a \(line 1\)$"):
        parse_config(text)


def test_a_key_repeated_after_a_list_value_is_still_refused() -> None:
    # a key given twice is refused, not dropped, wherever it is. Kills: only a
    # mapping's end closing a collection (the list stays open, and the mapping's next
    # keys are taken for its items)
    text = "llm:\n  extra:\n    tags: [a, b]\n    tags: [c]\n"

    with pytest.raises(InvalidConfigError, match=r"'tags' is given twice .* \$\.llm\.extra\.tags \(line 4\)"):
        parse_config(text)
    with pytest.raises(InvalidConfigError, match=r"given twice .* at \$\.memory\.max_history"):
        parse_config("llm:\n  extra: {tags: [a, b]}\nmemory: {max_history: 3, max_history: 4}\n")
