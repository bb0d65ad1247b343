"""AOTI intermediate value printer output (the ``printer`` frame).

Level 2 prints blocks ``[  before_launch - <kernel> - <arg>  ]:`` (or ``[  aoti_model_inputs - <arg>  ]:``)
with the tensor and ``Number of elements``, ``Dtype``, ``Mean value``, ... lines; one row per block.
Level 3 prints ``[ before_launch: <kernel> ]`` / ``[ after_launch: <kernel> ]``; one row per line.
``launched_last`` marks the last launch that has no complete ``after_launch``: the kernel running when the process
died (a level-2 ``after_launch`` block cut before its statistics does not count as complete).
"""

from __future__ import annotations

import polars as pl

from aoti_trace.model.frames import conform, empty
from aoti_trace.ingest.text.lines import PATTERNS

STATS = {
    "Number of elements": "numel",
    "Dtype": "dtype",
    "Mean value": "mean",
    "Min value": "min",
    "Max value": "max",
    "Device": "device",
    "Size": "size",
    "Stride": "stride",
}


def _float(col: str) -> pl.Expr:
    return pl.col(col).str.strip_chars().str.replace(r"^-nan$", "nan").cast(pl.Float64, strict=False)


def printer_frame(df: pl.DataFrame) -> pl.DataFrame:
    """Printer rows in output order; ``df`` is the output of ``classify()``."""
    sel = df.filter(pl.col("kind") == "printer").select("run_id", "path", "lineno", "_i", "_rk", "_msg")
    if sel.height == 0:
        return empty("printer")
    head = pl.col("_msg").str.extract_groups(PATTERNS["printer_last_header"])
    launch = pl.col("_msg").str.extract_groups(PATTERNS["printer_launch"])
    stat = pl.col("_msg").str.extract_groups(PATTERNS["printer_stat"])
    rest = head.struct.field("rest")
    sel = sel.with_columns(
        pl.coalesce(head.struct.field("event"), launch.struct.field("event")).alias("event"),
        # '<kernel> - <arg>' (before/after_launch) or '<arg>' (aoti_model_inputs)
        pl.when(rest.str.contains(" - ")).then(rest.str.extract(r"^(.*) - [^ ]+$", 1))
        .otherwise(launch.struct.field("kernel")).alias("kernel"),
        pl.when(rest.str.contains(" - ")).then(rest.str.extract(r" - ([^ ]+)$", 1)).otherwise(rest).alias("arg"),
        stat.struct.field("key").alias("_key"),
        stat.struct.field("value").alias("_value"),
    )
    sel = sel.with_columns(
        pl.when(pl.col("event").is_not_null()).then(pl.col("_i")).otherwise(None).forward_fill().over("_rk")
        .alias("_block")
    ).filter(pl.col("_block").is_not_null())
    heads = sel.filter(pl.col("event").is_not_null()).select(
        "run_id", "path", "lineno", "_i", "_rk", "event", "kernel", "arg", "_block"
    )
    stats = (
        sel.filter(pl.col("_key").is_in(list(STATS)))
        .group_by("_block")
        .agg(*[pl.col("_value").filter(pl.col("_key") == k).first().alias(v) for k, v in STATS.items()])
    )
    out = heads.join(stats, on="_block", how="left").sort("_i").with_columns(
        pl.col("numel").cast(pl.Int64, strict=False),
        _float("mean").alias("mean"), _float("min").alias("min"), _float("max").alias("max"),
    )
    out = out.with_columns(
        pl.any_horizontal(*[pl.col(c).is_nan() | pl.col(c).is_infinite() for c in ("mean", "min", "max")])
        .fill_null(False).alias("suspicious"),
    )
    out = _mark_last_launch(out)
    return conform("printer", out.drop([c for c in out.columns if c.startswith("_")]))


def _mark_last_launch(out: pl.DataFrame) -> pl.DataFrame:
    """Per rank: rows of the last before_launch run whose kernel has no after_launch later on."""
    events = out["event"].to_list()
    kernels = out["kernel"].to_list()
    ranks = out["_rk"].to_list()
    # a level-2 after_launch block that never printed its statistics did not finish: printing it synchronises
    # the device, which is where an asynchronous CUDA error surfaces
    done = [a is None or n is not None for a, n in zip(out["arg"].to_list(), out["numel"].to_list())]
    flags = [False] * len(events)
    for rk in set(ranks):
        idx = [i for i, r in enumerate(ranks) if r == rk]
        before = [i for i in idx if events[i] == "before_launch"]
        if not before:
            continue
        last = before[-1]
        kernel = kernels[last]
        if any(events[i] == "after_launch" and kernels[i] == kernel and done[i] for i in idx if i > last):
            continue
        # the contiguous before_launch rows of that launch (level 2 prints one block per argument)
        pos = idx.index(last)
        while pos >= 0 and events[idx[pos]] == "before_launch" and kernels[idx[pos]] == kernel:
            flags[idx[pos]] = True
            pos -= 1
    return out.with_columns(pl.Series("launched_last", flags, dtype=pl.Boolean))
