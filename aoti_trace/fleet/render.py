"""The signature table as text (for a person) or JSON (schema ``aoti-trace.triage/v1``).

Text: a header line (runs, runs with an error finding, signatures, engine and speed), then per signature two to
four lines: counts and ids, the message template, where it was seen, and the first paragraph of the remedy. Log
text is shown through :func:`aoti_trace.report.text.visible` (terminal control characters escaped).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import polars as pl

from aoti_trace.fleet.triage import Triage
from aoti_trace.report.text import visible

SCHEMA = "aoti-trace.triage/v1"
MAX_REMEDY = 160


def _when(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M") if t is not None else "?"


def render_text(result: Triage, table: pl.DataFrame | None = None) -> str:
    """The signature table as text (``table``: the table to show, e.g. with a ``change`` column)."""
    table = result.signatures if table is None else table
    runs = result.runs
    failed = runs.filter(pl.col("primary_rule").is_not_null()).height
    broken = runs.filter(pl.col("error").is_not_null()).height
    speed = f"{runs.height / result.seconds:.1f} runs/s" if result.seconds > 0 else ""
    where = f"{result.workers} worker{'s' if result.workers != 1 else ''}"
    out = [f"triage: {runs.height} runs, {failed} with a primary finding, {table.height} signatures  "
           f"({result.engine} engine, {where}, {result.seconds:.1f} s, {speed})"]
    if broken:
        out.append(f"  {broken} runs could not be analysed (see runs.parquet, column error)")
    for s in table.iter_rows(named=True):
        change = f"  [{s['change']}{_delta(s)}]" if "change" in s else ""
        out += ["", f"{s['runs']:>6} runs {100 * s['share']:5.1f}%  primary in {s['primary']:<6} {s['rule_id']}  "
                    f"[{s['family']}]  sig {s['signature']}{change}"]
        facts = "  ".join(f"{k} {s[k]}" for k in ("kernel", "op", "exc_type") if s.get(k))
        out.append(f"  {visible(s['template'] or s['title'] or '')}")
        spread = [f"{s[k]} {k}" for k in ("hosts", "models") if s[k]] + ([f"ranks {s['ranks']}"] if s["ranks"] else [])
        seen = (f"  seen {_when(s['first_seen'])} .. {_when(s['last_seen'])}" + "".join(f", {w}" for w in spread)
                + (f"  {facts}" if facts else ""))
        out.append(seen)
        out.append(f"  example: {visible(s['example_run'] or '')}")
        remedy = " ".join((s["remedy"] or "").split())
        if remedy:
            out.append(f"  fix: {visible(remedy[:MAX_REMEDY] + ('…' if len(remedy) > MAX_REMEDY else ''))}")
    return "\n".join(out) + "\n"


def _delta(s: dict[str, Any]) -> str:
    prev = s.get("previous_runs")
    if s.get("change") == "changed" and prev is not None:
        return f" {prev} -> {s['runs']}"
    return ""


def render_json(result: Triage, table: pl.DataFrame | None = None) -> str:
    """``{"schema", "runs", "runs_with_primary", "engine", "workers", "seconds", "signatures": [...]}``."""
    table = result.signatures if table is None else table
    rows = table.with_columns(
        *(pl.col(c).dt.strftime("%Y-%m-%dT%H:%M:%SZ") for c in ("first_seen", "last_seen") if c in table.columns)
    ).to_dicts()
    return json.dumps({
        "schema": SCHEMA, "runs": result.runs.height,
        "runs_with_primary": result.runs.filter(pl.col("primary_rule").is_not_null()).height,
        "runs_not_analysed": result.runs.filter(pl.col("error").is_not_null()).height,
        "engine": result.engine, "workers": result.workers, "seconds": round(result.seconds, 3),
        "signatures": rows,
    }, indent=2) + "\n"
