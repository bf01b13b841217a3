"""A retriever's snippet whose source or content is no str is refused (coverage audit, s53 h3).

``_checked_snippet`` documents a TypeError for it; the suite only checked a bad score and
a non-Snippet result. Without the check, ``[kb] b'x'`` (the repr of bytes) reached the prompt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import cogfabric as cf

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


@pytest.mark.parametrize(
    "bad",
    [cf.Snippet("kb", b"x", 0.9), cf.Snippet(b"kb", "x", 0.9)],  # type: ignore[arg-type]
    ids=["bytes content", "bytes source"],
)
def test_a_snippet_whose_source_or_content_is_no_str_skips_its_retriever(
    tmp_path: Path, bad: cf.Snippet
) -> None:
    class Bad:
        def retrieve(self, query: str) -> Sequence[cf.Snippet]:  # noqa: ARG002
            return [bad]

    class Good:
        def retrieve(self, query: str) -> Sequence[cf.Snippet]:
            return [cf.Snippet("web", f"about {query}", 0.9)]

    with cf.Runtime.open(tmp_path / "j", clock=cf.FakeClock()) as rt:
        rt.memory.set_retrievers([Bad(), Good()])
        session = rt.memory.create_session("u")
        rt.memory.add_message(session, "user", "cats")

        first = rt.memory.build_prompt_messages(session)[0]

    assert first.content == "Relevant context:\n[web] about cats\n"
