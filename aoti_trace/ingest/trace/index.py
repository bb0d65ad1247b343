"""Line index of TORCH_TRACE files: one row per record header, small columns only, payloads as byte ranges.

Column ``file`` is the position of the file among those indexed together: 0 for a file indexed alone; several small
files are indexed by one query (:func:`index_batch`), and each one's rows are those it has alone. Two
interchangeable indexers produce the same table for one file (see :func:`index_file`):

* **fast path** (trace-format.md §11.1): one Polars streaming query over the file read as one string column
  (``scan_csv`` with separator ``\\x01``, no quoting, UTF-8 lossy). Each line's byte width gives its byte offset:
  a sum within each morsel (a ``map_batches`` step, :class:`_MorselOffsets`) plus the bytes of the morsels before
  it, added up afterwards (no streaming ``cum_sum``, whose branch buffers text: bench/RESULTS.md). Only header
  lines leave the query, with a few anchored regex extracts (low-cardinality ones as ``Categorical``) and a 64-bit
  hash of the stack text. No join and no group-by: a record's payload range follows from two consecutive headers
  (payload = everything between them when no blank line is there; the rare records with blank lines, the lines
  before the first header and the tail after the last header are measured exactly from the raw bytes). Header
  texts are not kept (unless ``keep_text``): the few records whose JSON is decoded (``str``,
  ``compilation_metrics``, one per distinct stack) are re-read afterwards by byte range with :func:`header_text`.
* **exact path** (§11.2): a Python scanner over the raw bytes, used when the decoded line widths cannot be trusted:
  CRLF line endings, invalid UTF-8, raw ``\\x01`` bytes (detected because the last header is not where the decoded
  widths put it, the tail after it does not decode, or CRLF in the first 64 KiB), or a Polars error on the file.
  It also counts lines holding invalid UTF-8 (``bad_utf8`` damage) and strips ``\\r`` before ``\\n``.

* **batch** (:func:`index_batch`): the fast path's extraction and payload ranges over the lines of several small
  files held in memory, with a per-file line number and offset, in one in-memory query: Polars' fixed cost per
  operation is paid once for all of them. Only files whose every byte the CSV reader decodes as it is
  (:func:`clean`) go there, and one that the fast path would refuse is handed back to be indexed alone.

* **squeezed** (:class:`Squeeze`, for a long file): the fast path's rows arrive in batches and the plain
  ``chromium_event`` records beyond the first and last :data:`KEEP_CHROMIUM` are counted, not kept; each row
  carries the next header's line and offset so that payload ranges stay exact. The index then grows with the
  records that are not plain timeline events only.

Byte offsets always refer to the (decompressed) file; ``payload_length`` includes the TABs and newlines on disk.
Memory: the streaming query reads the file in 4 MiB chunks with one chunk prefetched (``POLARS_CSV_CHUNK_SIZE``,
``POLARS_CSV_CHUNK_PREFETCH_LIMIT``, set for the query unless the caller set them); the defaults keep several
256 MiB windows of the memory-mapped file resident (bench/RESULTS.md).
"""

from __future__ import annotations

import io
import os
import re
from contextlib import contextmanager
from typing import Any, BinaryIO, Iterator

import polars as pl

