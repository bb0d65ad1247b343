"""The payloads of a trace's ``chromium_event`` records as the derived frame ``chromium`` (read on first use, one pass
per trace file: a ``.gz`` is decompressed once, front to back). The HTML report's compile-phase timeline and the
Perfetto export read it."""

from __future__ import annotations

import polars as pl

from aoti_trace.model.frames import Frames, schema


def chromium_frame(frames: Frames) -> pl.DataFrame:
    """Frame ``chromium`` (see :data:`aoti_trace.model.frames.SCHEMAS`), rows in the order of ``events``."""
    from aoti_trace.ingest.trace.reader import read_payloads

    ev = frames["events"]
    if ev.height == 0:
        return pl.DataFrame(schema=schema("chromium"))
    ev = ev.filter((pl.col("event") == "chromium_event") & pl.col("payload_offset").is_not_null()
                   & pl.col("payload_length").is_not_null())
    parts = []
    for (path,), rows in ev.partition_by(["path"], as_dict=True, maintain_order=True).items():
        texts = read_payloads(path, list(zip(rows["payload_offset"].to_list(), rows["payload_length"].to_list())))
        parts.append(rows.select("run_id", "path", "lineno", "rank", "session")
                     .with_columns(pl.Series("payload", texts, dtype=pl.String)))
    if not parts:
        return pl.DataFrame(schema=schema("chromium"))
    return pl.concat(parts)
