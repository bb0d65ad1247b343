"""Helpers shared by the report formats: pure functions of the :class:`~aoti_trace.model.analysis.Analysis` (its findings,
frames and guides). What a report shows from files (log lines, generated code, chromium events) comes from frames
(``lines``, ``generated``, ``code``, ``chromium``); nothing here opens a file.

* :func:`first_paragraph`, :func:`highlights` -- finding text helpers
* :func:`guide_file`, :func:`guide_summary` -- the rule's sub-guide (``rules/guides/...``)
* :func:`user_location` -- the user's source frame of a finding (SARIF location, report "at:" line)
* :func:`context_lines` -- lines around an evidence line in a captured log (the ``lines`` frame)
* :func:`generated_sources` -- generated kernel / wrapper code around a failing line (device asserts, compiler errors)
* :func:`timelines` -- compile phases from the trace's chromium events
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from aoti_trace.ingest import safe_json
from aoti_trace.ingest.code import GENERATED_REF

if TYPE_CHECKING:
    from aoti_trace.model.analysis import Analysis
    from aoti_trace.model.findings import Evidence, Finding

# frames whose evidence rows come from captured text logs (a context excerpt makes sense there)
TEXT_SOURCES = ("lines", "exceptions", "device_asserts", "faults", "printer")
MAX_CHROMIUM_EVENTS = 5000  # per run: payloads read for the timeline


# ------------------------------------------------------------------------------------------- finding text
def first_paragraph(text: str) -> str:
    return (text or "").strip().split("\n\n")[0].strip()


def highlights(text: str, f: Finding) -> list[tuple[int, int]]:
    """Non-overlapping (start, end) spans of ``text`` that repeat one of the finding's extracted field values."""
    spans: list[tuple[int, int]] = []
    for value in sorted({v for v in f.fields.values() if v and len(v.strip()) >= 3}, key=len, reverse=True):
        start = 0
        while (i := text.find(value, start)) >= 0:
            end = i + len(value)
            if not any(i < e and s < end for s, e in spans):
                spans.append((i, end))
            start = end
    return sorted(spans)


def split_highlights(text: str, f: Finding) -> list[tuple[str, bool]]:
    """``text`` cut into (piece, highlighted) pairs."""
    out, pos = [], 0
    for s, e in highlights(text, f):
        if s > pos:
            out.append((text[pos:s], False))
        out.append((text[s:e], True))
        pos = e
    if pos < len(text):
        out.append((text[pos:], False))
    return out


def evidence_location(ev: Evidence) -> str:
    if ev.path and ev.line:
        return f"{ev.path}:{ev.line}"
    return ev.path or ev.source


def severity_counts(findings: Iterable[Finding], sep: str = ", ") -> str:
    """'1 error, 0 warnings, 2 info': the one wording of the finding counts in every format."""
    from aoti_trace.model.vocabulary import SEVERITIES

    plural = {"error": "errors", "warning": "warnings", "info": "info"}
    counts = {s: sum(f.severity == s for f in findings) for s in SEVERITIES}
    return sep.join(f"{n} {s if n == 1 else plural[s]}" for s, n in counts.items())


# ------------------------------------------------------------------------------------------------ guides
def guide_file(analysis: Analysis, f: Finding) -> Path | None:
    """The guide file of a finding's rule (read by the analysis from the rule's folder); None when it has none."""
    guide = analysis.guides.get(f.rule_id)
    return guide.path if guide is not None else None


def guide_text(analysis: Analysis, f: Finding) -> str | None:
    guide = analysis.guides.get(f.rule_id)
    return guide.text if guide is not None else None


def guide_display(analysis: Analysis, f: Finding) -> str | None:
    """What to print for the guide: the file path (relative to the working directory when under it), else the
    rule's relative path."""
    path = guide_file(analysis, f)
    if path is not None:
        try:
            return str(path.relative_to(Path.cwd()))
        except ValueError:
            return str(path)
    return f.guide


