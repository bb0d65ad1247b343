"""``--format markdown``: for pull-request comments and CI step summaries (``$GITHUB_STEP_SUMMARY``).

A heading with the primary diagnosis, a findings table (severity, rule, location, message, guide), the primary
finding's details (evidence, user frame, remedy, rerun command) and a one-line run summary per run. Not a stable
interface.

Every log-derived string is escaped, so that nothing from a log becomes markup where the report is rendered (no
raw HTML such as ``<img>`` or ``</details>``, no links or images, no headings or lists): plain text (titles,
messages, table cells, run summaries) has every markdown-significant character escaped (:func:`_cell`); log text is
put in code spans / fenced blocks sized so that backticks in the text cannot close them; the remedy, which is rule
markdown with log values filled in, keeps its code spans and fenced blocks while everything outside them is
escaped (:func:`_remedy`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from aoti_trace.report.common import (
    evidence_location,
    guide_display,
    primary_location,
    severity_counts,
    tlparse_command,
    user_location,
)
from aoti_trace.report.json import run_summaries
from aoti_trace.report.repro import repro_markdown

if TYPE_CHECKING:
    from aoti_trace.model.analysis import Analysis
    from aoti_trace.model.findings import Finding

ICON = {"error": "🔴", "warning": "🟡", "info": "🔵"}
MAX_CELL = 300
# characters that make HTML, code, links, images or table cells anywhere in a line (entities for the HTML ones, a
# backslash for the others); emphasis characters are left alone (they cannot add anything but emphasis)
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_INLINE = re.compile(r"[\\`\[\]|]")
# in the remedy, outside code: what could make a link, an image, a table or raw HTML (its authored emphasis,
# lists and headings stay markup)
_LINKS = re.compile(r"[\\\[\]|]")
# markup at the start of a line: headings, quotes, list items, thematic breaks, setext underlines
_LINE_START = re.compile(r"^(\s*)([-+=*#]|\d{1,9}(?=[.)]))")
# C0/C1 controls and bidi overrides: escaped like the text report does
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x09, 0x0A)}
_CONTROLS.update({c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))})


def _escape(text: str, inline: re.Pattern[str] = _INLINE) -> str:
    """Markdown-escape text (a few linear passes): entities for ``&<>``, a backslash before ``inline`` characters."""
    text = text.translate(_CONTROLS)
    text = "".join(_ENTITIES.get(c, c) for c in text) if any(c in text for c in "&<>") else text
    return inline.sub(lambda m: "\\" + m[0], text)


def _cell(text: str) -> str:
    """Log-derived plain text on one line (table cells, headings, paragraphs)."""
    text = " ".join((text or "").split())
    if len(text) > MAX_CELL:
        text = text[: MAX_CELL - 1] + "…"
    return _LINE_START.sub(lambda m: m[1] + "\\" + m[2], _escape(text), count=1)


def _code(text: str, table: bool = False) -> str:
    """Inline code span that survives backticks inside ``text`` (single line); ``table`` escapes ``|``."""
    text = " ".join((text or "").translate(_CONTROLS).split())
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


_FENCE_OPEN = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_BACKTICKS = re.compile(r"`+")


def _remedy(text: str) -> str:
    """Rule markdown with log values inside. Fenced blocks and code spans are kept (what is in them is literal
    wherever the markdown is rendered); outside them, whatever could make raw HTML, a link, an image or a table is
    escaped, line by line, so that a log value cannot add markup. Fences are found as CommonMark finds them (closed
    by the next fence line of the same character, at least as long); code spans are paired within one line only
    (a span the renderer pairs across lines then just shows its escapes, and a span is never assumed where the
    renderer might not see one)."""
    out: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        if fence is not None:
            out.append(line)
            stripped = line.strip()
            if (len(line) - len(line.lstrip(" ")) <= 3 and stripped and set(stripped) == {fence[0]}
                    and len(stripped) >= len(fence)):
                fence = None
            continue
        m = _FENCE_OPEN.match(line)
        if m and not (m["fence"][0] == "`" and "`" in m["info"]):
            fence = m["fence"]
            out.append(line)
            continue
        out.append(_inline_markdown(line))
    return "\n".join(out)


def _inline_markdown(line: str) -> str:
    """One line: code spans kept (a backtick run closes at the next run of the same length); between them,
    whatever could make HTML, a link, an image or a table cell is escaped."""
    runs = list(_BACKTICKS.finditer(line))
    next_same: list[int | None] = [None] * len(runs)  # index of the next run of the same length (linear pass)
    last: dict[int, int] = {}
    for k in range(len(runs) - 1, -1, -1):
        n = len(runs[k][0])
        next_same[k] = last.get(n)
        last[n] = k
    pieces: list[str] = []
    pos, i = 0, 0
    while i < len(runs):
        closer = next_same[i]
        if closer is None:
            i += 1
            continue
        pieces.append(_escape(line[pos:runs[i].start()], _LINKS))
        pieces.append(line[runs[i].start():runs[closer].end()])
        pos = runs[closer].end()
        i = closer + 1
    pieces.append(_escape(line[pos:], _LINKS))
    return "".join(pieces)


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
        out += ["**Fix**", "", _remedy(f.remedy.strip()), ""]
    rerun = f.rerun
    if rerun:
        out += ["**Rerun to confirm**", "", _block(rerun, "sh"), ""]
    guide = guide_display(analysis, f)
    if guide:
        out += [f"**Guide:** {_code(guide)} (`aoti-trace rules show {f.rule_id}`)", ""]
    return out


def render_markdown(analysis: Analysis) -> str:
    primary = analysis.primary
    head = f"## aoti-trace: {_cell(primary.title)}" if primary else (
        "## aoti-trace: findings" if analysis.findings else "## aoti-trace: no problem found")
    out = [head, "", severity_counts(analysis.findings, " · "), ""]
    if analysis.findings:
        out += ["| | Severity | Rule | Location | Message | Guide |", "|---|---|---|---|---|---|"]
        for f in analysis.findings:
            guide = guide_display(analysis, f)
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
        out.append(f"- **{_cell(run['run_id'])}**: exit {_cell(end)}; torch "
                   f"{_cell(', '.join(run['torch_versions'])) or 'unknown'}; compile device "
                   f"{_cell(', '.join(run['compile_devices'])) or 'unknown'}; compiles: "
                   f"{_cell(sessions) or 'none'}; log damage: {_cell(damage)}")
        tlparse = tlparse_command(analysis, run["run_id"])
        if tlparse:
            out.append(f"  - tlparse: {_code(tlparse)}")
    out += ["", "</details>", ""]
    return "\n".join(out)
