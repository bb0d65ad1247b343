"""Rank sets: which ranks of a distributed run a finding came from, and how to write a set of ranks short.

``rank_ranges([0, 1, 2, 3, 7, 9, 10])`` is ``"0-3, 7, 9, 10"``: a report stays short for any rank count.
"""

from __future__ import annotations

from typing import Iterable


def rank_ranges(ranks: Iterable[int | None]) -> str:
    """Sorted, de-duplicated ranks as comma-separated ranges (``"0-255"``, ``"0, 2-255"``); '' for none."""
    rs = sorted({int(r) for r in ranks if r is not None})
    out: list[str] = []
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}, {rs[j]}" if j == i + 1 else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ", ".join(out)


# ---------------------------------------------------------------------------------------------- attribution

RANK_IN_PATH = r"(?:rank_(\d+)_[^/]*$|attempt_\d+/(\d+)/[^/]*$)"  # trace file names; torchrun --log-dir folders
GLOG_TIME = r"[IWEFV](\d{4} \d{2}:\d{2}:\d{2}\.\d+)"  # the glog time stamp in a line's decoration (MMDD hh:mm:ss.f)


def path_rank(expr):
    """The rank a file's path names (``..._rank_3_xyz.log``, ``attempt_0/3/stderr.log``), else null."""
    import polars as pl

    return pl.coalesce(expr.str.extract(RANK_IN_PATH, 1), expr.str.extract(RANK_IN_PATH, 2)).cast(pl.Int32, strict=False)


def attribute(findings: list, frames) -> list:
    """``findings`` with ``ranks`` and ``first_rank`` set, and identical findings of several ranks merged.

    A finding's ranks: the rank of each evidence line (the ``[rankN]:`` prefix of the lines frame, else the rank
    its file's path names), plus the ranks of every other line of the run with the same text, since ranks that
    fail the same way print the same line. Its first rank: the rank whose matching line comes first by the glog
    time stamp in the line's decoration (or the last one above it on that rank's lines), then by file and line.
    Findings of one run with the same rule and message whose ranks differ are one finding with the union of the
    ranks (the first in rank order is kept). Runs without rank information are returned unchanged.
    """
    import polars as pl

    keys = [(i, f.run_id, ev.path, ev.line) for i, f in enumerate(findings) for ev in f.evidence if ev.path]
    if not keys:
        return findings
    ev = pl.DataFrame(keys, schema={"i": pl.Int64, "run_id": pl.Utf8, "path": pl.Utf8, "lineno": pl.Int64},
                      orient="row")
    lines = frames["lines"]
    has_ranks = lines["rank"].null_count() < lines.height or ev.select(path_rank(pl.col("path")).is_not_null().any()).item()
    if not has_ranks:
        return findings
    lines = lines.select("run_id", "path", "lineno", "text", pl.coalesce("rank", path_rank(pl.col("path"))).alias("rank"),
                         pl.col("prefix").str.extract(GLOG_TIME, 1).alias("ts"))
    lines = lines.with_columns(pl.col("ts").forward_fill().over("path", "rank", order_by="lineno"))
    anchors = ev.join(lines.select("run_id", "path", "lineno", "text"), on=["run_id", "path", "lineno"], how="inner")
    same_text = anchors.select("i", "run_id", "text").join(lines.drop_nulls("rank"), on=["run_id", "text"])
    by_path = ev.with_columns(path_rank(pl.col("path")).alias("rank"), pl.lit(None, pl.Utf8).alias("ts")) \
        .drop_nulls("rank")
    hits = pl.concat([same_text.select("i", "rank", "ts", "path", "lineno"),
                      by_path.select("i", "rank", "ts", "path", "lineno")])
    if hits.is_empty():
        return findings
    per = hits.sort(["ts", "path", "lineno"], nulls_last=True).group_by("i").agg(
        pl.col("rank").unique().sort().alias("ranks"), pl.col("rank").first().alias("first_rank"))
    update = {row["i"]: row for row in per.iter_rows(named=True)}
    out = [f.model_copy(update={"ranks": update[i]["ranks"], "first_rank": update[i]["first_rank"]})
           if i in update else f for i, f in enumerate(findings)]
    return merge(out)


def merge(findings: list) -> list:
    """Identical findings (run, rule, message) of different ranks as one finding with the union of the ranks."""
    first: dict[tuple, int] = {}
    out: list = []
    for f in findings:
        key = (f.run_id, f.rule_id, f.message)
        if f.ranks and key in first:
            j = first[key]
            ranks = sorted(set(out[j].ranks) | set(f.ranks))
            out[j] = out[j].model_copy(update={"ranks": ranks})
            continue
        if f.ranks:
            first[key] = len(out)
        out.append(f)
    return out
