"""Evaluate a rule set over frames and turn the hits into ranked :class:`~aoti_trace.model.findings.Finding` records.

Steps: mark ignore-list lines as noise -> skip rules outside their torch range -> match every rule at once
(:mod:`.compile`) -> anchor rows, captures, evidence -> reasoners (:mod:`.reasoners`) -> supersedes, dedupe,
rank (:mod:`.rank`).
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import replace
from typing import Any, Iterable

import polars as pl

from aoti_trace.engine import query
from aoti_trace.engine.cited import as_written, continuation_as_written, decoration
from aoti_trace.engine.failure_rules import FAILURE_RULES, describe, is_failure_rule
from aoti_trace.engine.ruleset import RuleSet
from aoti_trace.engine.rank import Ranked, rank
from aoti_trace.engine.reasoners import enrich
from aoti_trace.engine.schema import PLACEHOLDER_RE, ColumnRef, Leaf, Rule, TorchRange
from aoti_trace.model.findings import MAX_EVIDENCE_TEXT, Evidence, Finding, clip
from aoti_trace.model.frames import TEXT_COLUMNS, Frames
from aoti_trace.model.vocabulary import EXPLAINING_ROLES, HANDLED_LEVELS

MAX_EVIDENCE = 3
NEIGHBOUR = 12  # lines from the cited line within which another final exception is cited beside it
MESSAGE_LINES = 6  # an exception line's evidence: it and the next lines of its message
UNKNOWN = "<unknown>"
TRACE_DIR = "./torch_trace"
# Families whose evidence is written at compile/export time: TORCH_TRACE records them (load and run write nothing).
COMPILE_FAMILIES = frozenset({
    "cpp_compile_error", "lowering_error", "export_error", "autotune_error", "dynamic_shape_violation", "log_damage",
})


def evaluate(rules: RuleSet | Iterable[Rule], frames: Frames) -> list[Finding]:
    """Findings of ``rules`` over ``frames``, ranked; exactly one is primary when any has severity error."""
    ruleset = rules if isinstance(rules, RuleSet) else RuleSet(rules=list(rules))
    active = [r for r in ruleset.rules if r.status != "deprecated"]
    known = {r.id for r in active}
    active += [r for r in FAILURE_RULES if r.id not in known]  # always on, whatever the rule library
    frames = frames.copy()
    frames.tables["lines"] = query.mark_noise(frames["lines"], [e.regex for e in ruleset.ignore])
    if "failures" not in frames.tables:
        from aoti_trace.ingest.text.failure import failures_frame

        frames.tables["failures"] = failures_frame(frames)
    runs = frames.run_ids()
    if not runs:
        return []
    versions = torch_versions(frames)
    applies = {
        r.id: [run for run in runs if in_torch_range(versions.get(run), r.torch)] for r in active if r.torch is not None
    }
    plan = _plan(ruleset, active)
    matches = query.match(plan, frames, runs, applies)
    hit_runs: dict[str, list[str]] = {}
    for run_id, rule_id in matches.hits:
        hit_runs.setdefault(rule_id, []).append(run_id)

    ranked: list[Ranked] = []
    hit_rules = [cr for cr in plan.rules if hit_runs.get(cr.rule.id)]
    # the anchor rows of every rule that hit, per frame at once
    anchors = query.select_rows_many(matches, [(cr.anchor, hit_runs[cr.rule.id], cr.rule.occurrence, cr.anchor_leaf)
                                           for cr in hit_rules])
    for cr, rows in zip(hit_rules, anchors):
        ranked += _findings(cr, matches, frames, hit_runs[cr.rule.id], rows)
    from aoti_trace.engine.attribution import attribute

    return attribute(rank(_drop_explained_carriers(_supersede(ranked))), frames)


def _drop_explained_carriers(items: list[Ranked]) -> list[Ranked]:
    """Carrier findings exist so that a failure is never silent; in a run where a cause or symptom of error
    severity was found, they only repeat it (the generic wrapper around the real error) and are dropped. The
    built-in failure finding is dropped as soon as any other error finding reports the run."""
    explained = {i.finding.run_id for i in items
                 if i.finding.severity == "error" and i.rule.role in EXPLAINING_ROLES}
    reported = {i.finding.run_id for i in items
                if i.finding.severity == "error" and not is_failure_rule(i.rule.id)}
    return [i for i in items
            if not (i.rule.role == "carrier" and i.finding.run_id in explained)
            and not (is_failure_rule(i.rule.id) and i.finding.run_id in reported)]


def _plan(ruleset: RuleSet, active: list[Rule]) -> query.Plan:
    key = tuple(id(r) for r in active)
    cached = getattr(ruleset, "_plan_cache", None)
    if cached is None or cached[0] != key:
        cached = (key, query.compile_rules(active, ruleset.literals))
        ruleset._plan_cache = cached  # type: ignore[attr-defined]
    return cached[1]


# ---------------------------------------------------------------------------------------------- torch range


def _version_tuple(text: str) -> tuple[int, ...] | None:
    m = re.match(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", text.strip())
    return tuple(int(g) for g in m.groups() if g is not None) if m else None


def in_torch_range(version: str | None, bounds: TorchRange | None) -> bool:
    """True when ``version`` lies in ``bounds``; an unknown version applies every rule."""
    if bounds is None or version is None:
        return True
    v = _version_tuple(version)
    if v is None:
        return True
    if bounds.min is not None:
        lo = _version_tuple(bounds.min)
        if lo is not None and v[: len(lo)] < lo:
            return False
    if bounds.max is not None:
        hi = _version_tuple(bounds.max)
        if hi is not None and v[: len(hi)] > hi:
            return False
    return True


def torch_versions(frames: Frames) -> dict[str, str]:
    """Torch version per run: compiles.pytorch_version, else a process ``torch`` column, else a package fact."""
    out = query.first_per_run(frames, "package", "value", where=("key", ["torch_version", "pytorch_version"]))
    out.update(query.first_per_run(frames, "process", "torch"))
    out.update(query.first_per_run(frames, "compiles", "pytorch_version"))
    return out


# ---------------------------------------------------------------------------------------------- findings


def _findings(cr: query.CompiledRule, matches: query.Matches, frames: Frames, runs_hit: list[str],
              rows: list[dict[str, Any]]) -> list[Ranked]:
    """The findings of rule ``cr`` in the runs it hit, from its anchor ``rows`` (``query.select_rows_many``)."""
    leaf = cr.anchor_leaf
    by_run: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_run.setdefault(row["run_id"], []).append(row)
    out: list[Ranked] = []
    last_rows = _LastRows(matches, runs_hit)
    for run_id in runs_hit:
        anchors: list[tuple[query.Pred, Leaf | None, dict[str, Any]]] = [(cr.anchor, leaf, row)
                                                                     for row in by_run.get(run_id, [])]
        if not anchors:  # the anchor sat in an `any` branch that did not hit: use the first positive row instead
            anchors = _fallback_anchor(cr, matches, run_id)
        for pred, aleaf, row in anchors:
            out.append(_finding(cr, matches, frames, run_id, pred, aleaf, row, last_rows))
    return out


class _LastRows:
    """The last row where a predicate holds, per run of the rule's hit runs: one query per predicate for all of
    them (what ``query.select_rows(matches, pred, [run_id], "last")`` gives for each run)."""

    def __init__(self, matches: query.Matches, runs_hit: list[str]) -> None:
        self.matches, self.runs_hit = matches, runs_hit
        self.by_pred: dict[str, dict[str, dict[str, Any]]] = {}

    def get(self, pred: query.Pred, run_id: str) -> list[dict[str, Any]]:
        rows = self.by_pred.get(pred.name)
        if rows is None:
            rows = self.by_pred[pred.name] = {r["run_id"]: r for r in query.select_rows(self.matches, pred, self.runs_hit, "last")}
        row = rows.get(run_id)
        return [dict(row)] if row is not None else []


def _neighbour_exception(frames: Frames, run_id: str, anchor: Evidence) -> dict[str, Any] | None:
    """Another exception the run ended with, printed within ``NEIGHBOUR`` lines of the cited line (a wrapper's
    summary and its cause, two chains printed one after the other: 'TorchExportError: Failed to export ...' a few
    lines above the 'GuardOnDataDependentSymNode' of its summary): the nearest one, so that a reader sees what the
    run died with next to why. None when the anchor has no line, no such exception is near, or it is another
    rank's."""
    if anchor.line is None or anchor.path is None:
        return None
    rows = [r for r in query.run_rows(frames, "exceptions", run_id,
                                      ["path", "lineno", "exc_type", "message", "is_final", "complete", "level"])
            if r.get("is_final") and r.get("complete") and r.get("level") not in HANDLED_LEVELS
            and r.get("path") == anchor.path and isinstance(r.get("lineno"), int) and r["lineno"] != anchor.line
            and abs(r["lineno"] - anchor.line) <= NEIGHBOUR]
    if not rows:
        return None
    near = min(rows, key=lambda r: abs(r["lineno"] - anchor.line))
    # of the same process: in an interleaved multi-rank log, another rank's exception is not this failure's
    ranks = dict(frames["lines"].filter((pl.col("run_id") == run_id) & (pl.col("path") == anchor.path)
                                        & pl.col("lineno").is_in([anchor.line, near["lineno"]]))
                 .select("lineno", "rank").iter_rows())
    return near if ranks.get(anchor.line) == ranks.get(near["lineno"]) else None