# glog prefix (trace-format.md §2.3), stopping right after the event name: the first envelope key.
HEADER_RE = (
    r'^(?:\[rank(?P<rank_prefix>\d+)\]:)?(?P<level>[VIWEC])(?P<time>\d{4} \d{2}:\d{2}:\d{2}\.\d{6}) '
    r'(?P<pid>\d+) (?P<src>[^:\]]+:\d+)\] \{"(?P<event>[^"\\]*)"'
)
# Context keys in the order trace_structured writes them after the metadata object (_internal.py 1498-1550).
# Matched against the end of the line only, so metadata keys of the same name never win (the "last occurrence").
TAIL_RE = (
    r'(?:"rank": (?P<rank>\d+), )?(?:"compiled_autograd_id": (?P<ca>\d+), )?(?:"frame_id": (?P<fid>\d+), )?'
    r'(?:"frame_compile_id": (?P<fcid>\d+), )?(?:"attempt": (?P<att>\d+))?(?:, )?(?:"subgraph_name": "[^"\\]*")?'
    r'(?:, )?(?:"has_payload": "(?P<md5>[0-9a-f]{32})")?\}$'
)
# The context keys other than has_payload are rare (Dynamo records, ranks): TAIL_RE (a capture search, the costly
# kind of regex call) runs only on lines where this capture-free, end-anchored search finds one; it accepts every
# line where TAIL_RE would capture an integer key.
TAIL_INT_RE = (
    r'"(?:rank|compiled_autograd_id|frame_id|frame_compile_id|attempt)": \d+'
    r'(?:(?:, )*"[^"\\]*": (?:\d+|"[^"\\]*"))*(?:, )*\}$'
)
MD5_RE = r'"has_payload": "[0-9a-f]{32}"\}$'  # TAIL_RE's md5 group matches exactly when this does
# rank written before a stack (no compile id then): `"rank": N, "stack": [`
RANK_BEFORE_STACK_RE = r'"rank": (\d+), "stack": \['
STACK_SEP = '"stack": ['  # text after its first occurrence = the stack list (minus "[") and what follows
# name (and encoding) are the first keys of the metadata of artifact, graph_dump, dump_file, link, ...
NAME_RE = r'\] \{"\w+": \{"name": "(?P<name>[^"\\]*)"(?:, "encoding": "(?P<encoding>[^"\\]*)")?'
JSON_EVENTS = ("str", "compilation_metrics")
HASH_SEED = 0x5EED

# Columns of an index (both paths); ``json_text`` (the header line) is appended when ``keep_text`` is set.
INDEX_COLUMNS = [
    "rec", "lineno", "offset", "width", "rank_prefix", "level", "time", "pid", "src", "event",
    "rank", "ca", "fid", "fcid", "att", "md5", "name", "encoding", "stack_hash", "looks_complete",
    "fffd", "pay_start", "pay_end", "pay_lines", "other_end", "bad_utf8",
]
CATEGORICAL = ("level", "src", "event", "name", "encoding")  # low-cardinality text columns of the index
SCAN_ENV = {"POLARS_CSV_CHUNK_SIZE": str(4 << 20), "POLARS_CSV_CHUNK_PREFETCH_LIMIT": "1"}


# column of an index: the position of the file among the files indexed together (0 for a file indexed alone)
FILE = "file"
KEY = 1 << 40  # FILE * KEY + rec: one integer key for a record of one of several files (rec < 2**40)
PAYLOAD = pl.col("text").str.starts_with("\t").fill_null(False)  # a payload line (TAB); a blank line is not


class Inexact(Exception):
    """The decoded line widths do not match the bytes on disk: use the exact path."""


def _columns(keep_text: bool) -> list[str]:
    return INDEX_COLUMNS + (["json_text"] if keep_text else [])


