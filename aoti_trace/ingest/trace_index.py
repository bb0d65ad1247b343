"""Line index of one TORCH_TRACE file: one row per record header, payloads kept as byte ranges.

Two interchangeable indexers produce the same table (see :func:`index_file`):

* **fast path** (trace-format.md §11.1): a Polars streaming query over the file read as one string column
  (``scan_csv`` with separator ``\\x01``, no quoting, UTF-8 lossy). Each line's byte width gives a running byte
  offset; a record id increases on every non-blank line that does not start with a TAB. Header fields are pulled
  out with a few cheap regexes; payload lines are reduced to ``(start, end, count)`` per record. The full header
  text is kept only for the records whose JSON is decoded later (``str``, ``compilation_metrics``, headers that do
  not look complete) or for every record when ``keep_text`` is set (small files, thorough checks).
* **exact path** (§11.2): a Python scanner over the raw bytes, used when the decoded line widths cannot be trusted:
  CRLF line endings, invalid UTF-8, raw ``\\x01`` bytes (all detected because the computed end of the last line
  differs from the file size, or CRLF in the first 64 KiB), or a Polars error on the file. It also counts lines
  holding invalid UTF-8 (``bad_utf8`` damage) and strips ``\\r`` before ``\\n``.

Byte offsets always refer to the (decompressed) file; ``payload_length`` includes the TABs and newlines on disk.
"""

from __future__ import annotations

import polars as pl

# glog prefix (trace-format.md §2.3), stopping right after the event name: the first envelope key.
HEADER_RE = (
    r'^(?:\[rank(?P<rank_prefix>\d+)\]:)?(?P<level>[VIWEC])(?P<mmdd>\d{4}) '
    r'(?P<hms>\d{2}:\d{2}:\d{2}\.\d{6}) (?P<pid>\d+) (?P<src>[^:\]]+:\d+)\] \{"(?P<event>[^"\\]*)"'
)
# Context keys in the order trace_structured writes them after the metadata object (_internal.py 1498-1550).
# Matched against the end of the line only, so metadata keys of the same name never win (the "last occurrence").
TAIL_RE = (
    r'(?:"rank": (?P<rank>\d+), )?(?:"compiled_autograd_id": (?P<ca>\d+), )?(?:"frame_id": (?P<fid>\d+), )?'
    r'(?:"frame_compile_id": (?P<fcid>\d+), )?(?:"attempt": (?P<att>\d+))?(?:, )?(?:"subgraph_name": "[^"\\]*")?'
    r'(?:, )?(?:"has_payload": "(?P<md5>[0-9a-f]{32})")?\}$'
)
# rank written before a stack (no compile id then): `"rank": N, "stack": [`
RANK_BEFORE_STACK_RE = r'"rank": (\d+), "stack": \['
STACK_SEP = '"stack": ['  # text after its first occurrence = the stack list (minus "[") and what follows
# name (and encoding) are the first keys of the metadata of artifact, graph_dump, dump_file, link, ...
NAME_RE = r'\] \{"\w+": \{"name": "(?P<name>[^"\\]*)"(?:, "encoding": "(?P<encoding>[^"\\]*)")?'
JSON_EVENTS = ("str", "compilation_metrics")

# Columns of an index (both paths).
INDEX_COLUMNS = [
    "rec", "lineno", "offset", "width", "rank_prefix", "level", "mmdd", "hms", "pid", "src", "event",
    "rank", "ca", "fid", "fcid", "att", "md5", "name", "encoding", "stack_text", "json_text", "looks_complete",
    "fffd", "pay_start", "pay_end", "pay_lines", "other_end", "bad_utf8",
]


def _extract(lf: pl.LazyFrame, keep_text: bool) -> pl.LazyFrame:
    """Header fields from column ``text`` (one row per header line)."""
    t = pl.col("text")
    head = t.str.extract_groups(HEADER_RE)
    tail = t.str.extract_groups(TAIL_RE)  # end-anchored: the regex engine searches backwards from the end
    looks_complete = t.str.ends_with("}")
    ne = t.str.extract_groups(NAME_RE)
    lf = lf.with_columns(head=head, tail=tail, ne=ne, looks_complete=looks_complete).with_columns(
        rank_prefix=pl.col("head").struct.field("rank_prefix").cast(pl.Int32),
        level=pl.col("head").struct.field("level"),
        mmdd=pl.col("head").struct.field("mmdd"),
        hms=pl.col("head").struct.field("hms"),
        pid=pl.col("head").struct.field("pid").cast(pl.Int64),
        src=pl.col("head").struct.field("src"),
        event=pl.col("head").struct.field("event"),
        rank=pl.coalesce(
            pl.col("tail").struct.field("rank"), t.str.extract(RANK_BEFORE_STACK_RE, 1)
        ).cast(pl.Int32),
        ca=pl.col("tail").struct.field("ca").cast(pl.Int64),
        fid=pl.col("tail").struct.field("fid").cast(pl.Int64),
        fcid=pl.col("tail").struct.field("fcid").cast(pl.Int64),
        att=pl.col("tail").struct.field("att").cast(pl.Int64),
        md5=pl.col("tail").struct.field("md5"),
        name=pl.col("ne").struct.field("name"),
        encoding=pl.col("ne").struct.field("encoding"),
        stack_text=t.str.split_exact(STACK_SEP, 1).struct.field("field_1"),
        fffd=t.str.contains("\ufffd", literal=True),
    )
    if keep_text:
        json_text = t
    else:
        json_text = pl.when(pl.col("event").is_in(JSON_EVENTS) | ~pl.col("looks_complete")).then(t)
    return lf.with_columns(json_text=json_text).drop("head", "tail", "ne", "text")


