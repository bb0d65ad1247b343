"""Jupyter: an Analysis displays as the HTML report's summary (``_repr_html_``), on real captures."""

from __future__ import annotations

import html
from html.parser import HTMLParser
from pathlib import Path

from aoti_trace.pipeline import analyze

CASES = Path(__file__).resolve().parents[2] / "fixtures" / "cases"


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):  # type: ignore[no-untyped-def]
        self.tags.append(tag)


def test_repr_html_is_the_summary_of_a_failing_capture():
    a = analyze([CASES / "dtype_mismatch_checked"])
    out = a._repr_html_()
    p = _Tags()
    p.feed(out)
    assert not {"html", "head", "body", "style", "script", "meta", "img"} & set(p.tags)  # a fragment, nothing loaded
    assert html.escape(a.primary.title) in out and html.escape(a.primary.message.strip()) in out
    assert a.primary.rerun and html.escape(a.primary.rerun) in out
    assert out.count("<tr>") == len(a.findings) + 1
    assert "1 error" in out or "errors" in out


def test_repr_html_of_a_clean_run():
    a = analyze([CASES / "ok_compile_load_run"])
    out = a._repr_html_()
    assert "no problem found" in out and "<table" not in out