def _extract(lf: pl.LazyFrame, keep_text: bool) -> pl.LazyFrame:
    """Header fields from column ``text`` (one row per header line); drops ``text`` unless ``keep_text``."""
    t = pl.col("text")
    head = t.str.extract_groups(HEADER_RE)
    # end-anchored: the regex engine searches backwards from the end; gated (see TAIL_INT_RE)
    tail = pl.when(t.str.contains(TAIL_INT_RE)).then(t).str.extract_groups(TAIL_RE)
    ne = t.str.extract_groups(NAME_RE)
    # the text after the first STACK_SEP as bytes: a byte offset and a binary slice (split_exact would also copy
    # everything before it, ~30 KB per compilation_metrics line: ~1 CPU-s per GB of log)
    at = t.str.find(STACK_SEP, literal=True)
    stack = pl.when(at.is_not_null()).then(t.cast(pl.Binary).bin.slice(at + len(STACK_SEP.encode())))
    h, tl, n = pl.col("head").struct.field, pl.col("tail").struct.field, pl.col("ne").struct.field
    # integer fields: a run of digits too long for the type (damage) reads as null, never an error
    lf = lf.with_columns(head=head, tail=tail, ne=ne).with_columns(
        rank_prefix=h("rank_prefix").cast(pl.Int32, strict=False),
        level=h("level"),
        time=h("time"),
        pid=h("pid").cast(pl.Int64, strict=False),
        src=h("src"),
        event=h("event"),
        rank=pl.coalesce(tl("rank"), t.str.extract(RANK_BEFORE_STACK_RE, 1)).cast(pl.Int32, strict=False),
        ca=tl("ca").cast(pl.Int32, strict=False),
        fid=tl("fid").cast(pl.Int32, strict=False),
        fcid=tl("fcid").cast(pl.Int32, strict=False),
        att=tl("att").cast(pl.Int32, strict=False),
        # the last 34 characters are ASCII here; to_lowercase (a no-op on hex) copies: a slice is a view that
        # would keep the whole chunk of header text alive (measured: 1.1 GB peak instead of 0.25 GB at 1 GB)
        md5=pl.when(t.str.contains(MD5_RE)).then(t.str.slice(-34, 32).str.to_lowercase()),
        name=n("name"),
        encoding=n("encoding"),
        # a hash, not the text: ~100k id-less AOTI records per GB repeat a few dozen stacks (2-3 KB each)
        stack_hash=pl.when(at.is_not_null()).then(stack.hash(HASH_SEED)),
        looks_complete=t.str.ends_with("}"),
        fffd=t.str.contains("\ufffd", literal=True),
    )
    if keep_text:
        lf = lf.with_columns(json_text=t)
    # a few dozen distinct values per file: 4-byte codes instead of a string per row (the frames get String
    # columns that share one small buffer of distinct values: ingest.trace._strings)
    return lf.drop("head", "tail", "ne", "text").with_columns(pl.col(*CATEGORICAL).cast(pl.Categorical))


@contextmanager
def _scan_env() -> Iterator[None]:
    """Small CSV read-ahead for the streaming scan (peak RSS), unless the caller configured it."""
    added = [k for k in SCAN_ENV if k not in os.environ]
    for k in added:
        os.environ[k] = SCAN_ENV[k]
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


def _csv(source: str | bytes) -> pl.LazyFrame:
    """A file (path) or bytes as one string column ``text``, one row per physical line (a blank line: null)."""
    return pl.scan_csv(
        source, has_header=False, separator="\x01", quote_char=None, new_columns=["text"],
        infer_schema=False, encoding="utf8-lossy", truncate_ragged_lines=True, comment_prefix=None,
    )


# byte width of a line with its newline (a last line without one counts one byte more). Int64 before any sum:
# len_bytes is UInt32 and would overflow past 4 GiB (§11.2)
WIDTH = (pl.col("text").str.len_bytes().fill_null(0).cast(pl.Int64) + 1).alias("width")


def _lines(path: str) -> pl.LazyFrame:
    """The file as one string column ``text``, one row per physical line, with ``lineno`` and byte ``width``."""
    return _csv(path).with_row_index("lineno", offset=1).with_columns(WIDTH)


class _MorselOffsets:
    """``LazyFrame.map_batches`` function: byte offset of each line within its morsel (``local``), and the
    (first line, rows, bytes) of every morsel it saw, from which :meth:`offsets` derives file offsets.

    A streaming ``cum_sum`` over the whole file is a separate branch of the streaming graph: the text morsels
    wait in a multiplexer until the branches are zipped again, and the slow regex work downstream lets hundreds of
    MB pile up there (bench/RESULTS.md). A per-morsel sum is an ordinary pipeline step (no zip): the morsels
    may arrive in any order and from any thread, their bases are added up afterwards.
    """

    LOCAL = (pl.col("width").cum_sum() - pl.col("width")).alias("local")

    def __init__(self) -> None:
        self.parts: list[tuple[int, int, int]] = []

    def __call__(self, df: pl.DataFrame) -> pl.DataFrame:
        out = df.with_columns(self.LOCAL)
        if df.height:
            self.parts.append((df["lineno"][0], df.height, df["width"].sum()))  # type: ignore[arg-type]  # Int64 column: an int
        return out

    def offsets(self, hdr: pl.DataFrame, lineno: str = "lineno", local: str = "local", prefix: bool = False
                ) -> pl.Series | None:
        """File offsets of the rows of ``hdr`` (columns ``lineno`` and ``local``; null where ``lineno`` is); None
        unless the morsels tile the file (``prefix``: the lines up to the last row of ``hdr``, during the scan)."""
        parts = sorted(self.parts)  # (a copy: the scan may still append)
        if prefix and parts and hdr.height:
            last = hdr[lineno].max()
            upto = next((i for i, p in enumerate(parts) if p[0] + p[1] > last), None)  # type: ignore[operator]  # an int
            if upto is None:
                return None
            parts = parts[:upto + 1]
        first = [p[0] for p in parts]
        if not parts or first[0] != 1 or any(a[0] + a[1] != b[0] for a, b in zip(parts, parts[1:])):
            return None  # not contiguous, complete morsels (a pushed-down filter, a changed engine): no offsets
        bases, total = [], 0
        for _, _, nbytes in parts:
            bases.append(total)
            total += nbytes
        at = pl.Series(first, dtype=pl.Int64).search_sorted(hdr[lineno].fill_null(1), side="right") - 1
        base = pl.Series(bases, dtype=pl.Int64).gather(at)
        return (base + hdr[local]).alias("offset")  # type: ignore[no-any-return]  # polars' stubs (null stays null)