def index_fast(path: str, keep_text: bool) -> pl.DataFrame:
    """Polars streaming index (exact only when the caller's size check passes)."""
    lines = (
        pl.scan_csv(
            path, has_header=False, separator="\x01", quote_char=None, new_columns=["text"],
            infer_schema=False, encoding="utf8-lossy", truncate_ragged_lines=True, comment_prefix=None,
        )
        .with_row_index("lineno", offset=1)
        .with_columns(
            # Int64 before the cumulative sum: len_bytes is UInt32 and would overflow past 4 GiB (§11.2)
            width=pl.col("text").str.len_bytes().fill_null(0).cast(pl.Int64) + 1,
            is_payload=pl.col("text").str.starts_with("\t").fill_null(False),
            is_blank=pl.col("text").is_null(),
        )
        .with_columns(
            offset=pl.col("width").cum_sum() - pl.col("width"),
            rec=(~pl.col("is_payload") & ~pl.col("is_blank")).cast(pl.Int64).cum_sum(),
            lineno=pl.col("lineno").cast(pl.Int64),
        )
    )
    headers = _extract(
        lines.filter(~pl.col("is_payload") & ~pl.col("is_blank")).select("rec", "lineno", "offset", "width", "text"),
        keep_text,
    )
    end = pl.col("offset") + pl.col("width")
    others = (
        lines.filter(pl.col("is_payload") | pl.col("is_blank"))
        .group_by("rec")
        .agg(
            pay_start=pl.col("offset").filter(pl.col("is_payload")).min(),
            pay_end=end.filter(pl.col("is_payload")).max(),
            pay_lines=pl.col("is_payload").sum().cast(pl.Int32),  # 0 for blank-only groups
            other_end=end.max(),
        )
    )
    # rec 0 = lines before the first header (orphan payload / leading blanks): keep it via a full join.
    df = headers.join(others, on="rec", how="full", coalesce=True).collect(engine="streaming")
    return (
        df.with_columns(bad_utf8=pl.lit(0, pl.Int32), pay_lines=pl.col("pay_lines").fill_null(0))
        .sort("rec")
        .select(INDEX_COLUMNS)
    )


def index_exact(path: str, keep_text: bool) -> pl.DataFrame:
    """Byte-exact index by a Python scan of the raw bytes (CRLF, invalid UTF-8, \\x01 bytes)."""
    recs: list[dict] = []
    cur: dict = {"rec": 0, "lineno": None, "offset": None, "width": None, "text": None, "pay_start": None,
                 "pay_end": None, "pay_lines": 0, "other_end": None, "bad_utf8": 0}
    offset = 0
    rec = 0
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            width = len(raw)
            line = raw[:-1] if raw.endswith(b"\n") else raw
            if line.endswith(b"\r"):
                line = line[:-1]
            try:
                text = line.decode("utf-8")
                bad = 0
            except UnicodeDecodeError:
                text = line.decode("utf-8", errors="replace")
                bad = 1
            if not line:  # blank line
                cur["other_end"] = offset + width
            elif line.startswith(b"\t"):
                if cur["pay_start"] is None:
                    cur["pay_start"] = offset
                cur["pay_end"] = offset + width
                cur["other_end"] = offset + width
                cur["pay_lines"] += 1
                cur["bad_utf8"] += bad
            else:
                recs.append(cur)
                rec += 1
                cur = {"rec": rec, "lineno": lineno, "offset": offset, "width": width, "text": text,
                       "pay_start": None, "pay_end": None, "pay_lines": 0, "other_end": None, "bad_utf8": bad}
            offset += width
    recs.append(cur)
    if recs[0]["pay_lines"] == 0 and recs[0]["other_end"] is None:
        recs = recs[1:]  # nothing before the first header
    df = pl.DataFrame(
        recs,
        schema={"rec": pl.Int64, "lineno": pl.Int64, "offset": pl.Int64, "width": pl.Int64, "text": pl.String,
                "pay_start": pl.Int64, "pay_end": pl.Int64, "pay_lines": pl.Int32, "other_end": pl.Int64,
                "bad_utf8": pl.Int32},
    )
    hdr = df.filter(pl.col("lineno").is_not_null())
    extracted = _extract(hdr.lazy(), keep_text).collect()
    rest = df.filter(pl.col("lineno").is_null()).drop("text")
    return pl.concat([extracted, rest], how="diagonal_relaxed").sort("rec").select(INDEX_COLUMNS)


def computed_end(df: pl.DataFrame) -> int:
    """End of the last line according to the index (equals the file size when offsets are exact)."""
    if df.is_empty():
        return 0
    return int(
        df.select(pl.max_horizontal((pl.col("offset") + pl.col("width")).max(), pl.col("other_end").max())).item()
        or 0
    )


def index_file(path: str, size: int, keep_text: bool) -> tuple[pl.DataFrame, str]:
    """Index ``path`` (``size`` bytes) and say which path was used: ``fast`` or ``exact (<reason>)``."""
    with open(path, "rb") as fh:
        head = fh.read(65536)
    if b"\r\n" in head:
        return index_exact(path, keep_text), "exact (CRLF line endings)"
    try:
        df = index_fast(path, keep_text)
    except pl.exceptions.PolarsError as exc:  # e.g. \x01 on the first line -> SchemaError
        return index_exact(path, keep_text), f"exact (fast index failed: {type(exc).__name__})"
    end = computed_end(df)
    if end not in (size, size + 1):  # + 1: missing final newline
        return index_exact(path, keep_text), f"exact (decoded widths give {end} bytes, file has {size})"
    if df["fffd"].any():
        return index_exact(path, keep_text), "exact (U+FFFD in a header: invalid UTF-8?)"
    return df, "fast"
