"""A log line cited as evidence, as the log wrote it.

Ingest splits a line into its decoration (``prefix``: a timestamp, ``[rank0]:``, a launcher tag, a logging or glog
header) and its message (``text``), and keeps the line itself (``raw``, colour codes removed). Evidence quotes the
line as written, so that a reader can find it in the log: the decoration with its own separator (``[rank0]: x``, not
``[rank0]:x``) and the message. A long message is clipped to ``limit`` characters (its head and its end, :func:`~aoti_trace.model.findings.clip`), the decoration not counted: a
worker tag must not push the end of a long message (a compiler command line) out of its evidence.
"""

from __future__ import annotations

from typing import Any, Iterable

import polars as pl

from aoti_trace.model.findings import MAX_EVIDENCE_TEXT, Evidence, clip

# how far below a cited exception line its message's next lines are looked for (interleaved ranks included)
WINDOW = 200


def as_written(prefix: str | None, text: str | None, raw: str | None, limit: int) -> str:
    """The line whose decoration is ``prefix`` and message ``text`` as the log wrote it (``raw``), the message
    clipped to ``limit`` characters. Where ingest rewrote the message (``<class 'T'>: m``, IPython's traceback
    lines), the log's own line; where a carriage return overwrote part of it, the decoration and the message."""
    message = text or ""
    if isinstance(raw, str) and message not in raw:
        return clip(raw, limit)
    return decoration(prefix, message, raw) + clip(message, limit)


def near(lines: pl.DataFrame, run_id: str, anchor: Evidence, before: int, after: int) -> pl.DataFrame:
    """The rows of the ``lines`` frame from ``before`` lines above the cited line ``anchor`` to ``after`` lines below
    it (same run and file, the cited line included), in line order, of the cited line's rank only: in an interleaved
    multi-rank log another rank's lines belong to another process, and citing them would put that rank in the
    finding's ranks."""
    assert anchor.line is not None
    rows = lines.filter((pl.col("run_id") == run_id) & (pl.col("path") == anchor.path)
                        & pl.col("lineno").is_between(anchor.line - before, anchor.line + after))
    ranks = rows.filter(pl.col("lineno") == anchor.line).get_column("rank")
    rank = ranks[0] if len(ranks) else None
    return rows.filter(pl.col("rank").is_null() if rank is None else pl.col("rank") == rank).sort("lineno")


def is_caret_line(text: str | None) -> bool:
    """A line that only marks a column of the line above (Python's '    ^^^^~~~~', Triton's '    ^')."""
    t = (text or "").strip()
    return bool(t) and set(t) <= {"^", "~"}


def cite_line(row: dict[str, Any], path: str | None) -> Evidence:
    """Evidence for a row of the ``lines`` frame (``lineno``, ``prefix``, ``text``, ``raw``) of the file ``path``:
    the line as the log wrote it."""
    return Evidence(source="lines", path=path, line=row["lineno"],
                    text=as_written(row["prefix"], row["text"], row["raw"], MAX_EVIDENCE_TEXT))


def decoration(prefix: str | None, text: str | None, raw: str | None) -> str:
    """The decoration of a line as written: with its own separator where the log has one (``raw`` ends with the
    message and no carriage return overwrote part of it), else ``prefix``. An indent that the whole log shares
    (a pasted log indented as a block) is not part of it."""
    message = text or ""
    if prefix and isinstance(raw, str) and raw.endswith(message) and "\r" not in raw:
        head = raw[:len(raw) - len(message)]
        return head if prefix[:1].isspace() else head.lstrip()
    return prefix or ""


def continuation_as_written(lines: pl.DataFrame, run_id: str, path: str, after: int, rank: int | None,
                            messages: Iterable[str], limit: int) -> list[str]:
    """``messages`` (the next lines of an exception's message, in order) as the log wrote them: each is the first
    line below line ``after`` (and below the previous one) of the same run, file and rank whose message it is; a
    message line not found so is given as it is."""
    wanted = list(messages)
    if not wanted or lines.height == 0:
        return wanted
    rank_ok = pl.col("rank").is_null() if rank is None else pl.col("rank") == rank
    rows: list[dict[str, Any]] = (
        lines.filter((pl.col("run_id") == run_id) & (pl.col("path") == path)
                     & pl.col("lineno").is_between(after + 1, after + WINDOW) & rank_ok)
        .sort("lineno").select("prefix", "text", "raw").to_dicts())
    out, at = [], 0
    for message in wanted:
        hit = next((i for i in range(at, len(rows)) if rows[i]["text"] == message), None)
        if hit is None:
            out.append(message)
            continue
        row = rows[hit]
        out.append(as_written(row["prefix"], row["text"], row["raw"], limit))
        at = hit + 1
    return out