def _scan_headers(path: str, keep_text: bool, squeeze: Squeeze | None = None) -> pl.DataFrame:
    """Streaming pass: header rows and blank rows (``text`` null, rare), with line number, offset and width. With
    ``squeeze``, the rows arrive in batches and the repeated ``chromium_event`` records are counted there instead of
    kept (:class:`Squeeze`); the rows then also carry the line and offset of the next header (``nxt_lineno``,
    ``nxt``), which the payload ranges of the kept records need."""
    morsels = _MorselOffsets()
    lines = (
        _lines(path)
        .select("lineno", "width", "text")
        .map_batches(morsels, streamable=True, schema={"lineno": pl.UInt32, "width": pl.Int64, "text": pl.String,
                                                        "local": pl.Int64})
        .filter(~PAYLOAD)
        .select(pl.lit(0, pl.Int32).alias(FILE), pl.col("lineno").cast(pl.Int64), "local", "width", "text")
    )
    with _scan_env():
        if squeeze is None:
            rows = _extract(lines, keep_text).collect(engine="streaming")
        else:
            squeeze.morsels = morsels
            for batch in _extract(lines, keep_text).collect_batches(chunk_size=BATCH_ROWS, engine="streaming"):
                squeeze.add(batch)
            rows = squeeze.finish()
    offset = morsels.offsets(rows)
    if offset is not None and rows["lineno"].is_sorted():
        if squeeze is not None:
            nxt = morsels.offsets(rows, "nxt_lineno", "nxt_local")
            rows = rows.with_columns(pl.when(pl.col("nxt_lineno").is_not_null()).then(nxt).alias("nxt"))
            rows = rows.drop("nxt_local")
        return rows.with_columns(offset).drop("local")
    del rows
    if squeeze is not None:
        squeeze.reset()
    # fallback: one streaming cumulative sum (exact, but the multiplexer buffers text: more memory; nothing squeezed)
    lines = (
        _lines(path)
        .with_columns(offset=pl.col("width").cum_sum() - pl.col("width"))
        .filter(~PAYLOAD)
        .select(pl.lit(0, pl.Int32).alias(FILE), pl.col("lineno").cast(pl.Int64), "offset", "width", "text")
    )
    with _scan_env():
        return _extract(lines, keep_text).collect(engine="streaming")


BATCH_ROWS = 1 << 14  # header rows per batch of a squeezed scan (smaller: lower peak, same CPU; bench/RESULTS.md)
_BLANK = pl.col("width") == 1
# a record that Squeeze may leave out (rows of the scan, blank ones included: none may follow it)
PLAIN = (~_BLANK & (pl.col("event") == "chromium_event") & pl.col("md5").is_not_null()
         & pl.all_horizontal(pl.col("ca", "fid", "fcid", "att").is_null()) & pl.col("looks_complete")
         & ~pl.col("fffd") & pl.col("stack_hash").is_null() & ~_BLANK.shift(-1).fill_null(False)).fill_null(False) \
    .alias("plain")
