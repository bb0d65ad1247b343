"""Long captured streams in bounded memory: read in line-aligned chunks, classify each, keep what matters.

A stream longer than :data:`WHOLE_MAX` bytes (a file, a pipe, standard input, or a gzip file once decompressed; gzip
is always decompressed here, on demand) is read :data:`CHUNK` bytes at a time. Each chunk is classified by the
same code as a short stream (:func:`aoti_trace.ingest.text.lines.classify`) and its ``exceptions``, ``device_asserts``,
``faults`` and ``printer`` rows are assembled from it; then only part of it is kept:

* ``lines``: the first :data:`HEAD_LINES` and the last :data:`TAIL_LINES` lines of the stream, and every line that
  matters (every kind but plain text, torch log lines, generated code, printer values and noise; a torch log line
  of level W, E, F or C; any other line that looks like an error, :data:`ERROR_LOOKING`), up to
  :data:`MAX_KEPT_LINES` of those: the first and the last half;
* the assembled frames: all rows, up to :data:`MAX_ROWS` per frame (the first and the last half).

What was not kept is counted, by kind, in one ``damage`` row of kind ``lines_skipped`` per stream, never dropped
silently. Line numbers are those of the whole stream.

Chunks end at a line boundary, preferably just before a line that starts a new block (a ``Traceback`` header or a
glog header) and otherwise between two non-indented lines, so that a traceback is not cut in two. A line longer
than a chunk is split (``damage`` kind ``line_split``).
"""

from __future__ import annotations

import re
import zlib
from collections import deque
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import polars as pl

from aoti_trace.model.frames import Frames, conform
from aoti_trace.ingest.text import lines as L
from aoti_trace.ingest.text.asserts import device_asserts_frame
from aoti_trace.ingest.text.faults import faults_frame
from aoti_trace.ingest.text.printer import printer_frame
from aoti_trace.ingest.text.tracebacks import exceptions_frame

WHOLE_MAX = 64 << 20  # streams up to this many bytes are read whole; every line is kept
CHUNK = 4 << 20  # bytes classified at a time (the peak is ~40 MB per MiB of chunk on traceback-dense text)
CUT_WINDOW = 1 << 20  # the last bytes of a chunk searched for a block start to cut before
HEAD_LINES = 2_000
TAIL_LINES = 2_000
MAX_KEPT_LINES = 100_000  # lines that matter, beyond head and tail: the first and the last half
MAX_ROWS = 2_000  # per assembled frame: the first and the last half
GZIP_MAGIC = b"\x1f\x8b"

# Kinds that are only counted in a long stream (unless error-looking or in the head or tail)
BULK_KINDS = ("plain", "torch_log", "output_code", "printer", "noise")
# A bulk line that says something went wrong (case-insensitive, Rust regex)
ERROR_LOOKING = (
    r"(?i)error|fail|fatal|abort|exception|traceback|killed|kill |sig[a-z]{2,4}(?:\W|$)|signal|segmentation|core dumped"
    r"|cannot|can't|could not|couldn't|unable|not found|no such|denied|out of memory|(?:^|\W)oom(?:\W|$)|undefined|"
    r"unsupported|not supported|invalid|illegal|assert|timed? ?out|timeout|terminat|refused|missing|mismatch|"
    r"overflow|exceed|violat|crash|panic|corrupt|unexpected|no space|nan(?:\W|$)"
)
_BLOCK_START = re.compile(rb"(?:\[?[VIWEFC]\d{3,4} \d\d:\d\d:\d\d|Traceback \(most recent call last\))")
_ASSEMBLED = (
    ("exceptions", exceptions_frame), ("device_asserts", device_asserts_frame), ("faults", faults_frame),
    ("printer", printer_frame),
)


def is_long(path: Path) -> bool:
    """True when ``path`` is read here: a file over :data:`WHOLE_MAX` bytes, or any gzip file (decompressed here
    in bounded memory: a small gzip file can hold gigabytes)."""
    size = path.stat().st_size
    if size > WHOLE_MAX:
        return True
    if size < 2 or not path.is_file():
        return False
    with path.open("rb") as f:
        return f.read(2) == GZIP_MAGIC


def read_long_file(path: Path, stream: str, run_id: str) -> Frames:
    """A long file, or a gzip file of any size: whole when it decompresses to :data:`WHOLE_MAX` bytes or less."""
    from aoti_trace.ingest.text.reader import _damage, read_text_bytes

    with path.open("rb") as raw:
        if raw.read(2) != GZIP_MAGIC:
            raw.seek(0)
            return read_chunked(raw, b"", stream, run_id, str(path))
        raw.seek(0)
        reader = _Gunzip(raw)
        first = reader.read(WHOLE_MAX + 1)
        if len(first) > WHOLE_MAX:
            return read_chunked(reader, first, stream, run_id, str(path))
    frames = read_text_bytes(first, stream, run_id, str(path))
    if reader.error:
        frames.add("damage", pl.DataFrame([_damage(
            run_id, str(path), None, "truncated_payload", 1,
            f"gzip stream is damaged ({reader.error}); analysed the {len(first)} bytes that could be decompressed")]))
    return frames