def _distinct(evidence: list[Evidence]) -> list[Evidence]:
    """Each citation once (an exception line can be both a predicate's row and the anchor's enclosing exception, with
    the same text; the same line cited from two frames with different texts stays twice)."""
    seen: set[tuple[str | None, int | None, str]] = set()
    out = []
    for ev in evidence:
        key = (ev.path, ev.line, ev.text)
        if key not in seen:
            seen.add(key)
            out.append(ev)
    return out


def _fallback_anchor(cr: query.CompiledRule, matches: query.Matches, run_id: str) -> list[tuple[query.Pred, Leaf | None, dict[str, Any]]]:
    for pred in cr.positives:
        rows = query.select_rows(matches, pred, [run_id], cr.rule.occurrence, pred.leaf)
        if rows:
            return [(pred, pred.leaf, row) for row in rows]
    return []


def _finding(
    cr: query.CompiledRule, matches: query.Matches, frames: Frames, run_id: str, pred: query.Pred, leaf: Leaf | None,
    row: dict[str, Any], last_rows: _LastRows,
) -> Ranked:
    rule = cr.rule
    fields = _extract(rule, row)
    evidence = [_with_message_lines(evidence_of(pred.frame, row, leaf), frames, run_id)]
    context = _enclosing_exception(frames, run_id, row) if pred.frame == "lines" else None
    if context is not None:
        evidence.append(_exception_as_written(evidence_of("exceptions", context, None), frames, run_id))
    seen = {(pred.frame, row.get(query.ROW))}
    for other in cr.positives:  # the rows of the rule's other positive predicates
        if len(evidence) >= MAX_EVIDENCE:
            break
        if other is pred:
            continue
        hits = last_rows.get(other, run_id)
        if hits and (other.frame, hits[0].get(query.ROW)) not in seen:
            evidence.append(_exception_as_written(evidence_of(other.frame, hits[0], other.leaf), frames, run_id))
            seen.add((other.frame, hits[0].get(query.ROW)))
    near = _neighbour_exception(frames, run_id, evidence[0]) if pred.frame != "failures" else None
    if near is not None and not any(ev.path == near["path"] and ev.line == near["lineno"] for ev in evidence):
        evidence.append(_exception_as_written(evidence_of("exceptions", near, None), frames, run_id))
    evidence = _distinct(evidence)
    finding = Finding(
        run_id=run_id,
        rule_id=rule.id,
        rule_name=rule.name,
        family=rule.family,
        severity=rule.severity,
        role=rule.role,
        precision=rule.precision,
        rule_version=rule.version,
        title=rule.title,
        message=render(rule.message, fields),
        remedy=render(rule.remedy, fields).strip(),
        guide=rule.guide,
        env_flags=dict(rule.env_flags),
        evidence=evidence,
        fields=fields,
        fingerprint=fingerprint(rule.id, fields),
    )
    finding = enrich(describe(finding, frames) if is_failure_rule(rule.id) else finding, frames)
    finding = replace(finding, rerun=rerun_command(finding.env_flags, frames, run_id, finding.family))
    position = (row.get("lineno") if isinstance(row.get("lineno"), int) else None, row.get(query.ROW, 0))
    return Ranked(finding, rule, position)


