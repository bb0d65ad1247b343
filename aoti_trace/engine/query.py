"""Every Polars call of the rule engine lives here (rule-design.md §6, §7).

Rules compile to *predicates*: a leaf outside ``scope: row`` is one predicate, a ``scope: row`` node is one predicate
(a single row expression). Each frame is evaluated in **one** ``with_columns`` pass that adds one boolean column per
predicate; ``group_by(run_id).any()`` turns them into run-level truth values, the per-frame results are joined on
``run_id`` and every rule's tree becomes one horizontal expression (``all_horizontal`` / ``any_horizontal`` / ``~``).
Only for the rules that hit are the anchor rows looked up again, with ``extract_groups`` for the captures.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any

import polars as pl

from aoti_trace.model.literal import required_literals
from aoti_trace.engine.schema import SKIPPED_LINE_KINDS, All, AnyOf, Leaf, Not, Rule, leaves
from aoti_trace.model.frames import SCHEMAS, Frames

ROW = "__row"


def rust_regex_error(pattern: str) -> str | None:
    """The first line of Polars' (Rust regex) error for ``pattern``, or None when it compiles."""
    try:
        pl.select(pl.lit("").str.contains(pattern))
    except pl.exceptions.PolarsError as exc:  # ComputeError is not a ValueError (rule-design.md §7 #2)
        lines = [ln for ln in str(exc).splitlines() if ln.strip()]
        return next((ln.strip() for ln in lines if ln.strip().startswith("error:")), lines[0] if lines else "invalid")
    return None


# ---------------------------------------------------------------------------------------------- expressions


def _ci(value: Any, ignore_case: bool) -> Any:
    return value.lower() if ignore_case and isinstance(value, str) else value


def leaf_expr(leaf: Leaf) -> pl.Expr:
    """Row-level boolean expression of one leaf (nulls are *not* filled here)."""
    col = pl.col(leaf.column)
    string = SCHEMAS[leaf.frame][1][leaf.column][0] == pl.String
    text = col.str.to_lowercase() if (leaf.ignore_case and string) else col
    if leaf.regex is not None:
        expr = col.str.contains(("(?i)" if leaf.ignore_case else "") + leaf.regex)
    elif leaf.contains is not None:
        expr = text.str.contains(_ci(leaf.contains, leaf.ignore_case), literal=True)
    elif leaf.equals is not None:
        expr = text == pl.lit(_ci(leaf.equals, leaf.ignore_case))
    elif leaf.in_ is not None:
        expr = text.is_in([_ci(v, leaf.ignore_case) for v in leaf.in_])
    else:
        expr = col.is_not_null() if leaf.exists else col.is_null()
    if leaf.frame == "lines" and leaf.column != "kind":
        skipped = [k for k in SKIPPED_LINE_KINDS if k not in leaf.include]
        if skipped:
            expr = expr & ~pl.col("kind").is_in(skipped).fill_null(False)
    return expr


def row_expr(node: Any) -> pl.Expr:
    """One row expression for a ``scope: row`` node (all leaves on one frame)."""
    if isinstance(node, Leaf):
        return leaf_expr(node).fill_null(False)
    if isinstance(node, All):
        return pl.all_horizontal([row_expr(n) for n in node.all])
    if isinstance(node, AnyOf):
        return pl.any_horizontal([row_expr(n) for n in node.any])
    return ~row_expr(node.not_)


# ---------------------------------------------------------------------------------------------- compiling


@dataclass
class Pred:
    """A boolean column computed on one frame."""

    name: str
    frame: str
    node: Any  # the leaf, or the row-scope node
    leaf: Leaf | None  # the leaf, or None for a row-scope node
    negated: bool
    _expr: pl.Expr | None = field(default=None, repr=False)

    @property
    def expr(self) -> pl.Expr:
        """Its row expression, built on first use (start-up: most predicates are never computed, see
        :func:`match`)."""
        if self._expr is None:
            self._expr = leaf_expr(self.node).fill_null(False) if self.leaf is not None else row_expr(self.node)
        return self._expr


# A rule's match tree over its predicates: ("pred", name) | ("all", [shape...]) | ("any", [shape...]) | ("not", shape)
Shape = tuple[str, Any]


