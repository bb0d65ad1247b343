"""``--format markdown``: for pull-request comments and CI step summaries (``$GITHUB_STEP_SUMMARY``).

A heading with the primary diagnosis, a findings table (severity, rule, location, message, guide), the primary
finding's details (evidence, user frame, remedy, rerun command) and a one-line run summary per run. Log text is
put in code spans / fenced blocks sized so that backticks in the text cannot close them, and table cells escape
``|`` and newlines. Not a stable interface.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from aoti_trace.findings import SEVERITIES
from aoti_trace.report.common import (
    evidence_location,
    guide_display,
    primary_location,
    user_location,
)
from aoti_trace.report.json import run_summaries
from aoti_trace.report.repro import repro_markdown

if TYPE_CHECKING:
    from aoti_trace.analysis import Analysis
    from aoti_trace.findings import Finding

ICON = {"error": "🔴", "warning": "🟡", "info": "🔵"}
MAX_CELL = 300


def _cell(text: str) -> str:
    text = " ".join((text or "").split())
    if len(text) > MAX_CELL:
        text = text[: MAX_CELL - 1] + "…"
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("\\", "\\\\").replace("|", "\\|")


def _code(text: str, table: bool = False) -> str:
    """Inline code span that survives backticks inside ``text`` (single line); ``table`` escapes ``|``."""
    text = " ".join((text or "").split())
    if table:
        text = text.replace("|", "\\|")
    run = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (run + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _block(text: str, lang: str = "") -> str:
    run = max((len(m) for m in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * max(3, run + 1)
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


def _where(analysis: Analysis, f: Finding) -> str:
    loc = primary_location(analysis, f)
    if loc is None:
        return ""
    return _code(f"{loc.path}:{loc.line}" if loc.line else loc.path, table=True)


def _details(analysis: Analysis, f: Finding) -> list[str]:
    out = [f"### {ICON[f.severity]} {f.rule_id} {f.rule_name}: {_cell(f.title)}", "", _cell(f.message), ""]
    if f.evidence:
        out += ["**Evidence**", ""]
        out.append(_block("\n".join(f"{evidence_location(ev)}: {ev.text.splitlines()[0] if ev.text else ''}"
                                    for ev in f.evidence[:5])))
        out.append("")
    loc = user_location(analysis, f)
    if loc is not None:
        out += [f"**Your code:** {_code(f'{loc.path}:{loc.line}' if loc.line else loc.path)}", ""]
    if f.remedy.strip():
        out += ["**Fix**", "", f.remedy.strip(), ""]
    rerun = f.rerun
    if rerun:
        out += ["**Rerun to confirm**", "", _block(rerun, "sh"), ""]
    guide = guide_display(f)
    if guide:
        out += [f"**Guide:** {_code(guide)} (`aoti-trace rules show {f.rule_id}`)", ""]
    return out


def render_markdown(analysis: Analysis) -> str:
    primary = analysis.primary
    counts = {s: sum(f.severity == s for f in analysis.findings) for s in SEVERITIES}
    head = f"## aoti-trace: {_cell(primary.title)}" if primary else (
        "## aoti-trace: findings" if analysis.findings else "## aoti-trace: no problem found")
    out = [head, "", " · ".join(f"{n} {s}" for s, n in counts.items()), ""]
    if analysis.findings:
        out += ["| | Severity | Rule | Location | Message | Guide |", "|---|---|---|---|---|---|"]
        for f in analysis.findings:
            guide = guide_display(f)
            out.append(f"| {'**primary**' if f.primary else ''} | {ICON[f.severity]} {f.severity} | "
                       f"`{f.rule_id}` {_cell(f.rule_name)} | {_where(analysis, f)} | {_cell(f.message)} | "
                       f"{_code(guide, table=True) if guide else ''} |")
        out.append("")
    if primary is not None:
        out += _details(analysis, primary)
    out += repro_markdown(analysis)
    out += ["<details><summary>Runs</summary>", ""]
    for run in run_summaries(analysis):
        end = "unknown" if run["exit_code"] is None else str(run["exit_code"])
        if run["signal"]:
            end += f" ({run['signal']})"
        sessions = ", ".join(f"{s['api'] or s['kind'] or 'compile'} {s['status']}" for s in run["compile_sessions"])
        damage = ", ".join(f"{d['kind']} x{d['count']}" for d in run["damage"]) or "none"
        out.append(f"- **{_cell(run['run_id'])}**: exit {end}; torch {', '.join(run['torch_versions']) or 'unknown'}"
                   f"; compile device {', '.join(run['compile_devices']) or 'unknown'}; compiles: "
                   f"{_cell(sessions) or 'none'}; log damage: {_cell(damage)}")
    out += ["", "</details>", ""]
    return "\n".join(out)
