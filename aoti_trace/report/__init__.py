"""Report formats. ``render(analysis, fmt)`` returns the report as a string; each format is a pure function
of the :class:`~aoti_trace.analysis.Analysis` and lives in its own module."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aoti_trace.analysis import Analysis


def render(analysis: Analysis, fmt: str, *, color: bool = False) -> str:
    """Render ``analysis`` in format ``fmt`` (text, json, jsonl, sarif, html, markdown)."""
    if fmt == "json":
        from aoti_trace.report.json import render_json

        return render_json(analysis)
    if fmt == "jsonl":
        from aoti_trace.report.json import render_jsonl

        return render_jsonl(analysis)
    if fmt == "text":
        from aoti_trace.report.text import render_text

        return render_text(analysis, color=color)
    raise ValueError(f"format {fmt!r} is not implemented yet")