@dataclass
class CompiledRule:
    rule: Rule
    shape: Shape  # the truth over the per-run table, as a tree of predicate names
    anchor: Pred  # predicate that selects anchor rows
    anchor_leaf: Leaf
    positives: list[Pred] = field(default_factory=list)  # run-scope positive predicates (evidence candidates)
    preds: list[Pred] = field(default_factory=list)  # every predicate of the rule

    @property
    def truth(self) -> pl.Expr:
        """The truth over the per-run table (one column per predicate)."""
        return _shape_expr(self.shape)


def _shape_expr(shape: Shape) -> pl.Expr:
    op, arg = shape
    if op == "pred":
        return pl.col(arg)
    if op == "all":
        return pl.all_horizontal([_shape_expr(s) for s in arg])
    if op == "any":
        return pl.any_horizontal([_shape_expr(s) for s in arg])
    return ~_shape_expr(arg)


def _fold(shape: Shape, value: Any) -> bool | None:
    """The constant value of ``shape`` when ``value(pred name)`` gives each predicate's (True, False or None:
    unknown), or None when it is not constant."""
    op, arg = shape
    if op == "pred":
        return value(arg)  # type: ignore[no-any-return]
    if op == "not":
        inner = _fold(arg, value)
        return None if inner is None else not inner
    parts = [_fold(s, value) for s in arg]
    if op == "all":
        return False if False in parts else True if all(p is True for p in parts) else None
    return True if True in parts else False if all(p is False for p in parts) else None


def compile_rule(rule: Rule, index: int) -> tuple[CompiledRule, list[Pred]]:
    preds: list[Pred] = []
    anchor_leaf = rule.anchor_leaf()
    anchor: list[Pred] = []

    def walk(node: Any, negated: bool) -> Shape:
        if isinstance(node, Leaf) or getattr(node, "scope", "run") == "row":
            inner = [leaf for leaf, _ in leaves(node)]
            frame = inner[0].frame
            pred = Pred(f"__r{index}_{len(preds)}", frame, node, node if isinstance(node, Leaf) else None, negated)
            preds.append(pred)
            if any(leaf is anchor_leaf for leaf in inner):
                anchor.append(pred)
            return ("pred", pred.name)
        if isinstance(node, All):
            return ("all", [walk(n, negated) for n in node.all])
        if isinstance(node, AnyOf):
            return ("any", [walk(n, negated) for n in node.any])
        assert isinstance(node, Not)
        return ("not", walk(node.not_, not negated))

    shape = walk(rule.match, False)
    positives = [p for p in preds if not p.negated and p is not anchor[0]]
    return CompiledRule(rule, shape, anchor[0], anchor_leaf, positives, preds), preds


@dataclass
class Plan:
    rules: list[CompiledRule]
    by_frame: dict[str, list[Pred]]
    literals: dict[str, tuple[str, ...] | None] = field(default_factory=dict)  # regex -> required literals (model.literal)
    # rule id -> its truth over the per-run table, null as false, named by the rule id (built on first use: see match)
    truths: dict[str, pl.Expr] = field(default_factory=dict)
    # predicate name -> its "any row per run" aggregation (built on first use)
    anys: dict[str, pl.Expr] = field(default_factory=dict)


def compile_rules(rules: list[Rule], literals: dict[str, tuple[str, ...] | None] | None = None) -> Plan:
    compiled: list[CompiledRule] = []
    by_frame: dict[str, list[Pred]] = {}
    for i, rule in enumerate(rules):
        cr, preds = compile_rule(rule, i)
        compiled.append(cr)
        for p in preds:
            by_frame.setdefault(p.frame, []).append(p)
    return Plan(compiled, by_frame, dict(literals or {}))


# ---------------------------------------------------------------------------------------------- evaluating


def mark_noise(lines: pl.DataFrame, patterns: list[str]) -> pl.DataFrame:
    """Set ``kind = "noise"`` on the lines that match any ignore-list pattern."""
    if not patterns or lines.height == 0:
        return lines
    combined = "|".join(f"(?:{p})" for p in patterns)
    hit = pl.col("text").str.contains(combined).fill_null(False)
    return lines.with_columns(pl.when(hit).then(pl.lit("noise")).otherwise(pl.col("kind")).alias("kind"))


@dataclass
class Matches:
    hits: list[tuple[str, str]]  # (run_id, rule_id)
    flagged: dict[str, pl.DataFrame]  # frame -> frame with ROW and predicate columns