def _with_message_lines(ev: Evidence, frames: Frames, run_id: str) -> Evidence:
    """A log line that is an exception's ``Type: message`` line, with the next lines of its message (a long
    message's detail: the op of a LoweringException, the violated guard): at most MESSAGE_LINES lines."""
    if ev.source not in ("lines", "failures") or ev.line is None or ev.path is None:
        return ev
    excs = frames["exceptions"]
    if excs.height == 0:
        return ev
    if excs.height > query.INDEX_MAX_ROWS:
        found = excs.filter((pl.col("run_id") == run_id) & (pl.col("path") == ev.path) & (pl.col("lineno") == ev.line))
        message = found.get_column("message")[0] if found.height else None
        if found.height == 0:
            return ev
    else:
        hit = next((r for r in _exceptions_by_file(frames, excs).get((run_id, ev.path), ()) if r["lineno"] == ev.line),
                   None)
        if hit is None:
            return ev
        message = hit["message"]
    parts = (message or "").splitlines()
    # the message's first line is on the exception line, unless that line ends at its type ('SpecViolationError:'
    # and the message below it): then every line of the message is a next line
    first = 1 if parts and parts[0].strip() and parts[0].strip() in ev.text else 0
    more = [ln for ln in parts[first:] if ln.strip()][:MESSAGE_LINES - 1]
    if not more:
        return ev
    extra = 0  # the cited line's decoration, not counted in MAX_EVIDENCE_TEXT
    if ev.source == "lines":  # the next lines as written too (their decoration: '[rank0]:   target: ...')
        row = _line_row(frames, run_id, ev.path, ev.line)
        if row is not None:
            extra = len(decoration(row["prefix"], row["text"], row["raw"]))
            more = continuation_as_written(frames["lines"], run_id, ev.path, ev.line, row["rank"], more,
                                           MAX_EVIDENCE_TEXT)
    return replace(ev, text="\n".join([ev.text, *more])[:MAX_EVIDENCE_TEXT + extra])


