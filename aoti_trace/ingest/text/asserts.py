"""CUDA / Triton / XPU device-side assertion lines (the ``device_asserts`` frame).

A failing kernel prints one line per failing thread; lines that differ only in block and thread are folded into
one row (the first line's location, block and thread are kept; ``count`` says how many were folded).
"""

from __future__ import annotations

import polars as pl

from aoti_trace.model.frames import conform, empty
from aoti_trace.ingest.text.lines import PATTERNS

# 'index out of bounds: 0 <= tmp4 < 1024', '... tmp4 < ks0', '0 <= tmp4', and non-tmp forms 'r4 + (128*x1) < 25504'
OOB = r"index out of bounds: (?:(?P<lower>-?\w+) <= )?(?P<var>tmp\d+|[^<`]+?)(?: < (?P<upper>[^`\"'\\\n]+))?\s*$"


def device_asserts_frame(df: pl.DataFrame) -> pl.DataFrame:
    """One row per distinct assertion; ``df`` is the output of ``classify()``."""
    sel = df.filter(pl.col("kind") == "device_assert")
    if sel.height == 0:
        return empty("device_asserts")
    cuda = pl.col("_msg").str.extract_groups(PATTERNS["device_assert"])
    xpu = pl.col("_msg").str.extract_groups(PATTERNS["xpu_assert"])
    out = sel.select(
        "run_id", "path", "lineno", "_i",
        cuda.struct.field("file").alias("kernel_file"),
        cuda.struct.field("line").cast(pl.Int32, strict=False).alias("kernel_line"),
        cuda.struct.field("func").alias("function"),
        cuda.struct.field("block").alias("block"),
        cuda.struct.field("thread").alias("thread"),
        pl.coalesce(cuda.struct.field("msg"), xpu.struct.field("msg")).alias("assertion"),
    )
    oob = pl.col("assertion").str.extract_groups(OOB)
    out = out.with_columns(
        oob.struct.field("var").str.strip_chars().alias("index_var"),
        oob.struct.field("lower").alias("lower"),
        oob.struct.field("upper").str.strip_chars().alias("upper"),
    )
    keys = ["kernel_file", "kernel_line", "function", "assertion"]
    folded = (
        out.sort("_i")
        .group_by(keys, maintain_order=True)
        .agg(
            pl.col("run_id", "path", "lineno", "block", "thread", "index_var", "lower", "upper").first(),
            pl.len().cast(pl.Int64).alias("count"),
        )
    )
    return conform("device_asserts", folded)
