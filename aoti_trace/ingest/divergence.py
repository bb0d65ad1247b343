"""Cross-rank divergence: the ``divergence`` frame, as ``tlparse --all-ranks-html`` checks the ranks of one run.

Ranks of a distributed job that compile differently end up calling different collectives and hang. For every run
whose TORCH_TRACE holds two or more ranks, each rank's compiles are summarised by four *aspects*:

* ``graphs``: the number of compile sessions;
* ``compile_ids``: the Dynamo compile ids (``[0/0]``, ``[0/1]``, ...);
* ``guards``: the ``dynamo_cpp_guards_str`` payloads, with object ids and addresses masked (they differ between
  processes even for the same guards), hashed;
* ``code``: the md5s the trace records for the generated code (``inductor_output_code``, the AOTI wrapper and
  kernel code dumps).

Per aspect, the ranks fall into groups of equal values; the *reference* is the largest group (on a tie, the one with
the lowest rank). The frame has one row per rank outside the reference group of some aspect. A run with a compile
session that never finished (a rank killed mid-compile) is skipped: its ranks differ because it died.
Masking runs as Polars string expressions; payloads are read only for runs with several ranks.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from aoti_trace.model.frames import Frames, conform, empty
from aoti_trace.model.ranks import rank_ranges

ASPECTS = ("graphs", "compile_ids", "guards", "code")
CODE_DUMPS = ("inductor_aot_wrapper_code", "inductor_aot_kernel_code")
GUARD_IDS = r"(?:0x[0-9a-fA-F]+|\b\d{6,}\b)"  # object ids (___check_obj_id(x, 140159516469552)) and addresses


def divergence_frame(frames: Frames) -> pl.DataFrame:
    """The ``divergence`` frame of ``frames`` (module docstring)."""
    compiles = frames["compiles"]
    if compiles.is_empty():
        return empty("divergence")
    multi = compiles.group_by("run_id").agg(pl.col("rank").drop_nulls().n_unique().alias("n"),
                                            (pl.col("status") == "incomplete").any().alias("cut"))
    runs = multi.filter((pl.col("n") > 1) & ~pl.col("cut"))["run_id"].to_list()
    if not runs:
        return empty("divergence")
    rows = [row for run_id in runs for row in _run(frames, run_id)]
    return conform("divergence", pl.DataFrame(rows)) if rows else empty("divergence")


def _run(frames: Frames, run_id: str) -> list[dict[str, Any]]:
    comp = frames["compiles"].filter((pl.col("run_id") == run_id) & pl.col("rank").is_not_null())
    ev = frames["events"].filter((pl.col("run_id") == run_id) & pl.col("rank").is_not_null())
    per = comp.group_by("rank").agg(
        pl.len().cast(pl.Int64).alias("graphs"),
        pl.col("compile_id").drop_nulls().unique().sort().str.join(" ").alias("compile_ids"))
    code = ev.filter((pl.col("event") == "inductor_output_code") | pl.col("name").is_in(CODE_DUMPS)) \
        .group_by("rank").agg(pl.col("md5").drop_nulls().sort().str.join(" ").alias("code"))
    per = per.join(code, on="rank", how="left").join(_guards(ev), on="rank", how="left").sort("rank")
    files = ev.group_by("rank").agg(pl.col("path").min())
    out: dict[int, list[str]] = {}
    details: dict[str, list[str]] = {}
    for aspect in ASPECTS:
        groups = per.group_by(aspect, maintain_order=True).agg(pl.col("rank")).with_columns(
            pl.col("rank").list.len().alias("size"), pl.col("rank").list.min().alias("low"))
        if groups.height < 2:
            continue
        groups = groups.sort(["size", "low"], descending=[True, False])
        ref, others = groups.row(0, named=True), groups.slice(1)
        for other in others.iter_rows(named=True):
            details.setdefault(_who(ref, other), []).append(_say(aspect, ref, other))
            for r in other["rank"]:
                out.setdefault(r, []).append(aspect)
    if not out:
        return []
    diverging = rank_ranges(out)
    reference = rank_ranges(set(per["rank"].to_list()) - set(out))
    detail = "; ".join(f"{who}: {', '.join(said)}" for who, said in details.items())
    path = dict(zip(files["rank"].to_list(), files["path"].to_list()))
    return [{"run_id": run_id, "path": path.get(r), "lineno": None, "rank": r, "ranks": diverging,
             "reference": reference, "aspects": ", ".join(a), "detail": detail} for r, a in sorted(out.items())]


def _guards(ev: pl.DataFrame) -> pl.DataFrame:
    """rank -> the hash of its guard payloads (ids and addresses masked), in compile-id order."""
    from aoti_trace.ingest.trace.reader import read_payloads

    g = ev.filter(pl.col("event") == "dynamo_cpp_guards_str").sort("rank", "compile_id", "lineno")
    if g.is_empty():
        return pl.DataFrame(schema={"rank": pl.Int32, "guards": pl.Utf8})
    texts: list[str] = []
    for path, part in g.group_by("path", maintain_order=True):
        texts += read_payloads(path[0], list(zip(part["payload_offset"].to_list(), part["payload_length"].to_list())))
    g = g.with_columns(pl.Series("t", texts, pl.Utf8).str.replace_all(GUARD_IDS, "<id>").hash().alias("h"))
    return g.group_by("rank").agg(pl.col("h").cast(pl.Utf8).str.join(" ").alias("guards"))


def _who(ref: dict[str, Any], other: dict[str, Any]) -> str:
    a, b = rank_ranges(other["rank"]), rank_ranges(ref["rank"])
    return f"rank{'s' if len(other['rank']) > 1 else ''} {a} vs rank{'s' if len(ref['rank']) > 1 else ''} {b}"


def _say(aspect: str, ref: dict[str, Any], other: dict[str, Any]) -> str:
    if aspect == "graphs":
        return f"{other['graphs']} compiled graphs instead of {ref['graphs']}"
    if aspect == "compile_ids":
        mine, theirs = set((other["compile_ids"] or "").split()), set((ref["compile_ids"] or "").split())
        extra, missing = sorted(mine - theirs), sorted(theirs - mine)
        parts = ([f"{' '.join(extra)} extra"] if extra else []) + ([f"{' '.join(missing)} missing"] if missing else [])
        return f"compile ids {' and '.join(parts) or 'differ'}"
    return "different guards" if aspect == "guards" else "different generated code"