KEEP_CHROMIUM = 4096  # a squeezed file keeps its first and its last this many plain chromium_event records


class Squeeze:
    """Bounded index rows for a long log: the plain ``chromium_event`` records (no compile id, a payload, complete
    JSON, no stack, no blank line after them, valid UTF-8) beyond the first and the last :data:`KEEP_CHROMIUM` of
    the file are counted, not kept. A log that repeats its compiles writes ~100 of them per compile (~85% of its
    records); every other record is kept, so sessions, compiles, stacks, artifacts and damage come out as from the
    whole index, and only ``events``/``artifacts``/``chromium`` miss the timeline records in the middle.

    Fed the scan's rows in line order (:meth:`add`), batch by batch: each row gets the line number and morsel-local
    offset of the next header (``nxt_lineno``, ``nxt_local``) before any row is dropped; the last header of a batch
    waits for the next batch. After the scan, :attr:`total` chromium_event records were seen and :attr:`skipped`
    of them left out, lines :attr:`first` to :attr:`last`."""

    compact_rows = 1 << 15  # kept rows between two calls of :meth:`compact`
    morsels: _MorselOffsets | None = None  # set by the scan: file offsets of the rows seen so far

    def __init__(self, keep: int | None = None) -> None:
        self.keep = KEEP_CHROMIUM if keep is None else keep
        self.reset()

    def compact(self) -> None:
        """Called during the scan every :attr:`compact_rows` kept rows; may shrink :attr:`kept` (a subclass)."""

    def settle(self) -> list[pl.DataFrame]:
        """The kept rows (not the tail) at the end of the scan, the last record included (a subclass)."""
        return self.kept

    def reset(self) -> None:
        """Forget what was added (the scan starts again unsqueezed)."""
        self.kept: list[pl.DataFrame] = []
        self.tail: list[pl.DataFrame] = []
        self.tail_rows = 0
        self.pending: pl.DataFrame | None = None
        self.head_left = self.keep
        self.total = self.skipped = self.since = 0
        self.first: int | None = None
        self.last: int | None = None

    def add(self, batch: pl.DataFrame) -> None:
        """The next rows of the scan (header and blank rows, in line order)."""
        df = batch if self.pending is None else pl.concat([self.pending, batch], how="vertical")
        nxt = [pl.when(~_BLANK).then(pl.col(c)).shift(-1).backward_fill().alias(f"nxt_{c}") for c in ("lineno", "local")]
        df = df.with_columns(*nxt)
        ready = int(df["nxt_lineno"].is_not_null().sum())  # the rows before the last header of df (a prefix)
        self.pending = df.slice(ready).drop("nxt_lineno", "nxt_local")
        df = df.slice(0, ready).with_columns(PLAIN)
        n = int(df["plain"].sum())
        self.total += n
        if self.head_left:  # the first ones are kept
            df = df.with_columns(pl.col("plain") & (pl.col("plain").cum_sum() > self.head_left))
            self.head_left = max(0, self.head_left - n)
        # (lower-casing copies the kept strings out of the batch's buffers, which a filter would keep alive)
        self.kept.append(df.filter(~pl.col("plain")).drop("plain").with_columns(pl.col("time", "md5").str.to_lowercase()))
        self.since += self.kept[-1].height
        if self.since >= self.compact_rows:
            self.since = 0
            self.compact()
        late = df.filter("plain").drop("plain")
        if late.height:
            self.tail.append(late)
            self.tail_rows += late.height
        if self.tail_rows > 2 * self.keep:  # the last ``keep`` stay
            tail = pl.concat(self.tail, how="vertical")
            self._count(tail.head(tail.height - self.keep))
            self.tail = [tail.tail(self.keep).with_columns(pl.col("time", "md5").str.to_lowercase())]
            self.tail_rows = self.keep

    def _count(self, gone: pl.DataFrame) -> None:
        self.skipped += gone.height
        lo, hi = gone["lineno"].min(), gone["lineno"].max()
        self.first = lo if self.first is None else self.first  # type: ignore[assignment]  # Int64 column: an int
        self.last = hi  # type: ignore[assignment]  # Int64 column: an int

    def finish(self) -> pl.DataFrame:
        """The kept rows, in line order (the last header: next header null)."""
        if self.tail_rows > self.keep:
            tail = pl.concat(self.tail, how="vertical")
            self._count(tail.head(tail.height - self.keep))
            self.tail = [tail.tail(self.keep)]
        if self.pending is not None:  # the last record: kept
            self.total += int(self.pending.select(PLAIN)["plain"].sum())
            self.kept.append(self.pending.with_columns(nxt_lineno=pl.lit(None, pl.Int64),
                                                       nxt_local=pl.lit(None, pl.Int64)))
        parts = self.settle() + self.tail
        self.kept, self.tail, self.pending = [], [], None
        return pl.concat(parts, how="vertical").sort("lineno")  # (the tail's rows go between the others)


