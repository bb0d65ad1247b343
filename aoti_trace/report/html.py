"""``--format html`` / ``--html FILE``: one self-contained page to attach to an issue or keep as a CI artifact.

No network and no script: inline CSS only, and a Content-Security-Policy (``default-src 'none'``) that makes the
browser refuse any load. Every piece of log, trace, code and rule text goes through :func:`html.escape` (guides
and remedies through :func:`markdown_to_html`: CommonMark by markdown-it-py with raw HTML, images and autolinks
off, only ``http(s)`` links).

Sections: header (with the note that the report contains model code and logs), the primary diagnosis (evidence
with the failing log line highlighted in its context, the user's source frame, generated code around the failing
kernel / wrapper line, remedy, rerun command, the rendered sub-guide), a findings table, the other findings, a
timeline of compile phases (from the trace's chromium events) and the run summary.
"""

from __future__ import annotations

import functools
from collections.abc import MutableMapping, Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from aoti_trace import __version__
from aoti_trace.report.common import (
    TEXT_SOURCES,
    Timeline,
    context_lines,
    evidence_location,
    generated_sources,
    guide_display,
    guide_text,
    primary_location,
    severity_counts,
    split_highlights,
    timelines,
    user_location,
)
from aoti_trace.report.json import run_summaries
from aoti_trace.report.repro import repro_html

if TYPE_CHECKING:
    from aoti_trace.model.analysis import Analysis
    from aoti_trace.model.findings import Finding
    from markdown_it import MarkdownIt
    from markdown_it.renderer import RendererHTML
    from markdown_it.token import Token
    from markdown_it.utils import OptionsDict

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
MAX_TIMELINE_ROWS = 45
MAX_EVIDENCE_CHARS = 2000

CSS = """
:root { --err:#c62828; --warn:#b26a00; --info:#1565c0; --ok:#2e7d32; --muted:#5f6368; --line:#e0e0e0;
        --bg:#fafafa; --code:#f4f5f7; --hit:#fff3c4; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:#202124; background:var(--bg); }
header { background:#202124; color:#fff; padding:16px 28px; }
header h1 { margin:0 0 4px; font-size:20px; }
header .meta { color:#c7c7c7; font-size:13px; margin:0; }
.note { background:#fff8e1; border-bottom:1px solid #ffe082; padding:8px 28px; font-size:13px; }
main { max-width:1180px; margin:0 auto; padding:8px 28px 40px; }
h2 { font-size:17px; margin:28px 0 10px; }
h3 { font-size:14px; margin:16px 0 6px; color:#3c4043; }
.card { background:#fff; border:1px solid var(--line); border-left:6px solid var(--muted); border-radius:6px;
        padding:14px 18px; margin:12px 0; }
.card.sev-error { border-left-color:var(--err); } .card.sev-warning { border-left-color:var(--warn); }
.card.sev-info { border-left-color:var(--info); }
.card.primary { box-shadow:0 1px 4px rgba(0,0,0,.12); }
.card .title { font-size:18px; font-weight:600; margin:2px 0 6px; }
.badge { display:inline-block; font-size:11px; font-weight:700; letter-spacing:.04em; padding:1px 7px;
         border-radius:10px; color:#fff; background:var(--muted); vertical-align:middle; }
.badge.error { background:var(--err); } .badge.warning { background:var(--warn); } .badge.info { background:var(--info); }
.badge.primary { background:#202124; }
td.rule { white-space:nowrap; }
.rule { font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; font-size:13px; color:#3c4043; }
.message { font-size:15px; white-space:pre-wrap; overflow-wrap:anywhere; }
code, pre { font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; font-size:12.5px; }
code { background:var(--code); padding:0 3px; border-radius:3px; overflow-wrap:anywhere; }
pre { background:var(--code); padding:8px 10px; border-radius:4px; overflow-x:auto; margin:6px 0; }
pre code { background:none; padding:0; }
.ev { margin:8px 0; }
.ev .loc { font-family:ui-monospace,Menlo,Consolas,monospace; font-size:12px; color:var(--muted); overflow-wrap:anywhere; }
.ev pre.text { white-space:pre-wrap; overflow-wrap:anywhere; }
mark { background:#ffe082; padding:0 1px; border-radius:2px; }
table.src { border-collapse:collapse; width:100%; background:var(--code); border-radius:4px; margin:4px 0 8px;
            font-family:ui-monospace,Menlo,Consolas,monospace; font-size:12px; }
table.src td { padding:0 8px; vertical-align:top; white-space:pre-wrap; overflow-wrap:anywhere; }
table.src td.n { color:#9aa0a6; text-align:right; width:1%; white-space:nowrap; user-select:none; }
table.src tr.hit td { background:var(--hit); font-weight:600; }
table.src tr.hit td.n { color:#202124; }
.kv { display:grid; grid-template-columns:max-content 1fr; gap:2px 14px; margin:6px 0; }
.kv dt { font-weight:600; color:#3c4043; } .kv dd { margin:0; overflow-wrap:anywhere; }
.guide { border-top:1px dashed var(--line); margin-top:10px; padding-top:6px; }
.guide h1 { font-size:16px; } .guide h2 { font-size:15px; margin:14px 0 6px; } .guide h3 { font-size:14px; }
details > summary { cursor:pointer; font-weight:600; color:#3c4043; }
table.list { border-collapse:collapse; width:100%; background:#fff; border:1px solid var(--line); }
table.list th, table.list td { text-align:left; padding:5px 8px; border-bottom:1px solid var(--line);
                               vertical-align:top; overflow-wrap:anywhere; }
table.list th { white-space:nowrap; background:#f1f3f4; font-size:12px; text-transform:uppercase; letter-spacing:.03em; color:#5f6368; }
.ok { color:var(--ok); font-weight:600; } .bad { color:var(--err); font-weight:600; } .warn { color:var(--warn); font-weight:600; }
.muted { color:var(--muted); }
.tl { background:#fff; border:1px solid var(--line); border-radius:6px; padding:10px 14px; margin:10px 0; }
.tl-row { display:grid; grid-template-columns:300px 1fr 80px; gap:10px; align-items:center; font-size:12px; min-height:18px; }
.tl-name { font-family:ui-monospace,Menlo,Consolas,monospace; white-space:nowrap; overflow:hidden; text-overflow:ellipsis; }
.tl-track { position:relative; height:12px; background:#f1f3f4; border-radius:2px; }
.tl-bar { position:absolute; top:0; height:12px; background:#5c6bc0; border-radius:2px; min-width:2px; }
.tl-bar.d1 { background:#7986cb; } .tl-bar.d2 { background:#9fa8da; } .tl-bar.d3 { background:#c5cae9; }
.tl-bar.failed { background:var(--err); }
.tl-bar.unfinished { background:repeating-linear-gradient(45deg,#ef6c00,#ef6c00 4px,#ffb74d 4px,#ffb74d 8px); }
.tl-dur { text-align:right; font-variant-numeric:tabular-nums; color:#3c4043; }
footer { color:var(--muted); font-size:12px; margin-top:30px; }
"""



