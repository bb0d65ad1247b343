"""``--format text``: for a person at a terminal. Not a stable interface: do not parse it.

Layout: the primary diagnosis first (evidence lines with source:line and the extracted values highlighted, the
user's source frame, the remedy, the exact rerun command with its env flags, the guide), then the secondary
findings (shorter), then a run summary (command, exit status, torch version, compile device, compile sessions with
their durations, log damage) and a one-line count. With ``color=True`` the same lines are styled with rich (ANSI);
without, the output is plain text.

Log text never controls the terminal: every C0 control character but newline and tab, DEL, every C1 control
(U+0080-U+009F, e.g. U+009B, the one-byte CSI) and the bidirectional-override characters are shown as visible
escapes (``\x1b``, ``\x9b``, ``\u202e``) in every line of the report, coloured or not.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

import re

from aoti_trace.model.findings import clip
from aoti_trace.model.ranks import RANK_IN_PATH, rank_ranges
from aoti_trace.report.common import (
    evidence_location,
    first_paragraph,
    guide_display,
    severity_counts,
    split_highlights,
    tlparse_command,
    user_location,
)
from aoti_trace.report.json import run_summaries
from aoti_trace.report.repro import repro_lines

if TYPE_CHECKING:
    from aoti_trace.model.analysis import Analysis
    from aoti_trace.model.findings import Finding

RANK_IN_PATH_RE = re.compile(RANK_IN_PATH)  # on file paths only
SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "bold blue"}
MAX_EVIDENCE = {True: 5, False: 2}  # primary / secondary
MAX_EVIDENCE_CHARS = 400

# control characters -> their visible escape (str.translate: one linear pass)
CONTROL_ESCAPES = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x09, 0x0A)}
CONTROL_ESCAPES.update({c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))})

Segment = tuple[str, str | None]  # (text, rich style or None)
Line = list[Segment]


def visible(text: str) -> str:
    """``text`` with terminal control characters replaced by visible escapes (see the module docstring)."""
    return text.translate(CONTROL_ESCAPES)


def _indent_block(label: str, text: str, style: str | None = None) -> list[Line]:
    pad = " " * len(label)
    rows = text.rstrip().split("\n")
    return [[(label if i == 0 else (pad if row.strip() else ""), "bold" if i == 0 else None), (row, style)]
            for i, row in enumerate(rows)]


def _clip(text: str, n: int = MAX_EVIDENCE_CHARS) -> str:
    text = text.replace("\t", "    ")
    return clip(text, n)


def _finding(analysis: Analysis, f: Finding, primary: bool) -> list[Line]:
    sev = f.severity.upper()
    head: Line = []
    if primary:
        head.append(("PRIMARY ", "bold reverse " + SEVERITY_STYLE[f.severity].split()[-1]))
        head.append((" ", None))
    head += [(f"{sev:<7}", SEVERITY_STYLE[f.severity]), (" ", None), (f.rule_id, "bold"), (" ", None),
             (f.rule_name, "cyan"), ("  ", None), (f"[{f.family}]", "dim")]
    if len({r.run_id for r in analysis.runs}) > 1:
        head.append((f"  run {f.run_id}", "dim"))
    if f.ranks:
        first = f", first failed: rank {f.first_rank}" if len(f.ranks) > 1 and f.first_rank is not None else ""
        head.append((f"  {'ranks' if len(f.ranks) > 1 else 'rank'} {rank_ranges(f.ranks)}{first}", "bold"))
    head += _consequence(f)
    out: list[Line] = [head, [("  ", None), (f.title, "bold")]]
    out += [[("  ", None), (row, None)] for row in f.message.strip().split("\n")]
    if f.evidence:
        out.append([("  evidence:", "bold")])
        shown = f.evidence[: MAX_EVIDENCE[primary]]
        for ev in shown:
            line: Line = [("    ", None), (evidence_location(ev), "dim"), ("  ", None)]
            for piece, hot in split_highlights(_clip(ev.text.split("\n")[0]), f):
                line.append((piece, "bold magenta" if hot else None))
            out.append(line)
        if len(f.evidence) > len(shown):
            out.append([("    ", None), (f"(+{len(f.evidence) - len(shown)} more)", "dim")])
    loc = user_location(analysis, f)
    if loc is not None:
        out.append([("  at:      ", "bold"), (f"{loc.path}:{loc.line}" if loc.line else loc.path, "green"),
                    ("  (your code)", "dim")])
    remedy = f.remedy.strip() if primary else first_paragraph(f.remedy)
    if remedy:
        out += _indent_block("  fix:     ", remedy)
    rerun = f.rerun
    if rerun:
        out.append([("  re-run:  ", "bold"), (rerun, "bold green")])
    guide = guide_display(analysis, f)
    if guide:
        out.append([("  guide:   ", "bold"), (guide, "underline")])
    return out


def _consequence(f: Finding) -> Line:
    """Where a finding stands among the ranks' failures (:mod:`aoti_trace.engine.consequences`)."""
    if "consequences" in f.fields:
        return [(f"  failed first; then {_ranks(f.fields['consequences'])} as a consequence", "bold")]
    if "consequence_of" in f.fields:
        return [(f"  (a consequence of rank {f.fields['consequence_of']}'s failure)", "dim")]
    return []


def _ranks(ranges: str) -> str:
    return f"rank {ranges}" if ranges.isdigit() else f"ranks {ranges}"


