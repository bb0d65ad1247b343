"""Rank sets: which ranks of a distributed run a finding came from, and how to write a set of ranks short.

``rank_ranges([0, 1, 2, 3, 7, 9, 10])`` is ``"0-3, 7, 9, 10"``: a report stays short for any rank count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    import polars as pl

    from aoti_trace.findings import Finding
    from aoti_trace.frames import Frames


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
OWN_RANK = r"\bRank \d+\b"  # a rank's own number in its message ('[Rank 3] Watchdog caught ...', '[PG 1 Rank 3]')
GLOG_TIME = r"[IWEFV](\d{4} \d{2}:\d{2}:\d{2}\.\d+)"  # the glog time stamp in a line's decoration (MMDD hh:mm:ss.f)


def path_rank(expr: pl.Expr) -> pl.Expr:
    """The rank a file's path names (``..._rank_3_xyz.log``, ``attempt_0/3/stderr.log``), else null."""
    import polars as pl

    return pl.coalesce(expr.str.extract(RANK_IN_PATH, 1), expr.str.extract(RANK_IN_PATH, 2)).cast(pl.Int32, strict=False)


MANIFEST_RANK = r"(?:^| )RANK=(\d+)(?: |$)"  # RANK in the process frame's env column (a capture's manifest)


def manifest_ranks(frames: Frames) -> dict[str, int]:
    """run id -> the RANK its capture's manifest recorded (``torchrun ... python -m aoti_trace.capture``)."""
    import polars as pl

    proc = frames["process"]
    if proc.is_empty() or "env" not in proc.columns:
        return {}
    got = proc.select("run_id", pl.col("env").str.extract(MANIFEST_RANK, 1).cast(pl.Int32, strict=False).alias("r")) \
        .drop_nulls("r").unique("run_id", keep="first")
    return dict(zip(got["run_id"].to_list(), got["r"].to_list()))


def attribute(findings: list[Finding], frames: Frames) -> list[Finding]:
    """``findings`` with ``ranks`` and ``first_rank`` set, and identical findings of several ranks merged.

    A finding's ranks: the rank of each evidence line (the ``[rankN]:`` prefix of the lines frame, else the rank
    its file's path names), plus the ranks of every other line of the run with the same text (``Rank N`` in it
    aside), since ranks that fail the same way print the same line; a finding with none of these gets the ``RANK`` its run's manifest
    recorded. Its first rank: the rank whose matching line comes first by the glog time stamp in the line's
    decoration (or the last one above it on that rank's lines), then by file and line. Findings of one run with the
    same rule and message whose ranks differ are one finding with the union of the ranks (the first in rank order
    is kept). Then :func:`aoti_trace.consequences.mark` names collective failures that follow another rank's own
    failure in the run as its consequences. Runs without rank information are returned unchanged.
    """
    import polars as pl

    from aoti_trace import consequences

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
            f = f.model_copy(update={"ranks": update[i]["ranks"], "first_rank": update[i]["first_rank"]})
            times.setdefault((f.run_id, f.rule_id, f.message), update[i]["ts"])
        elif f.run_id in by_manifest:
            f = f.model_copy(update={"ranks": [by_manifest[f.run_id]], "first_rank": by_manifest[f.run_id]})
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
            out[j] = out[j].model_copy(update={"ranks": ranks})
            continue
        if f.ranks:
            first[key] = len(out)
        out.append(f)
    return out
