"""``--format github``: GitHub Actions workflow commands, one annotation per finding.

``::error file=<path>,line=<n>,title=<rule>::<message>`` (``warning`` and ``notice`` for the lower severities),
located at the finding's first evidence line. The message carries the first paragraph of the remedy and the rerun
command. Escaping follows the Actions toolkit: in the message ``%``, CR and LF become ``%25``, ``%0D``, ``%0A``;
in property values ``:`` and ``,`` also become ``%3A`` and ``%2C``. Not a stable interface beyond that syntax.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aoti_trace.report.common import first_paragraph

if TYPE_CHECKING:
    from aoti_trace.analysis import Analysis
    from aoti_trace.findings import Finding

LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(f: Finding) -> str:
    props = []
    ev = f.evidence[0] if f.evidence else None
    if ev is not None and ev.path:
        props.append(f"file={escape_property(ev.path)}")
        if ev.line:
            props.append(f"line={ev.line}")
    title = f"{f.rule_id} {f.rule_name}" + (" (primary diagnosis)" if f.primary else "")
    props.append(f"title={escape_property(title)}")
    message = f.message
    if f.remedy:
        message += "\nfix: " + first_paragraph(f.remedy)
    if f.rerun:
        message += "\nre-run: " + f.rerun
    return f"::{LEVEL[f.severity]} {','.join(props)}::{escape_data(message)}"


def render_github(analysis: Analysis) -> str:
    return "".join(annotation(f) + "\n" for f in analysis.findings)