class _Texts:
    """The values of a frame's string columns, joined, for :func:`_leaf_absent` (computed on first use)."""

    def __init__(self, df: pl.DataFrame, literals: dict[str, tuple[str, ...] | None]) -> None:
        self.df, self.schema, self.literals = df, df.schema, literals
        self.joined: dict[str, str] = {}

    def has(self, column: str, literal: str) -> bool:
        if column not in self.joined:
            self.joined[column] = "\n".join(self.df.get_column(column).drop_nulls().unique().to_list())
        return literal in self.joined[column]


def _leaf_absent(texts: _Texts, leaf: Leaf) -> bool:
    """True when ``leaf`` cannot hold on any row of the frame: it needs a literal (one of the required literals of
    its regex, or its ``contains`` text; case-sensitive leaves only) that occurs in none of the values of its column.
    Its predicate (``leaf_expr(leaf).fill_null(False)``: false or null on every row, and so is the conjunction with
    the kind filter) is then false on every row, and its Rust regex need not be compiled or run (start-up)."""
    if leaf.ignore_case or texts.schema.get(leaf.column) != pl.String:
        return False
    literals: tuple[str, ...] | None
    if leaf.regex is not None:
        literals = texts.literals[leaf.regex] if leaf.regex in texts.literals else required_literals(leaf.regex)
    elif isinstance(leaf.contains, str) and leaf.contains:
        literals = (leaf.contains,)
    elif isinstance(leaf.equals, str) and leaf.equals:  # an equal value contains itself
        literals = (leaf.equals,)
    elif leaf.in_ and all(isinstance(v, str) and v for v in leaf.in_):
        literals = tuple(str(v) for v in leaf.in_)
    else:
        return False
    return literals is not None and not any(texts.has(leaf.column, lit) for lit in literals)


def _absent(texts: _Texts, pred: Pred) -> bool:
    """True when ``pred`` is false on every row of its frame: the frame has no rows (a predicate is true for a run
    when it holds on one of its rows), or a leaf it needs is absent (:func:`_leaf_absent`; a row-scope node is
    folded over its leaves)."""
    if texts.df.height == 0:
        return True
    if pred.leaf is not None:
        return _leaf_absent(texts, pred.leaf)
    return _fold(_node_shape(pred.node), lambda leaf: False if _leaf_absent(texts, leaf) else None) is False


def _node_shape(node: Any) -> Any:
    """A row-scope node as a shape whose predicates are its leaves (for :func:`_fold`)."""
    if isinstance(node, Leaf):
        return ("pred", node)
    if isinstance(node, All):
        return ("all", [_node_shape(n) for n in node.all])
    if isinstance(node, AnyOf):
        return ("any", [_node_shape(n) for n in node.any])
    return ("not", _node_shape(node.not_))


def match(plan: Plan, frames: Frames, runs: list[str], applies: Mapping[str, list[str] | None]) -> Matches:
    """Evaluate every rule of ``plan`` over ``frames``: which rules hit which runs.

    ``applies`` maps rule id to the runs the rule applies to (torch range), or None for all runs. A predicate
    whose needed literal occurs nowhere in its frame is false on every row (:func:`_absent`); a rule whose tree is
    then false whatever the other predicates are is not evaluated at all (it hits no run): on a small input most
    rules are decided so, without building or running their Polars expressions.
    """
    if not runs or not plan.rules:
        return Matches([], {})
    absent: set[str] = set()
    for frame, preds in plan.by_frame.items():
        texts = _Texts(frames[frame], plan.literals)
        absent.update(p.name for p in preds if _absent(texts, p))
    live = [cr for cr in plan.rules if _fold(cr.shape, lambda name: False if name in absent else None) is not False]
    if not live:
        return Matches([], {})
    by_frame: dict[str, list[Pred]] = {}
    for cr in live:
        for p in cr.preds:
            by_frame.setdefault(p.frame, []).append(p)
    per_run = pl.DataFrame({"run_id": runs}, schema={"run_id": pl.String})
    flagged: dict[str, pl.DataFrame] = {}
    for frame, preds in by_frame.items():
        df = frames[frame].with_row_index(ROW)
        df = df.with_columns([(pl.lit(False) if p.name in absent else p.expr).alias(p.name) for p in preds])
        flagged[frame] = df
        for p in preds:
            if p.name not in plan.anys:
                plan.anys[p.name] = pl.col(p.name).any()
        agg = df.group_by("run_id").agg([plan.anys[p.name] for p in preds])
        per_run = per_run.join(agg, on="run_id", how="left", coalesce=True)
    per_run = per_run.with_columns(pl.exclude("run_id").fill_null(False))
    cols = []
    n_runs = len(set(runs))
    for cr in live:
        only = applies.get(cr.rule.id)
        # a rule that applies to every run (its torch range holds for all of them, or it has none) needs no filter
        if only is not None and len(set(only)) < n_runs:
            cols.append((cr.truth & pl.col("run_id").is_in(only)).fill_null(False).alias(cr.rule.id))
        else:
            if cr.rule.id not in plan.truths:
                plan.truths[cr.rule.id] = cr.truth.fill_null(False).alias(cr.rule.id)
            cols.append(plan.truths[cr.rule.id])
    hits = (
        per_run.select("run_id", *cols)
        .unpivot(index="run_id", variable_name="rule_id", value_name="hit")
        .filter(pl.col("hit"))
    )
    return Matches(list(zip(hits.get_column("run_id").to_list(), hits.get_column("rule_id").to_list())), flagged)