def _fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _summary(analysis: Analysis) -> list[Line]:
    out: list[Line] = []
    for run in run_summaries(analysis):
        end = f"exit {run['exit_code']}" if run["exit_code"] is not None else "exit status unknown"
        if run["signal"]:
            end += f" ({run['signal']})"
        if run["timed_out"]:
            end += ", timed out"
        head: Line = [("run ", "bold"), (run["run_id"], "bold"), ("  ", None), (end, None)]
        if run["duration_s"] is not None:
            head.append((f", {_fmt_s(run['duration_s'])}", None))
        if run["command"]:
            head.append((f"  $ {run['command']}", "dim"))
        out.append(head)
        torch_v = ", ".join(run["torch_versions"]) or "unknown"
        dev = ", ".join(run["compile_devices"]) or "unknown"
        sessions = run["compile_sessions"]
        ranks = f", ranks {rank_ranges(run['ranks'])}" if len(run["ranks"]) > 1 else ""
        if sessions:
            compiled = (f"compile device {dev}, {len(sessions)} compile session"
                        f"{'s' if len(sessions) != 1 else ''}")
        else:  # load/run-only processes write no compile records
            compiled = "no compile in this run's trace" if run["inputs"]["trace_files"] else "no TORCH_TRACE log"
        out.append([("  ", None), (f"torch {torch_v}, {compiled}{ranks}", None)])
        for s, rks, secs in _by_ranks(sessions, ("session", "api", "kind", "status", "fail_type", "user_frame")):
            what = s["api"] or s["kind"] or "compile"
            status = s["status"] + (f" ({s['fail_type']})" if s["fail_type"] else "")
            rank = f"{'ranks' if len(rks) > 1 else 'rank'} {rank_ranges(rks)} " if rks and len(run["ranks"]) > 1 else ""
            style = "red" if s["status"] == "failed" else ("yellow" if s["status"] == "incomplete" else None)
            line: Line = [("    ", None), (f"{rank}session {s['session']}: {what} ", None), (status, style),
                          (f", {secs}" if secs else "", None)]
            if s["user_frame"]:
                line.append((f"  from {s['user_frame']}", "dim"))
            out.append(line)
        tlparse = tlparse_command(analysis, run["run_id"])
        if tlparse:
            out.append([("  tlparse: ", "dim"), (tlparse, "dim")])
        if not run["damage"]:
            out.append([("  log damage: none", "dim")])
        damage = [{**d, "rank": _path_rank(d["path"])} for d in run["damage"]]
        for d, rks, _ in _by_ranks(damage, ("kind",)):
            n = sum(x["count"] for x in damage if x["kind"] == d["kind"]) if rks else d["count"]
            where = f" in ranks {rank_ranges(rks)}, first" if len(rks) > 1 else ""
            out.append([("  log damage: ", "yellow"), (f"{d['kind']} x{n}", "yellow"),
                        (f"{where} at {d['path']}" + (f":{d['lineno']}" if d["lineno"] is not None else "")
                         + f": {d['detail']}", None)])
    out.append([(severity_counts(analysis.findings), "bold")])
    return out


def _path_rank(path: str | None) -> int | None:
    m = RANK_IN_PATH_RE.search(path or "")
    return int(m[1] or m[2]) if m else None


def _by_ranks(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> list[tuple[dict[str, Any], list[int], str]]:
    """Rows that differ only in rank (and duration) as one: (first row, its ranks, the duration or range).
    Rows without a rank stay one each, so a single-process run reads as before."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    out: list[tuple[dict[str, Any], list[int], str]] = []
    for row in rows:
        if row.get("rank") is None:
            out.append((row, [], _fmt_s(row["duration_s"]) if row.get("duration_s") is not None else ""))
            continue
        key = tuple(row.get(k) for k in keys)
        if key not in groups:
            groups[key] = []
            out.append((row, [], ""))
        groups[key].append(row)
    for i, (row, _, secs) in enumerate(out):
        if row.get("rank") is None:
            continue
        members = groups[tuple(row.get(k) for k in keys)]
        durations = sorted(m["duration_s"] for m in members if m.get("duration_s") is not None)
        if durations:
            lo, hi = _fmt_s(durations[0]), _fmt_s(durations[-1])
            secs = lo if lo == hi else f"{lo} to {hi}"
        out[i] = (row, sorted({m["rank"] for m in members}), secs)
    return out


def lines(analysis: Analysis) -> list[Line]:
    out: list[Line] = []
    primary = analysis.primary
    if primary is not None:
        out += _finding(analysis, primary, True) + [[]]
    repro = repro_lines(analysis)
    if repro:
        out += [[(line, "bold underline" if i == 0 else None)] for i, line in enumerate(repro)] + [[]]
    rest = [f for f in analysis.findings if not f.primary]
    if rest:
        out.append([(f"Other findings ({len(rest)}):" if primary else f"Findings ({len(rest)}):", "bold underline")])
        for f in rest:
            out += _finding(analysis, f, False) + [[]]
    if not analysis.findings:
        out += [[("No problem found.", "bold green")], []]
    return out + _summary(analysis)


def render_text(analysis: Analysis, *, color: bool = False) -> str:
    """The text report; ``color`` styles it with ANSI codes (rich) for a terminal."""
    rows = [[(visible(t), style) for t, style in row] for row in lines(analysis)]
    if not color:
        return "".join("".join(t for t, _ in row) + "\n" for row in rows)
    from rich.console import Console
    from rich.text import Text

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, color_system="standard", width=200, highlight=False,
                      emoji=False, markup=False)
    for row in rows:
        console.print(Text.assemble(*[(t, s or "") for t, s in row]), soft_wrap=True)
    return buf.getvalue()