def guide_summary(analysis: Analysis, f: Finding) -> str | None:
    """First paragraph of the guide's 'What happened' section (SARIF fullDescription)."""
    text = guide_text(analysis, f)
    if not text:
        return None
    m = re.search(r"^##\s+What happened\s*\n+(.*?)(?:\n\s*\n|\Z)", text, re.S | re.M)
    return " ".join(m.group(1).split()) if m else None


# ------------------------------------------------------------------------------------------- locations
@dataclass(frozen=True)
class Location:
    path: str
    line: int | None
    kind: str  # 'user' (user's source frame) | 'evidence' (the log line the evidence came from)


def _row_at(df: pl.DataFrame, run_id: str, path: str | None, line: int | None) -> dict[str, Any] | None:
    if df.height == 0 or path is None or line is None:
        return None
    hit = df.filter((pl.col("run_id") == run_id) & (pl.col("path") == path) & (pl.col("lineno") == line))
    return hit.row(0, named=True) if hit.height else None


def _real_file(name: str | None) -> bool:
    return bool(name and not name.startswith("<"))


def split_frame(frame: str | None) -> tuple[str, int | None] | None:
    """'file:line' -> (file, line)."""
    if not frame:
        return None
    m = re.fullmatch(r"(.+):(\d+)", frame.strip())
    return (m.group(1), int(m.group(2))) if m else (frame, None)


def user_location(analysis: Analysis, f: Finding) -> Location | None:
    """The user's source frame for ``f``: from the exception, fault or compile its evidence points at; for the
    primary finding also from the run's final exception or failed compile. None when unknown."""
    frames = analysis.frames
    for ev in f.evidence:
        if ev.source in ("exceptions", "faults"):
            row = _row_at(frames[ev.source], f.run_id, ev.path, ev.line)
            if row and _real_file(row["user_file"]):
                return Location(row["user_file"], row["user_line"], "user")
        if ev.source == "compiles":
            row = _row_at(frames["compiles"], f.run_id, ev.path, ev.line)
            loc = split_frame(row["user_frame"]) if row else None
            if loc and _real_file(loc[0]):
                return Location(loc[0], loc[1], "user")
    if not f.primary:
        return None
    exc = frames["exceptions"].filter((pl.col("run_id") == f.run_id) & pl.col("is_final").fill_null(False)
                                      & pl.col("user_file").is_not_null())
    for row in exc.iter_rows(named=True):
        if _real_file(row["user_file"]):
            return Location(row["user_file"], row["user_line"], "user")
    comp = frames["compiles"].filter((pl.col("run_id") == f.run_id) & (pl.col("status") != "ok"))
    for row in comp.iter_rows(named=True):
        loc = split_frame(row["user_frame"])
        if loc and _real_file(loc[0]):
            return Location(loc[0], loc[1], "user")
    return None


def primary_location(analysis: Analysis, f: Finding) -> Location | None:
    """User frame when known, else the first evidence file:line."""
    loc = user_location(analysis, f)
    if loc is not None:
        return loc
    for ev in f.evidence:
        if ev.path and ev.path != "-":
            return Location(ev.path, ev.line, "evidence")
    return None


def inside(path: str, root: Path | None) -> str | None:
    """``path`` relative to ``root`` (POSIX) when it lies inside it, else None (relative paths are taken from the
    working directory)."""
    if root is None:
        return None
    p = Path(path)
    try:
        return (p if p.is_absolute() else Path.cwd() / p).resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        return None


def repo_location(analysis: Analysis, f: Finding, root: Path | None) -> Location | None:
    """Where a code-scanning alert or a CI annotation goes (one policy for ``sarif`` and ``github``): the user's
    call site when it is inside ``root`` (the checkout), else the first evidence line inside ``root`` (a captured
    log committed or written in the checkout), else :func:`primary_location` (outside ``root``: a viewer may not
    place it). The log lines stay in the related locations either way."""
    user = user_location(analysis, f)
    if user is not None and inside(user.path, root) is not None:
        return user
    for ev in f.evidence:
        if ev.path and ev.path != "-" and inside(ev.path, root) is not None:
            return Location(ev.path, ev.line, "evidence")
    return primary_location(analysis, f)