def _exception_as_written(ev: Evidence, frames: Frames, run_id: str) -> Evidence:
    """An ``exceptions`` row's evidence (``Type: message line``) as the log wrote its exception line, where the
    evidence is that line: its decoration, and the log's own form where ingest rewrote it (``<class 'T'>: m``,
    IPython's traceback lines). Evidence from a later line of the message is left as it is."""
    if ev.source != "exceptions" or ev.line is None or ev.path is None:
        return ev
    row = _line_row(frames, run_id, ev.path, ev.line)
    if row is None or (row["text"] or "").strip() != ev.text.strip():
        return ev
    return replace(ev, text=as_written(row["prefix"], row["text"], row["raw"], MAX_EVIDENCE_TEXT))


def _line_row(frames: Frames, run_id: str, path: str | None, lineno: int | None) -> dict[str, Any] | None:
    """The ``lines`` row of a cited log line (the first, where several share it), or None."""
    rows = frames["lines"].filter((pl.col("run_id") == run_id) & (pl.col("path") == path)
                                  & (pl.col("lineno") == lineno)).head(1).to_dicts()
    return rows[0] if rows else None


def _enclosing_exception(frames: Frames, run_id: str, row: dict[str, Any]) -> dict[str, Any] | None:
    """The exception whose multi-line message holds the anchored line (the line is not the exception line itself):
    its ``Type: message`` line is the context a reader needs."""
    lineno, path, text = row.get("lineno"), row.get("path"), (row.get("text") or "").strip()
    if not isinstance(lineno, int) or not text:
        return None
    excs = frames["exceptions"]
    if excs.height == 0:
        return None
    if excs.height > query.INDEX_MAX_ROWS:
        found = excs.filter((pl.col("run_id") == run_id) & (pl.col("path") == path) & (pl.col("lineno") < lineno)
                            & pl.col("message").str.contains(text[:200], literal=True))
        return found.sort("lineno").row(-1, named=True) if found.height else None
    if not isinstance(path, str):
        return None
    needle = text[:200]
    before = [r for r in _exceptions_by_file(frames, excs).get((run_id, path), ())
              if r["lineno"] is not None and r["lineno"] < lineno and r["message"] is not None and needle in r["message"]]
    if not before:
        return None
    last = max(r["lineno"] for r in before)  # the latest such exception (the last of a stable sort by lineno)
    return dict([r for r in before if r["lineno"] == last][-1])


