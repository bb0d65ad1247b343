"""Rank sets: the ranks of a distributed run, where a line or file names them, and how to write a set short.

``rank_ranges([0, 1, 2, 3, 7, 9, 10])`` is ``"0-3, 7, 9, 10"``: a report stays short for any rank count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    import polars as pl

    from aoti_trace.model.frames import Frames


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
