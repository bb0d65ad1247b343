"""Which ranks of a distributed job each finding came from, and identical findings of several ranks as one.

The rank of a line comes from the ``lines`` frame (``[rankN]:`` prefixes), the file's path (``rank_N`` trace names,
torchrun's ``attempt_*/<rank>/`` folders) or the run's manifest (``RANK``); rank sets are written with
:func:`aoti_trace.model.ranks.rank_ranges`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from aoti_trace.model.ranks import GLOG_TIME, OWN_RANK, manifest_ranks, path_rank

if TYPE_CHECKING:
    from aoti_trace.model.findings import Finding
    from aoti_trace.model.frames import Frames


def attribute(findings: list[Finding], frames: Frames) -> list[Finding]:
    """``findings`` with ``ranks`` and ``first_rank`` set, and identical findings of several ranks merged.

    A finding's ranks: the rank of each evidence line (the ``[rankN]:`` prefix of the lines frame, else the rank
    its file's path names), plus the ranks of every other line of the run with the same text (``Rank N`` in it
    aside), since ranks that fail the same way print the same line; a finding with none of these gets the ``RANK`` its run's manifest
    recorded. Its first rank: the rank whose matching line comes first by the glog time stamp in the line's
    decoration (or the last one above it on that rank's lines), then by file and line. Findings of one run with the
    same rule and message whose ranks differ are one finding with the union of the ranks (the first in rank order
    is kept). Then :func:`aoti_trace.engine.consequences.mark` names collective failures that follow another rank's own
    failure in the run as its consequences. Runs without rank information are returned unchanged.
    """
    import polars as pl

    from aoti_trace.engine import consequences

    by_manifest = manifest_ranks(frames)
    keys = [(i, f.run_id, ev.path, ev.line) for i, f in enumerate(findings) for ev in f.evidence if ev.path]
    ev = pl.DataFrame(keys, schema={"i": pl.Int64, "run_id": pl.Utf8, "path": pl.Utf8, "lineno": pl.Int64},
                      orient="row")
    lines = frames["lines"]
    has_ranks = bool(by_manifest) or lines["rank"].null_count() < lines.height \
        or (not ev.is_empty() and ev.select(path_rank(pl.col("path")).is_not_null().any()).item())
    if not has_ranks:
        return findings
    lines = lines.select("run_id", "path", "lineno", pl.col("text").str.replace_all(OWN_RANK, "Rank *"),
                         pl.coalesce("rank", path_rank(pl.col("path"))).alias("rank"),
                         pl.col("prefix").str.extract(GLOG_TIME, 1).alias("ts"))
    lines = lines.with_columns(pl.col("ts").forward_fill().over("path", "rank", order_by="lineno"))
    anchors = ev.join(lines.select("run_id", "path", "lineno", "text"), on=["run_id", "path", "lineno"], how="inner")
    same_text = anchors.select("i", "run_id", "text").join(lines.drop_nulls("rank"), on=["run_id", "text"])
    by_path = ev.with_columns(path_rank(pl.col("path")).alias("rank"), pl.lit(None, pl.Utf8).alias("ts")) \
        .drop_nulls("rank")
    hits = pl.concat([same_text.select("i", "rank", "ts", "path", "lineno"),
                      by_path.select("i", "rank", "ts", "path", "lineno")])
    per = hits.sort(["ts", "path", "lineno"], nulls_last=True).group_by("i").agg(
        pl.col("rank").unique().sort().alias("ranks"), pl.col("rank").first().alias("first_rank"),
        pl.col("ts").first().alias("ts"))
    update = {row["i"]: row for row in per.iter_rows(named=True)}
    out: list[Finding] = []
    times: dict[tuple[str, str, str], str | None] = {}
    for i, f in enumerate(findings):
        if i in update:
            f = replace(f, ranks=update[i]["ranks"], first_rank=update[i]["first_rank"])
            times.setdefault((f.run_id, f.rule_id, f.message), update[i]["ts"])
        elif f.run_id in by_manifest:
            f = replace(f, ranks=[by_manifest[f.run_id]], first_rank=by_manifest[f.run_id])
        out.append(f)
    return consequences.mark(merge(out), times)


def merge(findings: list[Finding]) -> list[Finding]:
    """Identical findings (run, rule, message) of different ranks as one finding with the union of the ranks."""
    first: dict[tuple[str, str, str], int] = {}
    out: list[Finding] = []
    for f in findings:
        key = (f.run_id, f.rule_id, f.message)
        if f.ranks and key in first:
            j = first[key]
            ranks = sorted(set(out[j].ranks) | set(f.ranks))
            out[j] = replace(out[j], ranks=ranks)
            continue
        if f.ranks:
            first[key] = len(out)
        out.append(f)
    return out