PROVENANCE_ARTIFACTS = ("inductor_provenance_tracking_node_mappings", "inductor_provenance_tracking_kernel_stack_traces")


def tlparse_command(analysis: Analysis, run_id: str) -> str | None:
    """The tlparse command for a run's TORCH_TRACE log (None without one): ``tlparse FILE`` for one file,
    ``tlparse DIR --all-ranks-html`` for several in one folder, plus ``--inductor-provenance`` when the log has
    Inductor's provenance-tracking artifacts (tlparse then draws its provenance pages)."""
    import shlex

    run = next((r for r in analysis.runs if r.run_id == run_id), None)
    if run is None or not run.trace_files:
        return None
    files = sorted({str(p) for p in run.trace_files})
    folders = {str(Path(p).parent) for p in files}
    if len(files) == 1:
        cmd = f"tlparse {shlex.quote(files[0])}"
    elif len(folders) == 1:
        cmd = f"tlparse {shlex.quote(folders.pop())} --all-ranks-html"
    else:
        cmd = f"tlparse {shlex.quote(files[-1])}"
    ev = analysis.frames["events"]
    if ev.height and ev.filter((pl.col("run_id") == run_id) & pl.col("name").is_in(PROVENANCE_ARTIFACTS)).height:
        cmd += " --inductor-provenance"
    return cmd


# ---------------------------------------------------------------------------------------- log excerpts
def context_lines(analysis: Analysis, path: str | None, line: int | None, radius: int = 3) -> list[tuple[int, str]]:
    """(lineno, text) around ``line`` of a captured text log, from the ``lines`` frame (``raw``, the line as written,
    without colour codes); empty when the frame has no line there (a log too long to keep every line)."""
    if not path or not line or path == "-":
        return []
    lines = analysis.frames["lines"]
    if not lines.height:
        return []
    rows = (lines.filter((pl.col("path") == path) & pl.col("lineno").is_between(line - radius, line + radius))
            .unique("lineno", keep="first", maintain_order=True).sort("lineno")
            .select("lineno", pl.col("raw").fill_null("")))
    return [(n, t) for n, t in rows.iter_rows()]


# ------------------------------------------------------------------------------------- generated sources
DUMP_FOR_SUFFIX = {".wrapper.cpp": "inductor_aot_wrapper_code", ".kernel.cpp": "inductor_aot_kernel_code"}


@dataclass
class SourceView:
    """An excerpt of generated code around a line a failure points at."""

    file: str  # the generated file as the log names it
    line: int | None  # the line the log names (in ``file``)
    origin: str  # where the text was found: 'disk', 'package <path>', 'trace <name> (<path>:<lineno>)'
    lines: list[tuple[int, str]] = field(default_factory=list)  # (lineno, text) of the excerpt
    focus: int | None = None  # the highlighted line in ``lines``
    why: str = ""  # what pointed here (device assert, compiler error, ...)


def _references(analysis: Analysis, f: Finding) -> list[tuple[str, int | None, str | None, str]]:
    """(generated file, line, needle, why) that ``f`` points at."""
    refs: list[tuple[str, int | None, str | None, str]] = []
    da = analysis.frames["device_asserts"].filter(pl.col("run_id") == f.run_id)
    if f.family in ("triton_index_oob", "illegal_memory_access", "nan_assert") or any(
        ev.source == "device_asserts" for ev in f.evidence
    ):
        for row in da.head(2).iter_rows(named=True):
            if row["kernel_file"]:
                needle = row["assertion"]
                if needle and needle.startswith("index out of bounds"):
                    needle = f'"{needle}"'
                refs.append((row["kernel_file"], row["kernel_line"], needle, "device-side assertion"))
    texts = [f.message, *f.fields.values(), *(ev.text for ev in f.evidence)]
    if f.primary or f.family in ("triton_index_oob", "cpp_compile_error"):
        lines = analysis.frames["lines"]
        if lines.height:
            hits = lines.filter((pl.col("run_id") == f.run_id)
                                & pl.col("text").str.contains(r"\.(?:wrapper|kernel)\.cpp:\d+"))
            texts += hits["text"].head(5).to_list()
    found = pl.Series([t or "" for t in texts], dtype=pl.String).str.extract_all(GENERATED_REF).to_list()
    for text, matches in zip(texts, found):
        for m in matches or []:
            file, _, line = m.rpartition(":")
            why = ("compiler error" if "error:" in text else "C++ exception site" if "Exception raised from" in text
                   else "C++ stack frame" if text.lstrip().startswith("#") else "named in the log")
            refs.append((file, int(line), None, why))
    seen, out = set(), []
    for r in refs:  # one excerpt per generated file: the first line that points into it
        if r[0] not in seen:
            seen.add(r[0])
            out.append(r)
    return out[:3]


