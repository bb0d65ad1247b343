"""The user's source statements at the call sites a trace names, as the derived frame ``sources`` (read on first use).

A call site is ``compiles.user_frame`` (``file:line``). The statement is read from that file when it is on this
machine, else from a file of the same name beside the run's capture manifest (a capture moved to another machine
with the script copied into it); it may span several lines (continuation lines are joined, at most
:data:`MAX_STATEMENT_LINES`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from aoti_trace.model.frames import Frames, schema

MAX_STATEMENT_LINES = 15
MAX_SITES = 32  # call sites per analysis


def sources_frame(frames: Frames) -> pl.DataFrame:
    """Frame ``sources`` (see :data:`aoti_trace.model.frames.SCHEMAS`)."""
    comp = frames["compiles"]
    rows: list[dict[str, Any]] = []
    if comp.height == 0:
        return pl.DataFrame(rows, schema=schema("sources"))
    sites = (comp.filter(pl.col("user_frame").is_not_null()).select("run_id", "user_frame")
             .unique(maintain_order=True).head(MAX_SITES))
    proc = frames["process"]
    manifests: dict[str, list[Path]] = {}
    for run_id, path in proc.select("run_id", "path").iter_rows() if proc.height else []:
        if path and path.endswith("manifest.json"):
            manifests.setdefault(run_id, []).append(Path(path).parent)
    for run_id, site in sites.iter_rows():
        file, _, line = site.rpartition(":")
        if not file or not line.isdigit():
            continue
        candidates = [Path(file)] + [d / Path(file).name for d in manifests.get(run_id, [])]
        statement = next((s for s in (statement_at(p, int(line)) for p in candidates) if s), None)
        if statement is not None:
            rows.append({"run_id": run_id, "file": file, "line": int(line), "statement": statement})
    return pl.DataFrame(rows, schema=schema("sources"))


def statement_at(path: Path, line: int, max_lines: int = MAX_STATEMENT_LINES) -> str | None:
    """The whole (possibly multi-line) statement starting at ``path:line``, when the file is on this machine."""
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()[line - 1 : line - 1 + max_lines]
    except (OSError, ValueError):
        return None
    text, depth = [], 0
    for raw in lines:
        text.append(raw.strip())
        depth += sum(raw.count(c) for c in "([{") - sum(raw.count(c) for c in ")]}")
        if depth <= 0:
            return " ".join(text).replace("( ", "(").replace(" )", ")")
    return None
