"""The minimal-repro block of a report: ``analysis.repro``, set by ``aoti-trace minify`` and ``ladder --minify``.

One source for every format (:class:`aoti_trace.run.minify.MinifyResult`): ``text`` and ``markdown`` print its
:meth:`~aoti_trace.run.minify.MinifyResult.lines`, ``json`` puts its
:meth:`~aoti_trace.run.minify.MinifyResult.to_json` under the document's ``repro`` key, ``sarif`` under the run's
``properties.repro``, ``html`` a "Minimal repro" section. Analyses without a repro render as before.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

from aoti_trace.run.minify import SCHEMA, STATUSES

if TYPE_CHECKING:
    from aoti_trace.model.analysis import Analysis

TITLE = "Minimal repro"

_RULE = {"type": ["object", "null"], "additionalProperties": False,
         "required": ["rule_id", "rule_name", "family", "title"],
         "properties": {k: {"type": "string"} for k in ("rule_id", "rule_name", "family", "title")}}
_NUM = {"type": ["number", "null"]}
_STR = {"type": ["string", "null"]}
# JSON Schema of MinifyResult.to_json (schema "aoti-trace.minify/v1"): the document's optional ``repro`` key.
REPRO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["schema", "status", "reproduced", "reason", "command", "target", "verified", "repro", "rerun",
                 "nodes_before", "nodes_after", "queries", "minify_s", "budget_s", "budget_exhausted", "launcher",
                 "captures"],
    "properties": {
        "schema": {"const": SCHEMA},
        "status": {"enum": list(STATUSES)},
        "reproduced": {"type": "boolean"},
        "reason": _STR,
        "command": {"type": "array", "items": {"type": "string"}},
        "target": _RULE, "verified": _RULE,
        "repro": _STR, "rerun": _STR, "launcher": _STR,
        "nodes_before": {"type": ["integer", "null"]}, "nodes_after": {"type": ["integer", "null"]},
        "queries": {"type": ["integer", "null"]},
        "minify_s": _NUM, "budget_s": _NUM, "budget_exhausted": {"type": "boolean"},
        "captures": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}


def repro_json(analysis: Analysis) -> dict[str, Any] | None:
    repro = getattr(analysis, "repro", None)
    return repro.to_json() if repro is not None else None


def repro_lines(analysis: Analysis) -> list[str]:
    """``Minimal repro:`` and the indented block, or nothing."""
    repro = getattr(analysis, "repro", None)
    if repro is None:
        return []
    return [f"{TITLE}:", *(f"  {line}" for line in repro.lines())]


def repro_markdown(analysis: Analysis) -> list[str]:
    repro = getattr(analysis, "repro", None)
    if repro is None:
        return []
    return [f"### {TITLE}", "", "```", *repro.lines(), "```", ""]


def repro_html(analysis: Analysis) -> str:
    repro = getattr(analysis, "repro", None)
    if repro is None:
        return ""
    doc = repro.to_json()
    cls = "ok" if doc["reproduced"] else "bad"
    items = [("Status", f'<span class="{cls}">{escape(STATUSES[doc["status"]])}</span>')]
    if doc["repro"]:
        size = f" ({doc['nodes_before']} &rarr; {doc['nodes_after']} graph nodes)" if doc["nodes_before"] else ""
        items.append(("Repro", f"<code>{escape(doc['repro'])}</code>{size}"))
    for key, label in (("target", "Failure"), ("verified", "Repro's failure")):
        if doc[key] and (key == "target" or not doc["reproduced"]):
            f = doc[key]
            rule = f"<code>{escape(f['rule_id'])}</code> {escape(f['rule_name'])} [{escape(f['family'])}]"
            items.append((label, rule))
    if doc["minify_s"] is not None:
        items.append(("Minifier", escape(f"{doc['minify_s']:.0f} s (budget {doc['budget_s']:.0f} s)")
                      + (f", {doc['queries']} candidates tried" if doc["queries"] is not None else "")))
    if doc["rerun"]:
        items.append(("Re-run", f"<pre><code>{escape(doc['rerun'])}</code></pre>"))
    if doc["reason"]:
        items.append(("Note", escape(doc["reason"])))
    dl = '<dl class="kv">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"
    return f'<section id="repro"><h2>{TITLE}</h2><div class="card">{dl}</div></section>'
