"""A blank configuration means every default; str and bytes of one text agree.

``str.strip()`` drops Unicode spaces (U+3000, a no-break space) that ``bytes.strip()``
keeps and YAML refuses as a value: the same file read as str gave every default, read
as bytes an error.
"""

from __future__ import annotations

import pytest

from cogfabric import Config, InvalidConfigError
from cogfabric.config import load_llm_config, parse_config


@pytest.mark.parametrize("text", ["", "  \n", "\t\n", " \r\n", "# only a comment\n"])
def test_ascii_blanks_and_comments_alone_mean_every_default_as_str_and_bytes(text: str) -> None:
    assert parse_config(text) == Config()
    assert parse_config(text.encode()) == Config()
    assert load_llm_config(text) == load_llm_config(text.encode()) == load_llm_config("")


@pytest.mark.parametrize("text", ["\u3000", "\u00a0\n", " \u2003 "])
def test_unicode_spaces_alone_are_refused_as_str_and_as_bytes(text: str) -> None:
    for given in (text, text.encode()):
        with pytest.raises(InvalidConfigError, match="a configuration is a mapping of sections"):
            parse_config(given)
        with pytest.raises(InvalidConfigError):
            load_llm_config(given)


@pytest.mark.parametrize("text", ["\x0c", "\x0b\n", "\x0c\n# a comment\n"])
def test_a_form_feed_or_vertical_tab_is_refused_alone_as_with_a_comment(text: str) -> None:
    # YAML refuses both characters anywhere: alone they gave every default, beside a comment an error
    for given in (text, text.encode()):
        with pytest.raises(InvalidConfigError, match="control characters are not allowed"):
            parse_config(given)