@functools.lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).disable(["image", "autolink", "html_block", "html_inline"])
    # replacing the method on the instance is markdown-it's documented way to change the link check
    md.validateLink = lambda url: url.lower().startswith(("http://", "https://"))  # type: ignore[method-assign]

    def render_link(renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict,  # bound to it
                    env: MutableMapping[str, Any]) -> str:
        # validateLink is not consulted for an empty destination ('[text]()'): such a link is rendered as its text
        if not str(tokens[idx].attrGet("href") or "").lower().startswith(("http://", "https://")):
            env["skipped_links"] = env.get("skipped_links", 0) + 1
            return ""
        tokens[idx].attrSet("rel", "noreferrer noopener")
        return renderer.renderToken(tokens, idx, options, env)

    def link_close(renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict,
                   env: MutableMapping[str, Any]) -> str:
        if env.get("skipped_links"):
            env["skipped_links"] -= 1
            return ""
        return renderer.renderToken(tokens, idx, options, env)

    md.add_render_rule("link_open", render_link)
    md.add_render_rule("link_close", link_close)
    return md


def markdown_to_html(text: str) -> str:
    """A guide or remedy (CommonMark) as HTML. Raw HTML in it is shown as text (escaped), images and autolinks are
    off, and only ``http``/``https`` links become ``<a>`` elements (never loaded by the report itself)."""
    html: str = _markdown().render(text.replace("\x00", ""))
    return html

def _sev(f: Finding) -> str:
    return f'<span class="badge {f.severity}">{escape(f.severity.upper())}</span>'


def _highlighted(text: str, f: Finding) -> str:
    return "".join(f"<mark>{escape(p)}</mark>" if hot else escape(p) for p, hot in split_highlights(text, f))