def _measure(data: bytes, start: int) -> tuple[int | None, int | None, int, int | None]:
    """(pay_start, pay_end, pay_lines, other_end) of the payload / blank lines in ``data``.

    ``data`` starts at byte ``start`` and holds no header line; a last line without newline counts one byte more
    (as the decoded widths do). Raises :class:`Inexact` when the bytes are not what the scan decoded.
    """
    if b"\r\n" in data or b"\x01" in data:
        raise Inexact
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise Inexact from None
    pay_start = pay_end = other_end = None
    pay_lines = 0
    off = start
    parts = data.split(b"\n") if data else []
    if data.endswith(b"\n"):
        parts.pop()
    for line in parts:
        end = off + len(line) + 1
        if line.startswith(b"\t"):
            if pay_start is None:
                pay_start = off
            pay_end, pay_lines = end, pay_lines + 1
        elif line:
            raise Inexact  # a header line where the scan saw none
        other_end = end
        off = end
    return pay_start, pay_end, pay_lines, other_end


def _check_last_header(fh: BinaryIO, row: dict[str, Any], size: int) -> None:
    """The last header is where the decoded widths put it, byte for byte (else offsets drifted)."""
    off, width = row["offset"], row["width"]
    fh.seek(max(0, off - 1))
    raw = fh.read(width + (1 if off else 0))
    if off:
        if not raw.startswith(b"\n"):
            raise Inexact
        raw = raw[1:]
    line = raw[:-1] if raw.endswith(b"\n") else raw
    if len(line) != width - 1 or b"\n" in line or b"\r" in line or b"\x01" in line:
        raise Inexact
    if off + width - 1 < size and not raw.endswith(b"\n"):
        raise Inexact
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise Inexact from None
    m = re.match(HEADER_RE, text)
    if (m["time"] if m else None) != row["time"] or (int(m["pid"]) if m else None) != row["pid"]:
        raise Inexact


def index_fast(path: str, keep_text: bool, squeeze: Squeeze | None = None) -> pl.DataFrame:
    """Polars streaming index (of the rows ``squeeze`` keeps, if given); raises :class:`Inexact` when decoded widths
    and bytes on disk disagree."""
    size = os.path.getsize(path)
    rows = _scan_headers(path, keep_text, squeeze)
    with open(path, "rb") as fh:
        idx, inexact = _payload_ranges(rows, [(fh, size)], keep_text)
    if inexact:
        raise Inexact
    return idx