class _Gunzip:
    """A gzip stream decompressed on demand, at most ``n`` bytes per ``read(n)``; a damaged or truncated stream
    ends early and sets :attr:`error` (what was decompressed before the damage is kept)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw, self.z, self.buf = raw, zlib.decompressobj(16 + zlib.MAX_WBITS), b""
        self.done = False
        self.error: str | None = None

    def read(self, n: int) -> bytes:
        while len(self.buf) < n and not self.done:
            data = self.z.unconsumed_tail or self.raw.read(1 << 20)
            if not data:
                self.done = True
                if not self.z.eof:
                    self.error = "the stream ends before its end marker (truncated)"
                break
            try:
                self.buf += self.z.decompress(data, n - len(self.buf))
            except zlib.error as exc:
                self.done, self.error = True, str(exc)
                break
            if self.z.eof:  # a second gzip member, if any, is not read
                self.done = True
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def read_chunked(f: BinaryIO | _Gunzip, first: bytes, stream: str, run_id: str, path: str) -> Frames:
    """Read ``first`` + the rest of ``f`` chunk by chunk; keep what matters (module docstring)."""
    from aoti_trace.ingest.text.reader import FH_LAST, _damage, clipped_damage, decode

    acc = _Kept()
    lineno = 1
    bad_first: int | None = None
    bad_count = 0
    last_line = ""
    complete = True
    gzip_error: str | None = None
    carry: list[str] = []  # the open block at the end of the previous chunk, read again with this one
    chunks = _chunks(f, first, acc)
    nxt = next(chunks, None)
    while nxt is not None:
        data, split = nxt
        nxt = next(chunks, None)
        if split:
            acc.split_lines += 1
        text, bad_line, bad = decode(data)
        del data
        if bad_line is not None:
            bad_count += bad
            bad_first = bad_first if bad_first is not None else lineno + len(carry) + bad_line - 1
        lines, complete = L.split_lines(text)
        del text
        lines = carry + lines if carry else lines
        if not lines:
            continue
        lines, clipped, first_clipped = L.clip_long_lines(lines)
        if clipped:
            acc.clipped_lines += clipped
            acc.first_clipped = acc.first_clipped or lineno + (first_clipped or 0)
        last_line = lines[-1]
        df = L.classify(lines, stream, run_id, path)
        keep = df.height if nxt is None or split else _open_block(df, lines)
        carry = lines[keep:]
        del lines
        acc.add(df.head(keep) if keep < df.height else df, lineno - 1)
        lineno += keep  # the parts of a split line count as lines
    if carry:  # defensive: a last chunk that held no line
        acc.add(L.classify(carry, stream, run_id, path), lineno - 1)
    gzip_error = acc.gzip_error
    frames = acc.frames(stream)
    damage: list[dict[str, Any]] = []
    if bad_first is not None:
        damage.append(_damage(run_id, path, bad_first, "bad_utf8", bad_count,
                              f"{bad_count} invalid UTF-8 sequence(s), replaced by U+FFFD; first on line {bad_first}"))
    if not complete and not FH_LAST.match(last_line):
        damage.append(_damage(run_id, path, acc.total_lines, "cut_mid_line", 1,
                              f"the last line has no line terminator: the {stream} capture may have been cut "
                              f"mid-line ({len(last_line)} characters: {last_line[:80]!r})"))
    gzip_error = gzip_error or getattr(f, "error", None)
    if gzip_error:
        damage.append(_damage(run_id, path, None, "truncated_payload", 1,
                              f"gzip stream is damaged ({gzip_error}); analysed the text decompressed before it"))
    if acc.split_lines:
        damage.append(_damage(run_id, path, None, "line_split", acc.split_lines,
                              f"{acc.split_lines} line(s) longer than {CHUNK / (1 << 20):g} MiB were split in parts"))
    if acc.clipped_lines:
        damage.append(clipped_damage(run_id, path, acc.first_clipped, acc.clipped_lines))
    damage += acc.skipped(run_id, path, stream)
    if damage:
        frames.add("damage", pl.DataFrame(damage, infer_schema_length=None))
    return frames


# ---------------------------------------------------------------------------------------------- chunking


def _chunks(f: BinaryIO | _Gunzip, first: bytes, acc: _Kept) -> Iterator[tuple[bytes, bool]]:
    """Line-aligned chunks of about :data:`CHUNK` bytes; ``True`` with a chunk that ends inside a line."""
    buf = bytearray(first)
    eof = False
    while True:
        while len(buf) < CHUNK and not eof:
            try:
                more = f.read(CHUNK - len(buf))
            except (OSError, EOFError, zlib.error) as exc:  # a damaged stream: keep what was read
                acc.gzip_error = str(exc)
                more = b""
            if not more:
                eof = True
            else:
                buf += more
        if eof:
            if buf:
                yield bytes(buf), False
            return
        cut = cut_point(buf)
        split = cut is None
        cut = len(buf) if cut is None else cut
        yield bytes(buf[:cut]), split
        del buf[:cut]


def cut_point(buf: bytes | bytearray) -> int | None:
    """Where to end a chunk (the start of the next one): before the latest block start (a glog or ``Traceback``
    header) in the last :data:`CUT_WINDOW` bytes, else before the latest non-indented line that follows a
    non-indented line there, else after the last newline; None when ``buf`` has no newline."""
    n = len(buf)
    last_nl = buf.rfind(b"\n")
    if last_nl < 0:
        return None
    lo = max(0, n - CUT_WINDOW)
    clean = None
    pos = n
    while True:
        nl = buf.rfind(b"\n", lo, pos)
        if nl < 0:
            break
        start = nl + 1
        if start < n:
            if _BLOCK_START.match(buf, start, start + 40):
                return start
            if clean is None and _col0(buf, start):
                prev = buf.rfind(b"\n", 0, nl) + 1
                if prev < nl and _col0(buf, prev):
                    clean = start
        pos = nl
    return clean if clean is not None else last_nl + 1


def _col0(buf: bytes | bytearray, at: int) -> bool:
    """The line starting at ``at`` is not blank and not indented."""
    return buf[at:at + 1] not in (b" ", b"\t", b"\n", b"\r", b"")


def _open_block(df: pl.DataFrame, lines: list[str]) -> int:
    """How many leading rows of a classified chunk are final: all, unless the chunk ends inside a traceback or an
    exception message; then the rows from the last ``Traceback`` header (or the exception line) on are read again
    with the next chunk (when they are less than half a chunk)."""
    last = df.select(pl.col("_in_tb", "_exc", "_exc_owner").last()).row(0)
    if not (last[0] or last[1] or last[2] >= 0):
        return df.height
    heads = df.select(pl.col("_tb_head").arg_true().last()).item()
    start = heads if heads is not None else (last[2] if last[2] >= 0 else None)
    if start is None or start == 0:
        return df.height
    if sum(len(x) + 1 for x in lines[start:]) > CHUNK // 2:
        return df.height
    return int(start)


# ---------------------------------------------------------------------------------------------- keeping


class _Kept:
    """What is kept of the chunks seen so far, and counts of the rest."""

    def __init__(self) -> None:
        self.head: list[pl.DataFrame] = []
        self.head_rows = 0
        self.first: list[pl.DataFrame] = []  # lines that matter, the first half
        self.first_rows = 0
        # lines that matter, the last half: the latest chunks' rows, at most one chunk more than the half (the half
        # itself is cut out at the end: a rolling cut would copy the whole half again with every chunk)
        self.last: deque[pl.DataFrame] = deque()
        self.last_rows = 0
        self.tail: pl.DataFrame | None = None  # the last TAIL_LINES lines (rolling)
        self.total_lines = 0
        self.kinds: dict[str, int] = {}  # every line, by kind
        self.rows: dict[str, list[pl.DataFrame]] = {name: [] for name, _ in _ASSEMBLED}
        self.row_counts: dict[str, int] = {name: 0 for name, _ in _ASSEMBLED}
        self.row_last: dict[str, pl.DataFrame | None] = {name: None for name, _ in _ASSEMBLED}
        self.split_lines = 0
        self.clipped_lines = 0
        self.first_clipped: int | None = None
        self.gzip_error: str | None = None

    def add(self, df: pl.DataFrame, offset: int) -> None:
        """Take one classified chunk whose first line is line ``offset + 1`` of the stream."""
        if offset:
            df = df.with_columns(
                pl.col("_i").cast(pl.Int64) + offset,
                pl.col("lineno") + offset,
                pl.when(pl.col("_exc_owner") >= 0).then(pl.col("_exc_owner") + offset).otherwise(-1)
                .alias("_exc_owner"),
            )
        self.total_lines += df.height
        for kind, n in df.group_by("kind").len().iter_rows():
            self.kinds[kind] = self.kinds.get(kind, 0) + n
        for name, build in _ASSEMBLED:
            self._add_rows(name, _compact(build(df)))
        public = L.public(df)
        del df
        if self.head_rows < HEAD_LINES:
            part = _compact(public.head(HEAD_LINES - self.head_rows))
            self.head.append(part)
            self.head_rows += part.height
        tail = _compact(public.tail(TAIL_LINES))
        self.tail = tail if self.tail is None else pl.concat([self.tail, tail]).tail(TAIL_LINES).rechunk()
        matters = public.filter(
            ~pl.col("kind").is_in(BULK_KINDS)
            | pl.col("level").is_in(("W", "E", "F", "C")).fill_null(False)
            | (pl.col("kind").is_in(("plain", "torch_log")) & pl.col("text").str.contains(ERROR_LOOKING))
        )
        matters = _compact(matters)
        half = MAX_KEPT_LINES // 2
        if self.first_rows < half:
            part = matters.head(half - self.first_rows)
            self.first.append(part)
            self.first_rows += part.height
            matters = matters.slice(part.height)
        if matters.height:
            self.last.append(matters)
            self.last_rows += matters.height
            while self.last_rows - self.last[0].height >= half:
                self.last_rows -= self.last.popleft().height

    def _add_rows(self, name: str, df: pl.DataFrame) -> None:
        if df.height == 0:
            return
        half = MAX_ROWS // 2
        kept = sum(d.height for d in self.rows[name])
        self.row_counts[name] += df.height
        if kept < half:
            part = df.head(half - kept)
            self.rows[name].append(part)
            df = df.slice(part.height)
        if df.height:
            last = self.row_last[name]
            self.row_last[name] = df.tail(half) if last is None else _compact(pl.concat([last, df]).tail(half))

    def lines(self) -> pl.DataFrame:
        last = pl.concat(self.last).tail(MAX_KEPT_LINES // 2) if self.last else None
        parts = [*self.head, *self.first, *(d for d in (last, self.tail) if d is not None)]
        if not parts:
            return L.public(L.classify([], "stderr", "", ""))
        return pl.concat(parts).unique("lineno", keep="first").sort("lineno")

    def frames(self, stream: str) -> Frames:
        out = Frames()
        self.kept = self.lines()
        out.add("lines", self.kept)
        for name, _ in _ASSEMBLED:
            parts = [*self.rows[name], *([self.row_last[name]] if self.row_last[name] is not None else [])]
            if parts:
                # mypy does not narrow the row_last[name] item above: parts holds DataFrames only
                out.add(name, conform(name, pl.concat(parts, how="diagonal_relaxed")))  # type: ignore[type-var, arg-type]
        return out

    def skipped(self, run_id: str, path: str, stream: str) -> list[dict[str, Any]]:
        """The ``lines_skipped`` damage row (none when everything was kept)."""
        kept = self.kept
        n_skipped = self.total_lines - kept.height
        dropped_rows = {name: n - sum(d.height for d in self.rows[name]) - (
            self.row_last[name].height if self.row_last[name] is not None else 0)  # type: ignore[union-attr]  # narrowed
            for name, n in self.row_counts.items()}
        if n_skipped <= 0 and not any(dropped_rows.values()):
            return []
        kept_kinds = dict(kept.group_by("kind").len().iter_rows())
        by_kind = sorted(((k, n - kept_kinds.get(k, 0)) for k, n in self.kinds.items()), key=lambda kv: -kv[1])
        first_gap = _first_gap(kept.get_column("lineno"), self.total_lines)
        detail = (
            f"{stream} has {self.total_lines} lines, read in chunks; {n_skipped} were not kept "
            f"({', '.join(f'{k} {n}' for k, n in by_kind if n > 0) or 'none'}). Kept: the first {HEAD_LINES} and "
            f"last {TAIL_LINES} lines and every line that looks like a failure signal (tracebacks, exceptions, "
            f"C++ errors, warnings, error-looking text; at most the first and last {MAX_KEPT_LINES // 2})"
        )
        extra = [f"{name} {n} of {self.row_counts[name]}" for name, n in dropped_rows.items() if n > 0]
        if extra:
            detail += f"; rows not kept (only the first and last {MAX_ROWS // 2}): " + ", ".join(extra)
        return [{"run_id": run_id, "path": path, "lineno": first_gap, "kind": "lines_skipped",
                 "count": n_skipped, "detail": detail}]


def _compact(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with its strings copied into buffers of their own. A slice or filter of a string column is a set of
    views into the buffers of the whole column it came from (a chunk's text), which would stay alive with it."""
    strings = [pl.concat_str([pl.col(c), pl.lit("")]).alias(c) for c, t in df.schema.items() if t == pl.String]
    return df.with_columns(strings).rechunk() if strings else df


def _first_gap(kept: pl.Series, total: int) -> int | None:
    """The first line number in 1..total that is not in ``kept`` (sorted, unique)."""
    if kept.len() == 0:
        return 1 if total else None
    gaps = (kept - pl.int_range(1, kept.len() + 1, eager=True)).cast(pl.Int64)
    idx = (gaps > 0).arg_true()
    if idx.len():
        return int(idx[0]) + 1
    return kept.len() + 1 if kept.len() < total else None