def _src_table(lines: list[tuple[int, str]], focus: int | None, f: Finding | None = None) -> str:
    rows = []
    for n, text in lines:
        body = _highlighted(text, f) if (f is not None and n == focus) else escape(text)
        cls = ' class="hit"' if n == focus else ""
        rows.append(f'<tr{cls}><td class="n">{n}</td><td>{body}</td></tr>')
    return '<table class="src">' + "".join(rows) + "</table>"


def _evidence(analysis: Analysis, f: Finding, radius: int) -> str:
    out = []
    for ev in f.evidence:
        loc = f'<div class="loc">{escape(evidence_location(ev))} <span class="muted">({escape(ev.source)})</span></div>'
        ctx = context_lines(analysis, ev.path, ev.line, radius) if ev.source in TEXT_SOURCES and radius else []
        if ctx and any(n == ev.line for n, _ in ctx):
            body = _src_table(ctx, ev.line, f)
        else:
            text = ev.text if len(ev.text) <= MAX_EVIDENCE_CHARS else ev.text[:MAX_EVIDENCE_CHARS] + "…"
            body = f'<pre class="text">{_highlighted(text, f)}</pre>'
        out.append(f'<div class="ev">{loc}{body}</div>')
    return "".join(out)


def _card(analysis: Analysis, f: Finding, primary: bool) -> str:
    parts = [f'<div class="card sev-{f.severity}{" primary" if primary else ""}" id="finding-{escape(f.rule_id)}-'
             f'{escape(f.fingerprint)}">']
    badges = ('<span class="badge primary">PRIMARY DIAGNOSIS</span> ' if primary else "") + _sev(f)
    parts.append(f'<div>{badges} <span class="rule">{escape(f.rule_id)} {escape(f.rule_name)} '
                 f'[{escape(f.family)}]</span> <span class="muted">run {escape(f.run_id)}</span></div>')
    parts.append(f'<div class="title">{escape(f.title)}</div>')
    parts.append(f'<div class="message">{escape(f.message.strip())}</div>')
    if f.evidence:
        parts.append("<h3>Evidence</h3>" + _evidence(analysis, f, 3 if primary else 1))
    loc = user_location(analysis, f)
    if loc is not None:
        where = f"{loc.path}:{loc.line}" if loc.line else loc.path
        parts.append(f'<h3>Your code</h3><p><code>{escape(where)}</code> <span class="muted">(the user frame that '
                     f"called into torch)</span></p>")
    if primary:
        for view in generated_sources(analysis, f):
            at = f"{view.file}:{view.line}" if view.line else view.file
            parts.append(f'<h3>Generated code ({escape(view.why)})</h3><div class="loc muted"><code>{escape(at)}'
                         f"</code> &mdash; from {escape(view.origin)}</div>" + _src_table(view.lines, view.focus))
    if f.remedy.strip():
        parts.append("<h3>Fix</h3>" + markdown_to_html(f.remedy))
    rerun = f.rerun
    if rerun:
        parts.append(f"<h3>Rerun to confirm</h3><pre><code>{escape(rerun)}</code></pre>")
    if f.env_flags:
        parts.append('<dl class="kv">' + "".join(f"<dt><code>{escape(k)}</code></dt><dd><code>{escape(v)}</code></dd>"
                                                for k, v in f.env_flags.items()) + "</dl>")
    guide = guide_display(analysis, f)
    if guide:
        text = guide_text(analysis, f)
        if text:
            parts.append(f'<details class="guide"{" open" if primary else ""}><summary>Guide: <code>{escape(guide)}'
                         f'</code></summary>{markdown_to_html(text)}</details>')
        else:
            parts.append(f'<p class="guide">Guide: <code>{escape(guide)}</code></p>')
    parts.append("</div>")
    return "".join(parts)


def _findings_table(analysis: Analysis) -> str:
    rows = []
    for f in analysis.findings:
        loc = primary_location(analysis, f)
        where = (f"{loc.path}:{loc.line}" if loc.line else loc.path) if loc else ""
        rows.append(f"<tr><td>{_sev(f)}{' <b>primary</b>' if f.primary else ''}</td><td class=\"rule\">"
                    f"{escape(f.rule_id)}<br>{escape(f.rule_name)}</td><td>{escape(f.family)}</td>"
                    f"<td>{escape(f.message.strip()[:400])}</td><td><code>{escape(where)}</code></td></tr>")
    return ('<table class="list"><tr><th>Severity</th><th>Rule</th><th>Family</th><th>Message</th>'
            "<th>Location</th></tr>" + "".join(rows) + "</table>")


