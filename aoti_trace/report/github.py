"""``--format github``: GitHub Actions workflow commands, one annotation per finding.

``::error file=<path>,line=<n>,title=<rule>::<message>`` (``warning`` and ``notice`` for the lower severities),
located where the SARIF result is (:func:`~aoti_trace.report.common.repo_location`: the user's call site inside the
checkout, else the first evidence line inside it, else outside it), with paths relative to ``source_root``. The message carries the first paragraph of the remedy and the rerun
command. Escaping follows the Actions toolkit: in the message ``%``, CR and LF become ``%25``, ``%0D``, ``%0A``;
in property values ``:`` and ``,`` also become ``%3A`` and ``%2C``. Not a stable interface beyond that syntax.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from aoti_trace.report.common import first_paragraph, inside, repo_location

if TYPE_CHECKING:
    from aoti_trace.model.analysis import Analysis
    from aoti_trace.model.findings import Finding

LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(analysis: Analysis, f: Finding, source_root: Path | None = None) -> str:
    props = []
    loc = repo_location(analysis, f, source_root)
    if loc is not None:
        props.append(f"file={escape_property(inside(loc.path, source_root) or loc.path)}")
        if loc.line:
            props.append(f"line={loc.line}")
    title = f"{f.rule_id} {f.rule_name}" + (" (primary diagnosis)" if f.primary else "")
    props.append(f"title={escape_property(title)}")
    message = f.message
    if f.remedy:
        message += "\nfix: " + first_paragraph(f.remedy)
    if f.rerun:
        message += "\nre-run: " + f.rerun
    return f"::{LEVEL[f.severity]} {','.join(props)}::{escape_data(message)}"


def render_github(analysis: Analysis, *, source_root: str | Path | None = None) -> str:
    root = Path(source_root) if source_root is not None else None
    return "".join(annotation(analysis, f, root) + "\n" for f in analysis.findings)