FUNC_START = re.compile(r"^\s*(?:def |@triton|extern \"C\"|void |static )")


def _excerpt(text: str, line: int, radius: int) -> list[tuple[int, str]]:
    """Lines around ``line``; starts at the enclosing function header when it is at most 40 lines above."""
    lines = text.split("\n")
    lo, hi = max(1, line - radius), min(len(lines), line + radius)
    for i in range(line, max(0, line - 40), -1):
        if i <= len(lines) and FUNC_START.match(lines[i - 1]):
            lo = min(lo, i)
            break
    return [(i, lines[i - 1]) for i in range(lo, hi + 1)]


def _named_source(analysis: Analysis, run_id: str, file: str) -> tuple[str, str] | None:
    """(text, origin) of a generated file the log names, from the ``generated`` frame (disk, else a package)."""
    gen = analysis.frames["generated"]
    if not gen.height:
        return None
    hit = gen.filter((pl.col("run_id") == run_id) & (pl.col("file") == file)).head(1)
    if not hit.height:
        return None
    row = hit.row(0, named=True)
    return row["text"], "disk" if row["source"] == "disk" else f"package {row['path']} ({row['entry']})"


def _dump_payloads(analysis: Analysis, run_id: str, names: list[str] | None) -> list[tuple[str, str]]:
    """(text, origin) of graph_dump / output-code dumps of the run (the ``code`` frame), the latest first."""
    code = analysis.frames["code"]
    if code.height == 0:
        return []
    q = code.filter((pl.col("run_id") == run_id) & (pl.col("source") == "trace"))
    if names is not None:
        q = q.filter(pl.col("name").is_in(names))
    else:
        q = q.filter((pl.col("event") == "graph_dump") | pl.col("name").str.contains("output_code|kernel_code"))
    return [(row["text"], f"trace {row['name']} ({row['path']}:{row['lineno']})")
            for row in reversed(q.tail(20).rows(named=True))]


def generated_sources(analysis: Analysis, f: Finding, radius: int = 6) -> list[SourceView]:
    """Generated code around the lines ``f`` points at (device-assert kernel lines, compiler error lines).

    The text comes from the ``generated`` frame (the file on disk, else in the run's .pt2 packages), then from the
    trace's dumps in the ``code`` frame (``inductor_aot_wrapper_code`` / ``inductor_aot_kernel_code`` for ``.wrapper.cpp`` /
    ``.kernel.cpp``), then by searching the dumps for the assertion text."""
    views: list[SourceView] = []
    for file, line, needle, why in _references(analysis, f):
        found = _named_source(analysis, f.run_id, file)
        if found is None:
            suffix = next((s for s in DUMP_FOR_SUFFIX if file.endswith(s)), None)
            if suffix:
                dumps = _dump_payloads(analysis, f.run_id, [DUMP_FOR_SUFFIX[suffix]])
                fitting = [d for d in dumps if line is None or d[0].count("\n") + 1 >= line]
                if fitting:
                    found = fitting[0]
        view: SourceView | None = None
        if found is not None and line:
            view = SourceView(file, line, found[1], _excerpt(found[0], line, radius), line, why)
        elif needle:
            for text, origin in _dump_payloads(analysis, f.run_id, None):
                idx = next((i for i, t in enumerate(text.split("\n"), 1) if needle in t), None)
                if idx is not None:
                    view = SourceView(file, line, origin + "; matched by the assertion text, line numbers are the "
                                      "dump's", _excerpt(text, idx, radius), idx, why)
                    break
        if view is not None and view.lines:
            views.append(view)
    return views