def _fmt_s(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.2f} s"


def _timeline(tl: Timeline) -> str:
    total = max(tl.end_us - tl.start_us, 1.0)
    keep = [s for s in tl.spans if (s.end_us - s.start_us) >= 0.01 * total or s.failed or s.unfinished]
    if len(keep) > MAX_TIMELINE_ROWS:  # the longest phases, in time order
        longest = sorted(keep, key=lambda s: (not (s.failed or s.unfinished), s.start_us - s.end_us))
        chosen = {id(s) for s in longest[:MAX_TIMELINE_ROWS]}
        keep = [s for s in keep if id(s) in chosen]
    title = f"run {tl.run_id}" + (f", rank {tl.rank}" if tl.rank is not None else "") + \
        (f", compile session {tl.session}" if tl.session is not None else "")
    rows = []
    for s in keep:
        left = 100.0 * (s.start_us - tl.start_us) / total
        width = max(0.15, 100.0 * (s.end_us - s.start_us) / total)
        cls = f"tl-bar d{min(s.depth, 3)}" + (" failed" if s.failed else "") + (" unfinished" if s.unfinished else "")
        mark = " (failed)" if s.failed else (" (never finished)" if s.unfinished else "")
        label = escape(s.name + mark)
        rows.append(f'<div class="tl-row"><div class="tl-name" style="padding-left:{min(s.depth, 8) * 10}px" title="{label}">'
                    f'{label}</div><div class="tl-track"><div class="{cls}" style="left:{left:.3f}%;width:'
                    f'{min(width, 100 - left):.3f}%"></div></div><div class="tl-dur">{_fmt_s(s.duration_s)}</div></div>')
    hidden = len(tl.spans) - len(keep)
    foot = f'<div class="muted">{hidden} shorter phases not shown.</div>' if hidden else ""
    if tl.truncated:
        foot += '<div class="muted">Only the first chromium events of this run were read.</div>'
    return (f'<div class="tl"><div><b>{escape(title)}</b> <span class="muted">{escape(tl.path)}, '
            f"{_fmt_s(total / 1e6)} from the first to the last phase</span></div>{''.join(rows)}{foot}</div>")


def _runs(analysis: Analysis) -> str:
    out = []
    for run in run_summaries(analysis):
        end = "unknown" if run["exit_code"] is None else str(run["exit_code"])
        if run["signal"]:
            end += f" ({run['signal']})"
        if run["timed_out"]:
            end += ", timed out"
        cls = "ok" if run["exit_code"] == 0 else ("muted" if run["exit_code"] is None else "bad")
        items = [("Command", f"<code>{escape(run['command'])}</code>" if run["command"] else "unknown"),
                 ("Exit status", f'<span class="{cls}">{escape(end)}</span>'),
                 ("Wall time", _fmt_s(run["duration_s"]) if run["duration_s"] is not None else "unknown"),
                 ("torch", escape(", ".join(run["torch_versions"]) or "unknown")),
                 ("Compile device", escape(", ".join(run["compile_devices"]) or "unknown"))]
        if run["ranks"]:
            items.append(("Ranks", escape(", ".join(map(str, run["ranks"])))))
        inputs = run["inputs"]
        files = [*inputs["trace_files"], *inputs["stderr"], *inputs["stdout"], *inputs["packages"]]
        if inputs["manifest"]:
            files.insert(0, inputs["manifest"])
        items.append(("Inputs", "<br>".join(f"<code>{escape(p)}</code>" for p in files) or "none"))
        dl = '<dl class="kv">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in items) + "</dl>"
        sess = []
        for s in run["compile_sessions"]:
            st = {"ok": "ok", "failed": "bad", "incomplete": "warn"}.get(s["status"] or "", "muted")
            sess.append(f"<tr><td>{'' if s['rank'] is None else s['rank']}</td><td>{s['session']}</td>"
                        f"<td>{escape(s['api'] or s['kind'] or '')}</td><td class=\"{st}\">{escape(s['status'] or '')}"
                        f"{' (' + escape(s['fail_type']) + ')' if s['fail_type'] else ''}</td>"
                        f"<td>{_fmt_s(s['duration_s']) if s['duration_s'] is not None else ''}</td>"
                        f"<td><code>{escape(s['user_frame'] or '')}</code></td></tr>")
        table = ('<table class="list"><tr><th>Rank</th><th>Session</th><th>API</th><th>Status</th><th>Duration</th>'
                 "<th>Called from</th></tr>" + "".join(sess) + "</table>") if sess else \
            '<p class="muted">No compile session in the trace.</p>'
        dmg = "".join(f"<li><b>{escape(d['kind'])}</b> &times;{d['count']} at <code>{escape(str(d['path']))}:"
                      f"{d['lineno']}</code>: {escape(d['detail'] or '')}</li>" for d in run["damage"])
        dmg_html = f"<h3>Log damage</h3><ul>{dmg}</ul>" if dmg else '<p class="muted">No log damage.</p>'
        out.append(f'<div class="card"><div class="title">Run {escape(run["run_id"])}</div>{dl}'
                   f"<h3>Compile sessions</h3>{table}{dmg_html}</div>")
    return "".join(out)