def _exceptions_by_file(frames: Frames, excs: pl.DataFrame) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The rows of the ``exceptions`` frame per (run, path), in frame order (built once per set of frames)."""
    def build() -> dict[tuple[str, str], list[dict[str, Any]]]:
        out: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for r in excs.to_dicts():
            out.setdefault((r["run_id"], r["path"]), []).append(r)
        return out
    return frames.index("exceptions_by_file", excs, build)


def _extract(rule: Rule, row: dict[str, Any]) -> dict[str, str]:
    groups = row.get("__groups") or {}
    fields: dict[str, str] = {}
    for name, ref in rule.extract.items():
        if isinstance(ref, ColumnRef):
            value = row.get(ref.column)
        else:  # 'a|b': the first group that captured (alternatives of one regex cannot share a group name)
            value = next((groups[g] for g in ref.split("|") if groups.get(g) is not None), None)
        if value is not None:
            fields[name] = str(value).strip()
    return fields


def render(template: str, fields: dict[str, str]) -> str:
    """Replace ``{{name}}`` placeholders; a field that was not captured renders as ``<unknown>``."""
    return PLACEHOLDER_RE.sub(lambda m: fields.get(m[1], UNKNOWN), template)


# ---------------------------------------------------------------------------------------------- evidence


def _first_line(text: str | None) -> str:
    if not text:
        return ""
    return next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")


def matching_line(text: str | None, leaf: Leaf | None) -> str:
    """The line of a (multi-line) cell that the leaf matched; else its first non-empty line.

    The match is located by the engine that matched the rule (Polars: Rust regex, linear time), never by Python's
    backtracking ``re``: a user rule such as ``(a+)+b`` must not run for minutes on a long cell."""
    if not text:
        return ""
    if leaf is not None and (leaf.regex is not None or leaf.contains is not None):
        cell = text
        if leaf.regex is not None:
            pattern, literal = ("(?i)" if leaf.ignore_case else "") + leaf.regex, False
        else:
            pattern, literal = leaf.contains or "", True
            if leaf.ignore_case:  # as the rule matched; lower-casing keeps every newline where it was
                cell, pattern = text.lower(), pattern.lower()
        try:
            at = pl.Series([cell], dtype=pl.String).str.find(pattern, literal=literal)[0]
        except pl.exceptions.PolarsError:
            at = None
        if at is not None:
            index = cell.encode("utf-8", "surrogatepass")[:at].count(b"\n")
            lines = text.split("\n")
            line = lines[index].strip() if index < len(lines) else ""
            if line:
                return line
    return _first_line(text)


def evidence_of(frame: str, row: dict[str, Any], leaf: Leaf | None) -> Evidence:
    """An evidence item for one row of ``frame``."""
    column = TEXT_COLUMNS.get(frame)
    own = leaf if (leaf is not None and leaf.column == column) else None
    text: str
    if frame == "lines":  # the line as written: its decoration (timestamp, CI or log header) and the message
        text = as_written(row.get("prefix"), str(row.get("text") or ""), row.get("raw"), MAX_EVIDENCE_TEXT)
        return Evidence(source=frame, path=row.get("path"), line=_lineno(row), text=text)
    if frame == "exceptions":
        line = matching_line(row.get("message"), own)
        text = f"{row.get('exc_type')}: {line}" if row.get("exc_type") else line
    elif frame == "compiles":
        text = matching_line(row.get("fail_reason"), own) or " ".join(
            str(v) for v in (row.get("status"), row.get("fail_type")) if v
        )
    elif frame == "device_asserts":
        text = str(row.get("assertion") or "")
    elif frame == "faults":
        text = _first_line(row.get("what")) or f"{row.get('signal') or row.get('kind')}: {_first_line(row.get('stack'))}"
    elif frame == "package":
        text = f"{row.get('key')}={row.get('value')}"
    elif frame == "process":
        text = f"exit_code={row.get('exit_code')} signal={row.get('signal')}"
    elif frame in ("events", "artifacts"):
        text = " ".join(str(v) for v in (row.get("event"), row.get("name")) if v)
    elif frame == "stacks":
        text = f"{row.get('filename')}:{row.get('line')} in {row.get('function')}"
    elif frame == "printer":
        text = " ".join(f"{k}={row.get(k)}" for k in ("event", "kernel", "arg", "min", "max", "mean") if row.get(k) is not None)
    elif frame == "damage":
        text = f"{row.get('kind')}: {row.get('detail')}"
    elif frame == "failures":
        text = str(row.get("text") or row.get("what") or "")
    elif frame == "divergence":
        text = str(row.get("detail") or "")
    else:
        text = str(row)
    return Evidence(source=frame, path=row.get("path"), line=_lineno(row), text=clip(text, MAX_EVIDENCE_TEXT))


def _lineno(row: dict[str, Any]) -> int | None:
    lineno = row.get("lineno")
    return lineno if isinstance(lineno, int) else None


# ---------------------------------------------------------------------------------------------- fingerprint, rerun

_NORMALISE = [
    (re.compile(r"(?:[A-Za-z]:)?(?:[\\/][^\s\\/:'\"]+)+[\\/]"), ""),  # directories (cache dirs, temp dirs, build roots)
    (re.compile(r"aotinductor_\w+"), "aotinductor_X"),
    (re.compile(r"0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"\b[0-9a-f]{8,}\b|[0-9a-z]{20,}"), "<hash>"),
    (re.compile(r"\b(?:pid|PID)[ =:]*\d+"), "pid"),
]


def normalise(value: str) -> str:
    for pattern, repl in _NORMALISE:
        value = pattern.sub(repl, value)
    return value.strip()


def fingerprint(rule_id: str, fields: dict[str, str]) -> str:
    """sha256 over the rule id and the normalised fields: stable across runs, machines and cache dirs."""
    body = rule_id + "\0" + "\0".join(f"{k}={normalise(v)}" for k, v in sorted(fields.items()))
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def rerun_command(env_flags: dict[str, str], frames: Frames, run_id: str, family: str) -> str | None:
    """``VAR=value ... <original command>``; adds TORCH_TRACE when a compile-time failure has no trace (load and
    run never write one). None if nothing to add."""
    env = dict(env_flags)
    if family in COMPILE_FAMILIES and not query.has_rows(frames, "events", run_id):
        env.setdefault("TORCH_TRACE", TRACE_DIR)
    if not env:
        return None
    procs = query.run_rows(frames, "process", run_id, ["command"])
    command = next((p["command"] for p in procs if p.get("command")), None) or "<your command>"
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return f"{prefix} {command}"


# ---------------------------------------------------------------------------------------------- supersedes


def _supersede(items: list[Ranked]) -> list[Ranked]:
    suppressed: dict[str, set[str]] = {}
    for item in items:
        suppressed.setdefault(item.finding.run_id, set()).update(item.rule.supersedes)
    seen: set[tuple[str, str, str]] = set()
    out: list[Ranked] = []
    for item in items:
        f = item.finding
        if f.rule_id in suppressed.get(f.run_id, set()):
            continue
        key = (f.run_id, f.rule_id, f.fingerprint)
        if key in seen:  # occurrence: all -> one finding per distinct fingerprint
            continue
        seen.add(key)
        out.append(item)
    return out
