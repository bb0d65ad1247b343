"""A tiny, safe markdown subset -> HTML, for guides and remedies in the HTML report.

Supported: ATX headings, paragraphs, fenced code blocks (``` or ~~~), unordered (``-``, ``*``) and ordered
(``1.``) lists with indented continuation lines and nested blocks, inline code (any number of backticks),
``**bold**``, ``*em*`` and ``[text](http(s)://...)`` links. Everything else is text. Every piece of input text is
passed through :func:`html.escape`; no raw HTML from the input ever reaches the output, and only ``http``/``https``
links become ``<a>`` elements (never loaded by the report itself).
"""

from __future__ import annotations

import html
import re

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)\s*$")
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")  # the closing #s are stripped in Python (a lazy `.*?\s*#*\s*$` backtracks)
ITEM = re.compile(r"^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$")
BACKTICKS = re.compile(r"`+")
LINK = re.compile(r"\[([^\[\]\n]+)\]\((https?://[^\s)]+)\)")  # no '[' in the text: linear on a run of '['.
BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
EM = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")


def inline(text: str) -> str:
    """Inline markup of one paragraph's text -> escaped HTML."""
    text = text.replace("\x00", "")
    codes: list[str] = []

    def stash(html_piece: str) -> str:
        codes.append(html_piece)
        return f"\x00{len(codes) - 1}\x00"

    def code(body: str) -> str:
        if body.strip() and body.startswith(" ") and body.endswith(" "):
            body = body[1:-1]
        return stash("<code>" + html.escape(body) + "</code>")

    text = _code_spans(text, code)
    parts, pos = [], 0
    for m in LINK.finditer(text):
        parts.append(_emphasis(html.escape(text[pos:m.start()])))
        parts.append(stash('<a href="%s" rel="noreferrer noopener">' % html.escape(m.group(2), quote=True))
                     + _emphasis(html.escape(m.group(1))) + stash("</a>"))
        pos = m.end()
    parts.append(_emphasis(html.escape(text[pos:])))
    return re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], "".join(parts))


def _code_spans(text: str, code) -> str:
    """Replace each code span (a backtick run closed by the next run of the same length, with something between)
    by ``code(body)``. Linear: a regex such as ``(`+)(.+?)\\1`` backtracks for minutes on a long run of backticks."""
    runs = list(BACKTICKS.finditer(text))
    next_same: list[int | None] = [None] * len(runs)
    last: dict[int, int] = {}
    for k in range(len(runs) - 1, -1, -1):
        n = len(runs[k][0])
        next_same[k] = last.get(n)
        last[n] = k
    parts: list[str] = []
    pos, i = 0, 0
    while i < len(runs):
        j = next_same[i]
        if j is None or runs[j].start() == runs[i].end():  # unmatched, or nothing between the runs
            i += 1
            continue
        parts += [text[pos:runs[i].start()], code(text[runs[i].end():runs[j].start()])]
        pos, i = runs[j].end(), j + 1
    parts.append(text[pos:])
    return "".join(parts)


def _emphasis(escaped: str) -> str:
    escaped = BOLD.sub(r"<strong>\1</strong>", escaped)
    return EM.sub(r"<em>\1</em>", escaped)


def to_html(md: str) -> str:
    """Render markdown text (the supported subset) to an HTML fragment."""
    return "".join(_blocks(md.replace("\r\n", "\n").split("\n")))


def _dedent(lines: list[str], n: int) -> list[str]:
    return [ln[n:] if ln[:n].strip() == "" else ln.lstrip() for ln in lines]


def _blocks(lines: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        fence = FENCE.match(line)
        if fence:
            indent, mark, lang = len(fence.group(1)), fence.group(2), fence.group(3)
            body, i = [], i + 1
            while i < len(lines) and not (lines[i].strip().startswith(mark[0] * len(mark))
                                          and set(lines[i].strip()) == {mark[0]}):
                body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
                i += 1
            i += 1  # closing fence (or end of input)
            cls = f' class="language-{html.escape(lang, quote=True)}"' if lang else ""
            out.append(f"<pre><code{cls}>" + html.escape("\n".join(body)) + "</code></pre>\n")
            continue
        heading = HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            title = heading.group(2).rstrip().rstrip("#").rstrip()
            out.append(f"<h{level}>{inline(title)}</h{level}>\n")
            i += 1
            continue
        item = ITEM.match(line)
        if item:
            i = _list(lines, i, out)
            continue
        para = []
        while i < len(lines) and lines[i].strip() and not (FENCE.match(lines[i]) or HEADING.match(lines[i])
                                                           or ITEM.match(lines[i])):
            para.append(lines[i].strip())
            i += 1
        out.append("<p>" + inline(" ".join(para)) + "</p>\n")
    return out


def _list(lines: list[str], i: int, out: list[str]) -> int:
    first = ITEM.match(lines[i])
    assert first is not None
    base = len(first.group(1))
    ordered = first.group(2)[0].isdigit()
    tag = "ol" if ordered else "ul"
    start = int(first.group(2)[:-1]) if ordered else 1
    out.append(f'<{tag} start="{start}">\n' if ordered and start != 1 else f"<{tag}>\n")
    while i < len(lines):
        m = ITEM.match(lines[i])
        if not m or len(m.group(1)) != base or m.group(2)[0].isdigit() != ordered:
            break
        content_indent = len(m.group(1)) + len(m.group(2)) + 1
        body = [m.group(3)]
        i += 1
        while i < len(lines):
            ln = lines[i]
            if not ln.strip():
                nxt = next((x for x in lines[i + 1:] if x.strip()), None)
                if nxt is None or len(nxt) - len(nxt.lstrip()) <= base:
                    break
                body.append("")
                i += 1
                continue
            indent = len(ln) - len(ln.lstrip())
            if indent <= base and (ITEM.match(ln) or HEADING.match(ln) or FENCE.match(ln) or body[-1] == ""):
                break
            body.append(ln)
            i += 1
        rest = _dedent(body[1:], content_indent)
        inner = _blocks([body[0], *rest])
        if len(inner) == 1 and inner[0].startswith("<p>"):  # tight item
            inner = [inner[0][3:-5]]
        out.append("<li>" + "".join(inner).rstrip("\n") + "</li>\n")
    out.append(f"</{tag}>\n")
    return i
