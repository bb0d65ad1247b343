"""``--format text``: for a person at a terminal. Not a stable interface: do not parse it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from aoti_trace.report.json import run_summaries

if TYPE_CHECKING:
    from aoti_trace.analysis import Analysis
    from aoti_trace.findings import Finding

COLORS = {"error": "red", "warning": "yellow", "info": "blue"}


def _finding(f: Finding, color: bool, headline: str) -> list[str]:
    style = (lambda s, **kw: click.style(s, **kw)) if color else (lambda s, **kw: s)
    out = [style(f"{headline}{f.severity.upper()}  {f.rule_id} {f.rule_name}  [{f.family}]", fg=COLORS[f.severity], bold=True),
           f"  {f.message}"]
    for ev in f.evidence[:3]:
        loc = f"{ev.path}:{ev.line}" if ev.path and ev.line else (ev.path or ev.source)
        out.append(style(f"  > {loc}: ", dim=True) + ev.text)
    if f.remedy:
        out.append("  fix:    " + f.remedy.strip().split("\n\n")[0].replace("\n", "\n          "))
    if f.rerun:
        out.append("  re-run: " + f.rerun)
    if f.guide:
        out.append("  guide:  " + f.guide)
    return out


def render_text(analysis: Analysis, *, color: bool = False) -> str:
    lines: list[str] = []
    primary = analysis.primary
    if primary is not None:
        lines += _finding(primary, color, "PRIMARY ") + [""]
    rest = [f for f in analysis.findings if not f.primary]
    if rest:
        lines.append("Other findings:" if primary else "Findings:")
        for f in rest:
            lines += _finding(f, color, "") + [""]
    if not analysis.findings:
        lines += ["No problem found.", ""]
    for run in run_summaries(analysis):
        sessions = run["compile_sessions"]
        status = ", ".join(f"{s['api'] or s['kind'] or 'compile'}: {s['status']}" for s in sessions) or "none in trace"
        end = f"exit {run['exit_code']}" if run["exit_code"] is not None else "exit status unknown"
        if run["signal"]:
            end += f" ({run['signal']})"
        torch_v = ", ".join(run["torch_versions"]) or "unknown"
        dev = ", ".join(run["compile_devices"]) or "unknown"
        lines.append(f"run {run['run_id']}: torch {torch_v}, compile device {dev}, compiles: {status}; {end}")
        for d in run["damage"]:
            lines.append(f"  log damage: {d['kind']} x{d['count']} at {d['path']}:{d['lineno']}: {d['detail']}")
    return "\n".join(lines) + "\n"