# ------------------------------------------------------------------------------------------- timelines
@dataclass
class Span:
    name: str
    start_us: float
    end_us: float
    depth: int
    failed: bool = False  # the closing event carries a fail_type
    unfinished: bool = False  # never closed: the process stopped inside this phase

    @property
    def duration_s(self) -> float:
        return max(0.0, (self.end_us - self.start_us) / 1e6)


@dataclass
class Timeline:
    run_id: str
    path: str
    rank: int | None
    session: int | None
    spans: list[Span]
    truncated: bool = False  # more chromium events than were read

    @property
    def start_us(self) -> float:
        return min(s.start_us for s in self.spans)

    @property
    def end_us(self) -> float:
        return max(s.end_us for s in self.spans)


def timelines(analysis: Analysis, max_events: int = MAX_CHROMIUM_EVENTS) -> list[Timeline]:
    """Compile-phase spans per (run, trace file, session), from the ``chromium`` frame (the first ``max_events`` of
    each run)."""
    ev = analysis.frames["chromium"]
    if ev.height == 0:
        return []
    out: list[Timeline] = []
    for run_id in ev["run_id"].unique(maintain_order=True).to_list():
        rows = ev.filter(pl.col("run_id") == run_id)
        truncated = rows.height > max_events
        rows = rows.head(max_events)
        groups: dict[tuple[Any, ...], list[tuple[int, dict[str, Any]]]] = {}
        for path in rows["path"].unique(maintain_order=True).to_list():
            for row in rows.filter(pl.col("path") == path).rows(named=True):
                text = row["payload"]
                try:
                    d = safe_json.loads(text)
                except ValueError:  # damaged, or nested too deeply
                    continue
                if not _phase_event(d):
                    continue
                groups.setdefault((path, row["rank"], row["session"]), []).append((row["lineno"], d))
        for (path, rank, session), events in groups.items():
            spans = _spans([d for _, d in sorted(events, key=lambda e: e[0])])
            if spans:
                out.append(Timeline(run_id, path, rank, session, spans, truncated))
    return out


def _phase_event(d: object) -> bool:
    """A chromium event the timeline can place: a finite time stamp, a name, a hashable thread id."""
    if not isinstance(d, dict) or not d.get("name") or isinstance(d.get("tid"), (list, dict)):
        return False
    ts, dur = d.get("ts"), d.get("dur")
    return (_finite(ts) and (dur is None or not isinstance(dur, (int, float)) or _finite(dur))
            and isinstance(d["name"], (str, int, float)))


def _finite(v: object) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v) and abs(v) < 1e18
    except OverflowError:  # an integer too large for a float
        return False


def _spans(events: list[dict[str, Any]]) -> list[Span]:
    spans: list[Span] = []
    stacks: dict[object, list[tuple[str, float]]] = {}
    last_ts = max(float(d["ts"]) for d in events)
    for d in events:
        ph, name, ts = d.get("ph"), str(d["name"]), float(d["ts"])
        stack = stacks.setdefault(d.get("tid"), [])
        if ph == "B":
            stack.append((name, ts))
        elif ph == "E":
            idx = next((i for i in range(len(stack) - 1, -1, -1) if stack[i][0] == name), None)
            if idx is None:
                continue
            _, start = stack.pop(idx)
            args = d.get("args")
            if not isinstance(args, dict):
                args = {}
            failed = bool(args.get("fail_type")) and str(args.get("fail_type")) != "None"
            spans.append(Span(name, start, ts, idx, failed))
        elif ph == "X" and isinstance(d.get("dur"), (int, float)):
            spans.append(Span(name, ts, ts + float(d["dur"]), len(stack)))
    for stack in stacks.values():
        for depth, (name, start) in enumerate(stack):
            spans.append(Span(name, start, last_ts, depth, unfinished=True))
    spans.sort(key=lambda s: (s.start_us, s.depth))
    return spans