def clean(data: bytes) -> bool:
    """Whether :func:`index_batch` may index ``data`` (a whole file): valid UTF-8 without U+FFFD, CR, ``\\x01``,
    NUL or a byte-order mark, so that every line the CSV reader decodes is the bytes on disk, alone in a file or
    after other files. (The other files go to :func:`index_file`, which takes the exact path for most of them.)"""
    if any(b in data for b in (b"\r", b"\x01", b"\x00", "\ufffd".encode())) or data.startswith(b"\xef\xbb\xbf"):
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def index_batch(datas: list[bytes], keep_text: bool) -> tuple[pl.DataFrame, set[int]]:
    """The indexes of several small :func:`clean` files (their bytes) in one in-memory query: the lines of all
    of them, with column ``file`` (position in ``datas``), through the same extraction (:func:`_extract`) and
    payload ranges (:func:`_payload_ranges`) as :func:`index_fast`, so that Polars' fixed cost per operation is
    paid once per batch. Each file's rows equal ``index_fast`` of that file alone (with ``file`` set).

    Returns the index and the files :func:`index_fast` would refuse (:class:`Inexact`: no record header, or the
    bytes disagree): their rows are left out, index them alone with :func:`index_file`. Raises
    :class:`Inexact` when the CSV reader does not give one row per line of each file."""
    counts = [d.count(b"\n") + (0 if d.endswith(b"\n") else 1) for d in datas]
    lines = _csv(b"".join(d if d.endswith(b"\n") else d + b"\n" for d in datas)).collect()
    if lines.height != sum(counts):
        raise Inexact
    file = pl.select(pl.lit(pl.Series(range(len(datas)), dtype=pl.Int32)).repeat_by(pl.lit(pl.Series(counts)))
                     .explode().alias(FILE))
    lf = (
        lines.hstack(file).lazy()
        .with_columns(lineno=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over(FILE), width=WIDTH)
        .with_columns(offset=(pl.col("width").cum_sum() - pl.col("width")).over(FILE))
        .filter(~PAYLOAD)
        .select(FILE, "lineno", "offset", "width", "text")
    )
    rows = _extract(lf, keep_text).collect()
    return _payload_ranges(rows, [(io.BytesIO(d), len(d)) for d in datas], keep_text)


def _payload_ranges(rows: pl.DataFrame, files: list[tuple[BinaryIO, int]], keep_text: bool
                    ) -> tuple[pl.DataFrame, set[int]]:
    """The index of the files of ``rows`` (their header and blank rows from the scan, ``file`` = position in
    ``files``: (opened file, size) each): a record's payload range follows from two consecutive headers; the
    records with blank lines, the last record (up to the end of its file) and the lines before the first header
    are measured exactly from the bytes. Returns the index and the files whose bytes are not what the scan decoded
    (or that have no header at all: nothing to anchor the offsets); their rows are left out."""
    multi = len(files) > 1

    def per_file(e: pl.Expr) -> pl.Expr:
        return e.over(FILE) if multi else e

    blank = pl.col("width") == 1  # a header line is never empty
    rows = rows.with_columns(rec=per_file((~blank).cast(pl.Int64).cum_sum()))  # blank rows: the record they follow
    key = pl.col(FILE).cast(pl.Int64) * KEY + pl.col("rec")
    blank_recs = rows.select(key.alias("key"), "width").filter(blank)["key"].unique().to_list()  # (select, filter)
    hdr = rows.filter(~blank) if blank_recs else rows  # (a filter copies every column)
    inexact = set(range(len(files))) - set(hdr[FILE].unique().to_list())  # no header: tiny or damaged
    if "nxt" in rows.columns:  # squeezed: the next header may be a record that was not kept
        nxt, following = pl.col("nxt"), pl.col("nxt_lineno")
    else:
        nxt, following = per_file(pl.col("offset").shift(-1)), per_file(pl.col("lineno").shift(-1))
    plines = (following - pl.col("lineno") - 1).cast(pl.Int32)  # no blank line between
    has_pay = plines > 0
    hdr = hdr.with_columns(
        pay_start=pl.when(has_pay).then(pl.col("offset") + pl.col("width")),
        pay_end=pl.when(has_pay).then(nxt),
        pay_lines=plines.fill_null(0),
        other_end=pl.when(has_pay).then(nxt),
        bad_utf8=pl.lit(0, pl.Int32),
        # records with blank lines, and the last record (up to the end of the file): measured from the bytes
        exact=key.is_in(blank_recs) | nxt.is_null(),
        nxt=nxt,
    )
    ends = hdr.select(FILE, "rec", "offset", "width", "nxt", "exact", "time", "pid",
                      pos=pl.int_range(pl.len(), dtype=pl.Int64), first=pl.col(FILE).is_first_distinct(),
                      last=pl.col(FILE).is_last_distinct())
    patches: dict[int, list[dict[str, Any]]] = {}
    for row in ends.filter(pl.col("exact") | pl.col("first") | pl.col("last")).iter_rows(named=True):
        f = row[FILE]
        fh, size = files[f]
        try:
            if row["last"]:
                _check_last_header(fh, row, size)
            if row["first"] and row["offset"] > 0:  # rec 0: lines before the first header
                fh.seek(0)
                ps, pe, pn, oe = _measure(fh.read(row["offset"]), 0)
                patches.setdefault(f, []).append({FILE: f, "pos": None, "rec": 0, "pay_start": ps, "pay_end": pe,
                                                  "pay_lines": pn, "other_end": oe})
            if row["exact"]:
                start = row["offset"] + row["width"]
                end = size if row["nxt"] is None else row["nxt"]
                fh.seek(start)
                ps, pe, pn, oe = _measure(fh.read(max(0, end - start)), start)
                patches.setdefault(f, []).append({FILE: f, "pos": row["pos"], "rec": row["rec"], "pay_start": ps,
                                                  "pay_end": pe, "pay_lines": pn, "other_end": oe})
        except Inexact:
            inexact.add(f)
    # patch the measured records in place (a join would copy every column)
    fix = pl.DataFrame([p for f, got in patches.items() if f not in inexact for p in got],
                       schema={FILE: pl.Int32, "pos": pl.Int64, "rec": pl.Int64, "pay_start": pl.Int64,
                               "pay_end": pl.Int64, "pay_lines": pl.Int32, "other_end": pl.Int64})
    lead, fix = fix.filter(pl.col("rec") == 0).drop("pos"), fix.filter(pl.col("rec") > 0)
    at = fix["pos"]
    hdr = hdr.with_columns(hdr[c].scatter(at, fix[c]) for c in ("pay_start", "pay_end", "pay_lines", "other_end"))
    columns = [FILE, *_columns(keep_text)]
    hdr = hdr.select(columns)
    if lead.height:
        hdr = pl.concat([lead, hdr], how="diagonal_relaxed").select(columns)
        hdr = hdr.with_columns(bad_utf8=pl.col("bad_utf8").fill_null(0))
        if multi:
            hdr = hdr.sort(FILE, "rec", maintain_order=True)
    if inexact and multi:
        hdr = hdr.filter(~pl.col(FILE).is_in(sorted(inexact)))
    return hdr, inexact