def select_rows(
    matches: Matches, pred: Pred, run_list: list[str], occurrence: str, leaf: Leaf | None = None
) -> list[dict[str, Any]]:
    """Rows of ``pred``'s frame where it is true, for ``run_list``, per ``occurrence`` (last/first/all).

    With a ``leaf`` that has a regex, each row also gets ``__groups``: the regex's named groups
    (``extract_groups`` over the leaf's column) or None. ``pred`` may be a row-scope node that contains the leaf.
    """
    df = matches.flagged[pred.frame]
    hit = pl.col(pred.name) & pl.col("run_id").is_in(run_list)
    keep = [c for c in df.columns if not c.startswith("__r") or c == ROW]
    lf = df.lazy()
    if occurrence in ("first", "last"):
        # pick the row numbers on three columns first, then copy only those rows (a frame of millions of rows
        # where most rows match, e.g. a stack shared by every record, is never copied whole); one query
        pick = pl.col(ROW).min() if occurrence == "first" else pl.col(ROW).max()
        chosen = lf.select(ROW, "run_id", pred.name).filter(hit).group_by("run_id").agg(pick).select(ROW)
        lf = lf.select(keep).join(chosen, on=ROW, how="semi")
    else:
        lf = lf.filter(hit).select(keep)
    lf = lf.sort(ROW)
    regex = leaf.regex if leaf is not None else None
    names = list(_group_names(regex)) if regex else []
    if names and leaf is not None and regex:  # names come from the leaf's regex
        pattern = ("(?i)" if leaf.ignore_case else "") + regex
        lf = lf.with_columns(pl.col(leaf.column).str.extract_groups(pattern).alias("__groups"))
    out = lf.collect().to_dicts()
    for row in out:
        groups = row.get("__groups")
        if names and groups is not None and all(v is None for v in groups.values()):
            row["__groups"] = None
    return out


