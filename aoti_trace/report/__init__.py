"""Report formats. ``render(analysis, fmt)`` returns the report as a string; each format is a pure function
of the :class:`~aoti_trace.model.analysis.Analysis` and lives in its own module:

    text      text.py      for a terminal (rich colours with ``color=True``); not a stable interface
    json      json.py      one versioned document (schema ``aoti-trace.report/v1``)
    jsonl     json.py      one finding record per line (schema ``aoti-trace.finding/v1``)
    sarif     sarif.py     SARIF 2.1.0 (GitHub code scanning)
    html      html.py      one self-contained page (no network, no script)
    markdown  markdown.py  PR comments and CI step summaries
    github    github.py    GitHub Actions workflow-command annotations

Formats are documented in docs/output.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aoti_trace.model.analysis import Analysis

FORMATS: tuple[str, ...] = ("text", "json", "jsonl", "sarif", "html", "markdown", "github")


def render(analysis: Analysis, fmt: str, *, color: bool = False, source_root: str | Path | None = None,
           sarif_category: str | None = None) -> str:
    """Render ``analysis`` in format ``fmt`` (one of :data:`FORMATS`).

    ``color`` applies to ``text`` only; ``source_root`` to ``sarif`` and ``github`` (paths under it become
    repository-relative, and a location under it is preferred); ``sarif_category`` to ``sarif`` only (the
    ``automationDetails.id`` category, default ``aoti-trace``).
    """
    if fmt == "text":
        from aoti_trace.report.text import render_text

        return render_text(analysis, color=color)
    if fmt == "json":
        from aoti_trace.report.json import render_json

        return render_json(analysis)
    if fmt == "jsonl":
        from aoti_trace.report.json import render_jsonl

        return render_jsonl(analysis)
    if fmt == "sarif":
        from aoti_trace.report.sarif import render_sarif

        return render_sarif(analysis, source_root=source_root, category=sarif_category)
    if fmt == "html":
        from aoti_trace.report.html import render_html

        return render_html(analysis)
    if fmt == "markdown":
        from aoti_trace.report.markdown import render_markdown

        return render_markdown(analysis)
    if fmt == "github":
        from aoti_trace.report.github import render_github

        return render_github(analysis, source_root=source_root)
    raise ValueError(f"unknown report format {fmt!r}; known: {', '.join(FORMATS)}")