def index_exact(path: str, keep_text: bool) -> pl.DataFrame:
    """Byte-exact index by a Python scan of the raw bytes (CRLF, invalid UTF-8, \\x01 bytes)."""
    recs: list[dict[str, Any]] = []
    cur: dict[str, Any] = {"rec": 0, "lineno": None, "offset": None, "width": None, "text": None, "pay_start": None,
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
    return pl.concat([extracted, rest], how="diagonal_relaxed").sort("rec").select(
        pl.lit(0, pl.Int32).alias(FILE), *_columns(keep_text))


def header_text(fh: BinaryIO, offset: int, width: int) -> str:
    """The text of the header line at ``offset`` (``width`` bytes with its newline), as the index decoded it."""
    fh.seek(offset)
    raw = fh.read(width)
    line = raw[:-1] if raw.endswith(b"\n") else raw
    if line.endswith(b"\r"):
        line = line[:-1]
    return line.decode("utf-8", errors="replace")


def index_file(path: str, size: int, keep_text: bool, squeeze: Squeeze | None = None) -> tuple[pl.DataFrame, str]:
    """Index ``path`` (``size`` bytes) and say which path was used: ``fast`` or ``exact (<reason>)``. ``squeeze``:
    see :class:`Squeeze` (the fast path only; the exact path keeps every record and leaves it empty)."""
    with open(path, "rb") as fh:
        head = fh.read(65536)
    if b"\r\n" in head:
        return index_exact(path, keep_text), "exact (CRLF line endings)"
    try:
        df = index_fast(path, keep_text, squeeze)
    except pl.exceptions.PolarsError as exc:  # e.g. \x01 on the first line -> SchemaError
        how = f"exact (fast index failed: {type(exc).__name__})"
    except Inexact:
        how = "exact (decoded widths do not match the bytes on disk)"
    else:
        if not df["fffd"].any():
            return df, "fast"
        how = "exact (U+FFFD in a header: invalid UTF-8?)"
    if squeeze is not None:
        squeeze.reset()
    return index_exact(path, keep_text), how