def summary_html(analysis: Analysis) -> str:
    """The report's summary as an HTML fragment (no page, no stylesheet, nothing loaded): what a notebook shows for
    an :class:`~aoti_trace.model.analysis.Analysis` (its ``_repr_html_``). The title, the counts, the primary finding's
    message, remedy and rerun command, and the findings table; all log text escaped."""
    primary = analysis.primary
    title = f"aoti-trace: {primary.title}" if primary else (
        "aoti-trace: findings" if analysis.findings else "aoti-trace: no problem found")
    runs = ", ".join(r.run_id for r in analysis.runs) or "none"
    parts = [f'<div class="aoti-trace-summary"><h3>{escape(title)}</h3>'
             f"<p>{escape(severity_counts(analysis.findings))} &middot; runs: {escape(runs)}</p>"]
    if primary is not None:
        parts.append(f"<p><b>{escape(primary.rule_id)} {escape(primary.rule_name)}</b>: "
                     f"{escape(primary.message.strip())}</p>")
        if primary.remedy.strip():
            parts.append(markdown_to_html(primary.remedy))
        if primary.rerun:
            parts.append(f"<p>Rerun to confirm:</p><pre><code>{escape(primary.rerun)}</code></pre>")
    if analysis.findings:
        parts.append(_findings_table(analysis))
    parts.append("<p><i>The full report: <code>render(analysis, \"html\")</code> or "
                 "<code>aoti-trace analyze PATH --html report.html</code>.</i></p></div>")
    return "".join(parts)


def render_html(analysis: Analysis) -> str:
    primary = analysis.primary
    title = f"aoti-trace: {primary.title}" if primary else "aoti-trace report"
    runs = ", ".join(r.run_id for r in analysis.runs) or "none"
    body = [f"<header><h1>{escape(title)}</h1><p class=\"meta\">aoti-trace {escape(__version__)} &middot; runs: "
            f"{escape(runs)} &middot; " + escape(severity_counts(analysis.findings)) + "</p></header>",
            '<div class="note"><b>Contains model code and logs.</b> This report embeds excerpts of the analysed '
            "logs, traces and generated code (file paths, model structure, kernel source). Review it before "
            "sharing it outside your organisation.</div>", "<main>"]
    body.append('<section id="diagnosis"><h2>Diagnosis</h2>')
    if primary is not None:
        body.append(_card(analysis, primary, True))
    elif analysis.findings:
        body.append("<p>No error-level finding; see the findings below.</p>")
    else:
        body.append('<p class="ok">No problem found.</p>')
    body.append("</section>")
    body.append(repro_html(analysis))
    if analysis.findings:
        body.append(f'<section id="findings"><h2>All findings ({len(analysis.findings)})</h2>'
                    f"{_findings_table(analysis)}</section>")
    rest = [f for f in analysis.findings if not f.primary]
    if rest:
        body.append(f'<section id="other"><h2>Other findings ({len(rest)})</h2>')
        body += [_card(analysis, f, False) for f in rest]
        body.append("</section>")
    tls = timelines(analysis)
    if tls:
        body.append('<section id="timeline"><h2>Compile phases</h2><p class="muted">From the chromium events in '
                    "the TORCH_TRACE log; bar positions are relative to each compile session.</p>")
        body += [_timeline(t) for t in tls]
        body.append("</section>")
    body.append(f'<section id="runs"><h2>Runs</h2>{_runs(analysis)}</section>')
    body.append(f"<footer>Generated by aoti-trace {escape(__version__)}. This file loads nothing from the "
                "network.</footer></main>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>\n" + "\n".join(body)
            + "\n</body></html>\n")