def select_rows_many(
    matches: Matches, requests: list[tuple[Pred, list[str], str, Leaf | None]]
) -> list[list[dict[str, Any]]]:
    """:func:`select_rows` of each ``(pred, run_list, occurrence, leaf)``, the same rows: the ``first``/``last``
    requests on one frame are answered together (one group-by for the row numbers of all, one read of the chosen
    rows, one select for the regex groups), so that the cost is per frame rather than per rule."""
    out: list[list[dict[str, Any]] | None] = [None] * len(requests)
    by_frame: dict[str, list[int]] = {}
    for k, (pred, run_list, occurrence, leaf) in enumerate(requests):
        if occurrence in ("first", "last"):
            by_frame.setdefault(pred.frame, []).append(k)
        else:
            out[k] = select_rows(matches, pred, run_list, occurrence, leaf)
    for frame, ks in by_frame.items():
        df = matches.flagged[frame]
        aggs: dict[str, pl.Expr] = {}
        for k in ks:
            pred, _runs, occurrence, _leaf = requests[k]
            name = f"{pred.name}:{occurrence}"
            if name not in aggs:
                rows = pl.col(ROW).filter(pl.col(pred.name))
                aggs[name] = (rows.min() if occurrence == "first" else rows.max()).alias(name)
        picks = df.select("run_id", ROW, *{requests[k][0].name for k in ks}).group_by("run_id").agg(list(aggs.values()))
        run_ids = picks.get_column("run_id").to_list()
        chosen_by_name = {name: dict(zip(run_ids, picks.get_column(name).to_list())) for name in aggs}
        chosen: list[list[int]] = []
        for k in ks:
            pred, run_list, occurrence, _leaf = requests[k]
            per_run = chosen_by_name[f"{pred.name}:{occurrence}"]
            chosen.append(sorted({r for r in (per_run.get(run) for run in set(run_list)) if r is not None}))
        wanted = sorted({r for rows_k in chosen for r in rows_k})
        keep = [c for c in df.columns if not c.startswith("__r") or c == ROW]
        sub = df.filter(pl.col(ROW).is_in(wanted)).select(keep) if wanted else df.clear().select(keep)
        position = {r: i for i, r in enumerate(sub.get_column(ROW).to_list())}
        regex_cols: dict[int, str] = {}
        exprs = []
        for k in ks:
            leaf = requests[k][3]
            regex = leaf.regex if leaf is not None else None
            if leaf is not None and regex and _group_names(regex):
                regex_cols[k] = f"g{k}"
                exprs.append(pl.col(leaf.column).str.extract_groups(("(?i)" if leaf.ignore_case else "") + regex)
                             .alias(f"g{k}"))
        groups = sub.select(exprs) if exprs and sub.height else None
        records = sub.to_dicts()
        for k, rows_k in zip(ks, chosen):
            col = groups.get_column(regex_cols[k]).to_list() if groups is not None and k in regex_cols else None
            result = []
            for r in rows_k:
                row = dict(records[position[r]])
                if k in regex_cols:
                    g = col[position[r]] if col is not None else None
                    row["__groups"] = None if g is not None and all(v is None for v in g.values()) else g
                result.append(row)
            out[k] = result
    return [rows if rows is not None else [] for rows in out]


@functools.lru_cache(maxsize=4096)
def _group_names(regex: str) -> tuple[str, ...]:
    """The named groups of a rule's regex (compiled by Python's ``re`` for its group names only, never run)."""
    return tuple(re.compile(regex).groupindex)


# run_rows and has_rows answer from one pass over a frame of at most this many rows (kept with the frames);
# a larger frame is filtered per call
INDEX_MAX_ROWS = 20_000


def run_rows(frames: Frames, frame: str, run_id: str, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """All rows of ``frame`` for ``run_id`` as dicts (small frames: process, compiles, faults)."""
    df = frames[frame]
    if df.height > INDEX_MAX_ROWS:
        df = df.filter(pl.col("run_id") == run_id)
        if columns:
            df = df.select(columns)
        return df.to_dicts()
    by_run = frames.index(("run_rows", frame, tuple(columns or ())), df, lambda: _rows_by_run(df, columns))
    return [dict(r) for r in by_run.get(run_id, ())]


def _rows_by_run(df: pl.DataFrame, columns: list[str] | None) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for run_id, row in zip(df.get_column("run_id").to_list(), (df.select(columns) if columns else df).to_dicts()):
        out.setdefault(run_id, []).append(row)
    return out


def first_per_run(frames: Frames, frame: str, column: str, where: tuple[str, list[str]] | None = None) -> dict[str, str]:
    """First non-null value of ``column`` per run (optionally only rows whose ``where[0]`` is in ``where[1]``)."""
    df = frames[frame]
    if column not in df.columns:
        return {}
    if where is not None:
        df = df.filter(pl.col(where[0]).is_in(where[1]))
    df = df.filter(pl.col(column).is_not_null()).group_by("run_id", maintain_order=True).agg(pl.col(column).first())
    return {r: str(v) for r, v in zip(df.get_column("run_id").to_list(), df.get_column(column).to_list())}


def has_rows(frames: Frames, frame: str, run_id: str) -> bool:
    df = frames[frame]
    if df.height == 0:
        return False
    return run_id in frames.index(("has_rows", frame), df, lambda: set(df.get_column("run_id").unique().to_list()))


def frame_from_rows(name: str, rows: list[dict[str, Any]]) -> pl.DataFrame:
    """A frame built from row dicts (examples); columns cast to the frame's schema by the caller (conform)."""
    if not rows:
        return pl.DataFrame()
    cols = {c for row in rows for c in row}
    target = {c: SCHEMAS[name][1][c][0] for c in cols if c in SCHEMAS[name][1]}
    data = {c: [row.get(c) for row in rows] for c in cols}
    return pl.DataFrame(data, schema={c: target.get(c, pl.String) for c in cols}, strict=False)
