"""Read TORCH_TRACE logs into the frames ``events``, ``compiles``, ``artifacts``, ``stacks`` and ``damage``.

Public API::

    read_trace(files: list[Path], run_id: str, *, verify: bool | None = None) -> Frames
    read_groups(groups: list[list[tuple[Path, str]]], *, verify=None) -> list[Frames]  # many runs' files at once
    read_payload(path: str | Path, offset: int, length: int) -> str
    read_payloads(path: str | Path, ranges: list[tuple[int, int]]) -> list[str]   # several, in one pass
    payload_text(row: dict) -> str                      # a row of `events` / `artifacts` (needs path + payload_*)
    payload_md5_ok(path, offset, length, md5) -> bool    # full check of one payload

How a file is read (see trace-format.md §11 and :mod:`aoti_trace.ingest.trace.index`):

* The file is indexed once, by a Polars query (streaming for a file read alone; see below) (or a byte-exact Python scanner for CRLF, invalid UTF-8
  and ``\\x01`` bytes). Only small header columns are kept (no header text: a 64-bit hash stands for the stack);
  payloads stay on disk as ``(payload_offset, payload_length)`` and are read on demand with :func:`read_payload`,
  which strips exactly one leading TAB per line. The header lines that are JSON-decoded are re-read by byte range.
* Every file's frames are those it has when read alone. Files up to ``SMALL_FILE`` bytes are read into memory and
  those read in one call are indexed by one query and built by one pass over all of them (a ``file`` column keys
  what is per file: damage, sessions, ``str`` tables), so that Polars' fixed cost per operation is paid per batch
  (:func:`read_groups`); larger files are indexed by a streaming query and built alone.
* ``.log.gz`` files are decompressed (streaming, bounded: :mod:`aoti_trace.ingest.files`) to a temporary file that
  is indexed and then deleted; a corrupt or truncated stream keeps what decompressed before the damage
  (``bad_gzip``), and so does one that inflates past the size or ratio limit (a gzip bomb). Payload offsets refer
  to the decompressed stream and :func:`read_payload` re-reads the ``.gz`` (a gzip seek is a decompression from
  the start: fine for the few payloads a rule reads).
* A file over ``SQUEEZE_BYTES`` (64 MiB) is indexed in bounded memory: its plain ``chromium_event`` records
  (timeline spans without a compile id or stack, ~85% of the records of a log that repeats its compiles) beyond the
  first and last 4096 are counted, not kept (:class:`index.Squeeze`; damage ``records_skipped``), and so are,
  unless every payload is verified, the compile sessions that finished ok in the middle of the file
  (:class:`_SessionSqueeze`: their ``str`` records and the first record of each stack stay; the first session,
  the failed, incomplete and damaged ones and the last ones are kept whole; ``compiles`` has no row for the others).
  Session numbers, ``stacks`` (``records`` included) and the damage are those of the whole file.
* Only the JSON of ``str`` and ``compilation_metrics`` headers and of the distinct ``stack`` lists is decoded
  (tolerantly; one stack text per distinct hash, one ``inductor_config`` decode per distinct config string);
  every other field comes from anchored regexes over the header line. Context keys (``rank``, compile ids,
  ``has_payload``) are matched at the end of the line, i.e. the last occurrence wins.
* ``md5_ok``: payload MD5 against ``has_payload``. Checking every payload costs a second read of the payload bytes
  (see bench/RESULTS.md), so with ``verify=None`` (default) files up to ``THOROUGH_LIMIT`` bytes are checked fully
  (every payload MD5 and every header's JSON); larger files get only the cheap checks: the last payload of the
  file (where a killed process leaves a truncated one) is verified, the others have ``md5_ok = null`` and can be
  checked later with :func:`payload_md5_ok`. ``verify=True`` / ``False`` forces either mode.

Compile sessions (``session``, 0-based per file): AOTI records carry no compile id, so a session is derived: it
ends with a ``compilation_metrics`` record (the chromium events of the same compile id that directly follow it
stay in it), and a new one starts at a second ``torch_version`` artifact or when the user call seen in the record
stacks goes back in the export -> compile order (a new ``export`` call, or a second compile call from another
line). Each session with real records gives one ``compiles`` row; one without ``compilation_metrics`` is
``incomplete`` (the process died or gave up mid-compile; for ``kind = export`` it just means no compile followed).

Damage (never an exception): ``unreadable``, ``not_regular_file`` (a FIFO or device: never opened),
``empty_file``, ``bad_gzip``, ``truncated_line`` (last line cut),
``truncated_payload`` (last payload short), ``md5_mismatch``, ``bad_json``, ``bad_header`` (a line that is
neither a record header nor a payload line), ``bad_utf8``, ``unknown_event``, ``schema_drift``,
``orphan_payload`` (TAB lines after a header without ``has_payload``), ``incomplete_compile``, ``records_skipped``
(not damage of the file: what a long file's frames leave out).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Iterable

import polars as pl

from aoti_trace.model.frames import Frames, conform, schema
from aoti_trace.ingest import files, safe_json
from aoti_trace.ingest.trace import index, meta
from aoti_trace.ingest.trace.index import CATEGORICAL, FILE, KEY, STACK_SEP, header_text

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

THOROUGH_LIMIT = 64 * 1024 * 1024  # bytes: full MD5 + JSON checks below this file size when verify=None
SQUEEZE_BYTES = 64 << 20  # bytes: a longer file keeps only the first and last of its plain chromium_event records
RANK_FILE_RE = re.compile(r"rank_(\d+)_")


# ----------------------------------------------------------------------------------------------- payloads
def _strip_tabs(block: bytes) -> bytes:
    """Payload bytes on disk -> payload: drop the final newline and one leading TAB per line (CRLF tolerated)."""
    if block.endswith(b"\r\n") and block.count(b"\r\n") == block.count(b"\n"):
        block = block.replace(b"\r\n", b"\n")
    if block.endswith(b"\n"):
        block = block[:-1]
    if block.startswith(b"\t"):
        block = block[1:]
    return block.replace(b"\n\t", b"\n")


def _read_block(path: Path, offset: int, length: int) -> bytes:
    """Bytes of a payload as stored; fewer (or none) when the file has changed, shrunk or is damaged since it was
    indexed. A ``.gz`` is decompressed from its start (bounded, damage-tolerant: :mod:`aoti_trace.ingest.files`)."""
    try:
        with open(path, "rb") as fh:
            if path.name.endswith(".gz") or fh.read(2) == files.GZIP_MAGIC:  # as _read_file decides
                fh.seek(0)
                return files.read_range(fh, offset, length)
            fh.seek(offset)
            return fh.read(length)
    except OSError:
        return b""


def read_payloads(path: str | Path, ranges: list[tuple[int, int]]) -> list[str]:
    """Payload texts of several ``(payload_offset, payload_length)`` ranges of one trace file, in one pass (a
    ``.gz`` is decompressed once, front to back, bounded and damage-tolerant). A range past the end of what can
    be read gives what there is (possibly ``""``)."""
    path = Path(path)
    blocks = [b""] * len(ranges)
    try:
        with open(path, "rb") as fh:
            if path.name.endswith(".gz") or fh.read(2) == files.GZIP_MAGIC:
                fh.seek(0)
                _gather(files.Inflater(fh), ranges, blocks)
            else:
                for i, (offset, length) in enumerate(ranges):
                    fh.seek(offset)
                    blocks[i] = fh.read(length)
    except OSError:
        pass  # the file changed or vanished since it was indexed: what was read counts
    return [_strip_tabs(b).decode("utf-8", errors="replace") for b in blocks]


def _gather(chunks: Iterable[bytes], ranges: list[tuple[int, int]], blocks: list[bytes]) -> None:
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    parts: dict[int, list[bytes]] = {i: [] for i in order}
    pos, first = 0, 0
    for chunk in chunks:
        end = pos + len(chunk)
        i = first
        while i < len(order) and ranges[order[i]][0] < end:
            offset, length = ranges[order[i]]
            lo, hi = max(offset, pos), min(offset + length, end)
            if hi > lo:
                parts[order[i]].append(chunk[lo - pos:hi - pos])
            i += 1
        while first < len(order) and sum(ranges[order[first]]) <= end:
            first += 1
        pos = end
        if first == len(order):
            break
    for i, got in parts.items():
        blocks[i] = b"".join(got)


def read_payload(path: str | Path, offset: int, length: int) -> str:
    """The payload text of a record (``payload_offset``, ``payload_length`` of ``events``/``artifacts``)."""
    return _strip_tabs(_read_block(Path(path), offset, length)).decode("utf-8", errors="replace")


def payload_text(row: dict[str, Any]) -> str | None:
    """Payload text of a frame row (a dict with ``path``, ``payload_offset``, ``payload_length``), or None."""
    if row.get("payload_offset") is None or row.get("payload_length") is None:
        return None
    return read_payload(row["path"], row["payload_offset"], row["payload_length"])


def payload_md5_ok(path: str | Path, offset: int | None, length: int | None, md5: str) -> bool:
    """Full MD5 check of one payload against ``has_payload``."""
    if offset is None or length is None:
        return False
    return hashlib.md5(_strip_tabs(_read_block(Path(path), offset, length))).hexdigest() == md5


# ----------------------------------------------------------------------------------------------- reading
# Files up to SMALL_FILE bytes (decompressed) are read together (read_groups), at most BATCH_BYTES of them per
# batch. Reading a file alone costs ~70 Polars operations (~25 CPU-ms under load) plus ~50 CPU-ms per MB; over
# 1 MiB that fixed cost is under a third of the file's and shrinking, while a batch holds its files' text in memory
# (the bytes, the joined bytes and the decoded lines: ~3-4x BATCH_BYTES at its peak). bench/RESULTS.md section 000.
SMALL_FILE = 1 << 20
BATCH_BYTES = 16 << 20


def read_trace(files: list[Path], run_id: str, *, verify: bool | None = None) -> Frames:
    """Frames ``events``, ``compiles``, ``artifacts``, ``stacks``, ``damage`` of the trace ``files`` of one run:
    the frames of each file as if it were read alone, concatenated in order (:func:`read_groups`)."""
    return read_groups([[(Path(path), run_id) for path in files]], verify=verify)[0]


def read_groups(groups: list[list[tuple[Path, str]]], *, verify: bool | None = None) -> list[Frames]:
    """The trace frames of each group of ``(file, run_id)``, in order: each file's frames are those it has when read
    alone, and a group's frames are its files' concatenated in order (:class:`Frames` appends).

    How: each file's frames are built from its index (:mod:`aoti_trace.ingest.trace.index`) by :func:`_build`.
    A file over :data:`SMALL_FILE` bytes is indexed alone (a streaming query, bounded memory) and built alone.
    Smaller files are read into memory and the consecutive ones (across groups, up to :data:`BATCH_BYTES`) are
    indexed by one query (:func:`index.index_batch`) and built by one :func:`_build` over all of them (column
    ``file``), so that Polars' fixed cost per operation (~0.1-0.5 ms, ~70 operations) is paid per batch and not
    per file (bench/RESULTS.md). A file the batch query cannot index as it would alone (not :func:`index.clean`,
    no record header, offsets that drift) is indexed alone and built with the batch."""
    items: list[_File] = []
    bounds = [0]
    parts: list[dict[str, pl.DataFrame]] = []
    batch: list[_File] = []
    waiting = 0  # bytes in batch
    try:
        for group in groups:
            for path, run_id in group:
                f = _open(Path(path), run_id, verify, len(items))
                items.append(f)
                if f.fh is None:  # damage only
                    f.close()
                    continue
                if f.data is None:  # large
                    parts.extend(_flush(batch))
                    parts.append(_read_together([f]))
                    f.close()
                    continue
                if batch and (waiting + f.size > BATCH_BYTES or f.thorough != batch[0].thorough):
                    parts.extend(_flush(batch))
                    waiting = 0
                batch.append(f)
                waiting += f.size
            bounds.append(len(items))
        parts.extend(_flush(batch))
    finally:  # (after an error; each file is closed once read)
        for f in items:
            f.close()
    return _split(parts, items, bounds)


def _flush(batch: list[_File]) -> list[dict[str, pl.DataFrame]]:
    """The frames of the small files waiting in ``batch`` (then closed, and ``batch`` emptied), if any."""
    out = [_read_together(batch)] if batch else []
    for f in batch:
        f.close()
    batch.clear()
    return out


def _split(parts: list[dict[str, pl.DataFrame]], items: list[_File], bounds: list[int]) -> list[Frames]:
    """One :class:`Frames` per group (files ``bounds[g]:bounds[g + 1]`` of ``items``) from the frames of all files
    (column ``file``: position in ``items``, ascending). A group has the frames that reading its files one by one
    gives: ``events``, ``artifacts`` and ``stacks`` when one of its files has a record, ``compiles`` when it has
    rows, ``damage`` when it has a file."""
    names: dict[str, list[pl.DataFrame]] = {}
    for part in parts:
        for name, df in part.items():
            names.setdefault(name, []).append(df)
    damage = [{"run_id": f.run_id, "path": f.shown, "lineno": lineno, "kind": kind, "count": count,
               "detail": detail, FILE: f.at} for f in items for kind, (count, lineno, detail) in f.problems.rows.items()]
    names["damage"] = [pl.DataFrame(damage, schema={**schema("damage"), FILE: pl.Int32})]
    whole = {name: dfs[0] if len(dfs) == 1 else pl.concat(dfs, how="diagonal_relaxed") for name, dfs in names.items()}
    at = pl.Series(bounds, dtype=pl.Int32)
    cuts = {name: df[FILE].search_sorted(at, side="left").to_list() for name, df in whole.items()}
    out = []
    for g in range(len(bounds) - 1):
        lo, hi = bounds[g], bounds[g + 1]
        built = any(f.built for f in items[lo:hi])
        tables = {}
        for name, df in whole.items():
            rows = df.slice(cuts[name][g], cuts[name][g + 1] - cuts[name][g])
            if name in ("events", "artifacts", "stacks") and not built or name == "compiles" and not rows.height \
                    or name == "damage" and lo == hi:
                continue
            tables[name] = conform(name, rows.drop(FILE))
        out.append(Frames(tables))
    return out


@dataclass
class _File:
    """One trace file being read: its opened bytes, what its frames need besides its index, its damage."""

    at: int  # position among the files read together (column ``file`` of the frames)
    shown: str
    run_id: str
    problems: meta.Problems = field(default_factory=meta.Problems)
    fh: BinaryIO | None = None  # the file to index (its bytes, for a small file); None: not indexed (damage)
    local: str = ""  # its path (a temporary file for a .gz)
    tmp: str | None = None  # that temporary file
    data: bytes | None = None  # the bytes of a small file
    size: int = 0
    thorough: bool = True
    ends_with_newline: bool = True
    rank: int | None = None  # from the file name
    built: bool = False  # has records: events, artifacts and stacks were built for it
    # a long file whose sessions were squeezed (_SessionSqueeze): every session start (line numbers), the sessions
    # of which some records were kept (str records, first records of a stack), records left out per stack hash
    session_starts: list[int] | None = None
    partial_sessions: set[int] = field(default_factory=set)
    stack_dropped: dict[int, int] = field(default_factory=dict)

    def close(self) -> None:
        """Close the file, drop its bytes and delete its temporary file (again: nothing)."""
        if self.fh is not None:
            self.fh.close()
        self.fh = self.data = None
        if self.tmp:
            os.unlink(self.tmp)
            self.tmp = None


def _open(path: Path, run_id: str, verify: bool | None, at: int) -> _File:
    """Open ``path`` for indexing (``fh`` set), or record why it is not indexed (damage, ``fh`` None). A small file
    is read into memory and closed; a ``.gz`` is decompressed to a temporary file first."""
    shown = str(path)
    f = _File(at, shown, run_id)
    problems = f.problems
    try:
        st = os.stat(path)
    except OSError as exc:
        problems.add("unreadable", None, f"cannot read {shown}: {exc.strerror or exc}")
        return f
    special = files.special_file(st)
    if special is not None:
        problems.add("not_regular_file", None, f"{shown} is {special}, not a file: not read")
        return f
    try:
        fh = open(path, "rb")  # noqa: SIM115 (closed below; opened first so that an unreadable file is damage)
    except OSError as exc:
        problems.add("unreadable", None, f"cannot read {shown}: {exc.strerror or exc}")
        return f
    with fh:
        try:
            gz = path.name.endswith(".gz") or fh.read(2) == files.GZIP_MAGIC  # also a gzip named .log
            fh.seek(0)
            if gz:
                f.tmp = _inflate_to_temp(fh, shown, problems)
        except OSError as exc:
            problems.add("unreadable", None, f"cannot read {shown}: {exc.strerror or exc}")
            return f
        f.local, f.size = (f.tmp, os.path.getsize(f.tmp)) if f.tmp else (str(path), os.fstat(fh.fileno()).st_size)
    if f.size == 0:
        problems.add("empty_file", None, f"{shown} is empty (the process wrote no record)")
        return f
    f.thorough = verify if verify is not None else f.size <= THOROUGH_LIMIT
    try:
        opened: BinaryIO = open(f.local, "rb")  # noqa: SIM115 (closed by _File.close)
    except OSError as exc:
        problems.add("unreadable", None, f"cannot read {shown}: {exc.strerror or exc}")
        return f
    try:
        packed = files.compressed(opened.read(4))
        if packed:  # the indexer's CSV reader would decompress it by its magic bytes (and fail on damage)
            problems.add("bad_header", 1, f"{shown} holds {packed}-compressed data"
                         f"{' inside its gzip stream' if gz else ''}, not TORCH_TRACE text: not indexed")
            opened.close()
            return f
        opened.seek(max(0, f.size - 1))
        f.ends_with_newline = opened.read(1) == b"\n"
        opened.seek(0)
        if f.size <= SMALL_FILE:
            f.data = opened.read(f.size)
            opened.close()
            opened = io.BytesIO(f.data)
    except BaseException:
        opened.close()
        raise
    file_rank = RANK_FILE_RE.search(path.name)
    f.rank = int(file_rank[1]) if file_rank else None
    f.fh = opened
    return f


def _read_together(batch: list[_File]) -> dict[str, pl.DataFrame]:
    """Index and build the files of ``batch`` (one large file, or small files with their bytes in memory); column
    ``file`` of the frames: each file's :attr:`_File.at`."""
    thorough = batch[0].thorough
    parts: list[pl.DataFrame] = []
    alone = set(range(len(batch)))
    clean = [i for i, f in enumerate(batch) if f.data is not None and index.clean(f.data)]
    if len(clean) > 1:
        try:
            idx, inexact = index.index_batch([batch[i].data or b"" for i in clean], keep_text=thorough)
        except (index.Inexact, pl.exceptions.PolarsError):
            pass  # each file alone, below
        else:
            parts.append(idx.with_columns(_of_file(clean, pl.Int32).alias(FILE)))  # position in clean -> in batch
            alone -= {i for j, i in enumerate(clean) if j not in inexact}
    parts += [_index_alone(batch[i], thorough).with_columns(pl.lit(i, pl.Int32).alias(FILE)) for i in sorted(alone)]
    idx = parts[0] if len(parts) == 1 else pl.concat(parts, how="vertical").sort(FILE, maintain_order=True)
    del parts
    at = _of_file([f.at for f in batch], pl.Int32).alias(FILE)
    return {name: df.with_columns(at) for name, df in _build(idx, batch, thorough).items()}


def _index_alone(f: _File, thorough: bool) -> pl.DataFrame:
    """The index of one file read alone; over :data:`SQUEEZE_BYTES`, without the repeated ``chromium_event``
    records (:class:`index.Squeeze`) and, unless ``thorough``, without the sessions that finished ok in the middle
    of the file (:class:`_SessionSqueeze`), which are counted in the file's damage (``records_skipped``)."""
    squeeze: index.Squeeze | None = None
    if f.size > SQUEEZE_BYTES:
        squeeze = index.Squeeze() if thorough else _SessionSqueeze(f)
    idx = index.index_file(f.local, f.size, keep_text=thorough, squeeze=squeeze)[0]
    if squeeze is None:
        return idx
    said = []
    if squeeze.skipped:
        said.append(f"{squeeze.skipped} of its {squeeze.total} plain chromium_event records (timeline spans without "
                    f"compile id or stack, lines {squeeze.first}-{squeeze.last}) were counted, not kept; the first "
                    f"and last {squeeze.keep} were kept" + (" (but for those of the sessions left out below)"
                                                           if isinstance(squeeze, _SessionSqueeze)
                                                           and squeeze.finished and squeeze.sessions_skipped
                                                           else ""))
    count, first = squeeze.skipped, squeeze.first
    if isinstance(squeeze, _SessionSqueeze) and squeeze.finished:
        f.session_starts, f.partial_sessions, f.stack_dropped = (squeeze.machine.starts, squeeze.partial,
                                                                 squeeze.stack_dropped)
        count += squeeze.session_records
        first = min((x for x in (first, squeeze.session_first) if x is not None), default=None)
        if squeeze.sessions_skipped:
            said.append(f"{squeeze.session_records} records of {squeeze.sessions_skipped} compile sessions that "
                        f"finished ok in the middle of the file (lines {squeeze.session_first}-"
                        f"{squeeze.session_last}) were counted, not kept, but for their str records and the first "
                        f"record of each stack (compiles has no row for them)")
    if said:
        f.problems.add("records_skipped", first, (
            f"the file is over {SQUEEZE_BYTES >> 20} MiB: " + "; ".join(said) + "; every other record was kept "
            "(events, artifacts and chromium lack the skipped ones)"), count)
    return idx


COMPACT_ROWS = 1 << 15  # kept index rows between two session passes of a squeezed scan


class _SessionSqueeze(index.Squeeze):
    """:class:`index.Squeeze` that also leaves out the compile sessions that finished ok in the middle of a long
    file: every :data:`COMPACT_ROWS` kept rows, the rows seen so far are cut into sessions (:class:`_SessionMachine`,
    with the ``str`` table and the stacks decoded so far), and each session that has ended, is not the file's
    first, closed with a complete ``compilation_metrics`` record that decodes without a failure or a problem, and
    has no record that would be damage (no event, an unknown event, cut JSON, U+FFFD, payload lines without
    ``has_payload``, a blank line, a stack that does not decode), is counted, not kept: its ``str`` records and the
    first record of each stack not seen before stay (the ``str`` table and ``stacks`` stay those of the whole file;
    the uses of each stack are counted in :attr:`stack_dropped`). Failed, incomplete and damaged sessions, the first
    one and those after the last pass are kept whole. The session starts of the whole file (:attr:`machine`) number
    the kept records as in the whole file. A stack naming an interned string not (or differently) defined before it
    stops the squeezing of sessions (:attr:`broken`): what is kept is then every later record."""

    def __init__(self, f: _File) -> None:
        self.file = f
        self.compact_rows = COMPACT_ROWS
        super().__init__()

    def reset(self) -> None:
        super().reset()
        self.settled: list[pl.DataFrame] = []  # rows of ended sessions that stay
        self.machine = _SessionMachine()
        self.fed = 0  # the rows up to this line were fed to the machine
        self.strings: dict[int, str] = {}
        self.stack_of: dict[tuple[int, int], tuple[Any, ...]] = {}
        self.bad_stacks: set[int] = set()
        self.decoded: set[int] = set()  # stack hashes decoded (in stack_of or bad_stacks)
        self.seen_stacks: set[int] = set()
        self.stack_dropped: dict[int, int] = {}
        self.partial: set[int] = set()
        self.sessions_skipped = self.session_records = 0
        self.session_first: int | None = None
        self.session_last: int | None = None
        self.broken = self.finished = False

    def _texts(self, rows: pl.DataFrame) -> list[str]:
        fh = self.file.fh
        assert fh is not None
        return [header_text(fh, off, width) for off, width in rows.select("at", "width").iter_rows()]

    def _feed(self, rows: pl.DataFrame) -> None:
        """Learn the str records and stacks of ``rows`` (column ``at``: file offsets) and feed them to the machine."""
        strs = rows.filter(pl.col("event") == "str")
        for lineno, text in zip(strs["lineno"], self._texts(strs)):
            got = meta.parse_str_record(text, lineno, meta.Problems())
            if got:
                if self.strings.get(got[0], got[1]) != got[1]:
                    self.broken = True  # redefined: the whole file's table would say otherwise
                self.strings[got[0]] = got[1]
        new = rows.filter(pl.col("stack_hash").is_not_null()).unique("stack_hash", keep="first", maintain_order=True)
        new = new.filter(~pl.col("stack_hash").is_in(list(self.decoded)))
        for key, lineno, event, text in zip(new["stack_hash"], new["lineno"], new["event"], self._texts(new)):
            self.decoded.add(key)
            raw = meta.parse_stack(text.split(STACK_SEP, 1)[1])
            if raw is None:
                self.bad_stacks.add(key)
                continue
            problems = meta.Problems()
            frames = meta.resolve_stack(raw, self.strings, lineno, problems)
            self.broken |= bool(problems.rows)
            self.stack_of[0, key] = (frames, *meta.user_call(frames, event))
        self.machine.feed(rows, self.stack_of)
        self.fed = max(self.fed, int(rows["lineno"].max()))  # type: ignore[arg-type]  # Int64 column: an int

    # the columns a session pass reads (the others are only carried along)
    NARROW = (FILE, "lineno", "local", "width", "event", "name", "stack_hash", "ca", "fid", "fcid", "att",
              "looks_complete", "fffd", "md5", "nxt_lineno")

    def _undecided(self) -> pl.DataFrame | None:
        """The :data:`NARROW` columns of the rows not decided yet, with their file offsets (``at``), the unfed ones
        fed; None: not yet (the scan has not tiled the file up to them)."""
        narrow = [p.select(self.NARROW) for p in self.kept]
        rows = pl.concat(narrow, how="vertical") if len(narrow) > 1 else narrow[0]
        at = self.morsels.offsets(rows, prefix=True) if self.morsels is not None else None
        if at is None:
            return None
        rows = rows.with_columns(at.alias("at"))
        self._feed(rows.filter(pl.col("lineno") > self.fed))
        return rows

    def compact(self) -> None:
        if not self.kept:
            return
        rows = self._undecided()
        if rows is None:
            return
        parts, self.kept = self.kept, []
        if self.broken:
            self.settled.extend(parts)
            return
        starts = self.machine.starts
        session = pl.Series(starts, dtype=pl.Int64).search_sorted(rows["lineno"], side="right").cast(pl.Int32)
        rows = rows.with_columns(session=session)
        ended = session < len(starts)
        gone = self._ok_sessions(rows.filter(ended))
        drop = pl.repeat(False, rows.height, eager=True)
        if gone:
            out = pl.col("session").is_in(gone)
            # a str record, or the first record of a stack in the file: kept
            anchor = (pl.col("event") == "str") | (
                pl.col("stack_hash").is_not_null() & pl.col("stack_hash").is_first_distinct()
                & ~pl.col("stack_hash").is_in(list(self.seen_stacks)))
            flags = rows.select((out & ~anchor).fill_null(False).alias("drop"),
                                (out & anchor).fill_null(False).alias("anchor"))
            drop = flags["drop"]
            dropped = rows.filter(drop)
            self.session_records += dropped.height
            self.sessions_skipped += len(gone)
            if dropped.height:
                lo, hi = dropped["lineno"].min(), dropped["lineno"].max()
                self.session_first = lo if self.session_first is None else self.session_first  # type: ignore[assignment]
                self.session_last = hi  # type: ignore[assignment]  # Int64 column: an int
            self.partial.update(rows.filter(flags["anchor"])["session"].unique().to_list())
            for key, n in dropped.group_by("stack_hash").len().drop_nulls().iter_rows():
                self.stack_dropped[key] = self.stack_dropped.get(key, 0) + n
        self.seen_stacks.update(rows.filter(ended)["stack_hash"].drop_nulls().unique().to_list())
        # the parts themselves are filtered only where a row leaves or stays undecided
        pos = 0
        for part in parts:
            e, d = ended.slice(pos, part.height), drop.slice(pos, part.height)
            pos += part.height
            if not e.any():
                self.kept.append(part)
            elif e.all() and not d.any():
                self.settled.append(part)
            else:
                # (copied: a filtered string column keeps the whole buffers of the rows left out alive)
                self.settled.append(part.filter(e & ~d).with_columns(pl.col("time", "md5").str.to_lowercase()))
                if not e.all():
                    self.kept.append(part.filter(~e))

    def _ok_sessions(self, ended: pl.DataFrame) -> list[int]:
        """The ended sessions in ``ended`` that may be left out."""
        ev, cm = pl.col("event"), pl.col("event") == "compilation_metrics"
        orphan = (pl.col("md5").is_null() & (pl.col("nxt_lineno") - pl.col("lineno") > 1)).fill_null(True)
        bad_stack = pl.col("stack_hash").is_in(list(self.bad_stacks)).fill_null(False)
        clean = (ev.is_not_null() & ev.is_in(list(meta.KNOWN_EVENTS)) & pl.col("looks_complete") & ~pl.col("fffd")
                 & ~orphan & ~bad_stack).fill_null(False)
        per = ended.group_by("session").agg(
            clean=clean.all(), cm_lineno=pl.col("lineno").filter(cm).last(), at=pl.col("at").filter(cm).last(),
            width=pl.col("width").filter(cm).last(),
        ).filter(pl.col("clean") & (pl.col("session") > 0) & pl.col("cm_lineno").is_not_null()).sort("session")
        out = []
        for session, lineno, text in zip(per["session"], per["cm_lineno"], self._texts(per)):
            problems = meta.Problems()
            got = meta.decode_metrics(text, lineno, problems)
            if got is not None and not problems.rows and not got.get("fail_type") and not got.get("fail_reason"):
                out.append(session)
        return out

    def settle(self) -> list[pl.DataFrame]:
        if self.kept and self._undecided() is None:
            return self.settled + self.kept  # (no offsets: the scan starts again unsqueezed)
        self.finished = True
        return self.settled + self.kept


def _of_file(values: list[Any], dtype: PolarsDataType) -> pl.Expr:
    """``values[file]`` of each row (a literal when there is one file)."""
    if len(values) == 1:
        return pl.lit(values[0], dtype)
    return pl.lit(pl.Series(values, dtype=dtype)).gather(pl.col(FILE))


def _inflate_to_temp(src: BinaryIO, shown: str, problems: meta.Problems) -> str:
    """Decompress an opened ``.gz`` to a temporary file (bounded; whatever decompresses before damage is kept).
    Returns its path; the caller deletes it. The temporary file never outlives an error."""
    fd, tmp = tempfile.mkstemp(prefix="aoti_trace_", suffix=".log")
    try:
        with os.fdopen(fd, "wb") as out:
            inflater = files.Inflater(src)
            for chunk in inflater:
                out.write(chunk)
    except BaseException:
        os.unlink(tmp)
        raise
    if inflater.problem:
        problems.add("bad_gzip", None, f"{shown}: {inflater.problem}")
    return tmp


def _display_compile_id() -> pl.Expr:
    ca, fid, fcid, att = (pl.col(c) for c in ("ca", "fid", "fcid", "att"))
    any_id = ca.is_not_null() | fid.is_not_null() | fcid.is_not_null()
    body = pl.concat_str(
        pl.when(ca.is_not_null()).then(pl.format("!{}/", ca)).otherwise(pl.lit("")),
        fid.cast(pl.String).fill_null("-"), pl.lit("/"), fcid.cast(pl.String).fill_null("-"),
        pl.when(att.is_not_null() & (att != 0)).then(pl.format("_{}", att)).otherwise(pl.lit("")),
    )
    return pl.when(any_id).then(pl.format("[{}]", body))


def _texts(hdr: pl.DataFrame, files: list[_File]) -> list[str]:
    """Header texts of the rows of ``hdr`` (kept in the index, or re-read by byte range from their file)."""
    if "json_text" in hdr.columns:
        return hdr["json_text"].to_list()
    return [header_text(files[f].fh, off, width)  # (an indexed file has fh)
            for f, off, width in hdr.select(FILE, "offset", "width").iter_rows()]


def _build(idx: pl.DataFrame, files: list[_File], thorough: bool) -> dict[str, pl.DataFrame]:
    """The frames of the files whose index is ``idx`` (column ``file``: position in ``files``; one large file or
    several small ones), with that column; their damage goes to each file's ``problems``.

    Every step runs once over all the files; what is per file (damage, the first row of a file, sessions, stacks
    resolved through the file's own ``str`` table) is keyed by ``file``, so that each file's rows are those it has
    when built alone. Memory (bench/RESULTS.md): the index is dropped as soon as the frames that share its columns
    exist, and the compile rows (JSON decoding, little allocation) are built before the large frames, which gives
    the allocator time to return the streaming query's freed buffers."""
    # fffd, other_end: used by the indexer only. time, md5: copied into one exactly sized buffer each (the
    # streaming query leaves one partly filled buffer per morsel: ~45 instead of ~30 MB per GB of log each);
    # lower-casing copies and changes nothing here (digits and punctuation, lower-case hex). Done now, so that the
    # freed buffers are returned to the OS during the JSON decoding below, before the large frames are built.
    idx = idx.drop("fffd", "other_end").with_columns(pl.col("time", "md5").str.to_lowercase())
    last_rec = dict(idx.select(FILE, "rec").filter(pl.col(FILE).is_last_distinct()).iter_rows())  # rec ascends
    # ---- lines before the first header
    lead = idx.select(FILE, "lineno", "pay_start", "pay_lines").filter(
        pl.col("lineno").is_null() & (pl.col("pay_lines") > 0))
    for f, _, start, lines in lead.iter_rows():
        files[f].problems.add("orphan_payload", 1 if start == 0 else None,
                              f"{lines} payload line(s) before the first record header", int(lines))
    hdr = _keep(idx, pl.col("lineno").is_not_null())
    del idx
    # ---- bad UTF-8 (exact path only)
    bad = hdr.select(FILE, "lineno", "bad_utf8").filter(pl.col("bad_utf8") > 0)
    if bad.height:
        for f, lineno, count in bad.group_by(FILE, maintain_order=True).agg(
                pl.col("lineno").first(), pl.col("bad_utf8").sum()).iter_rows():
            files[f].problems.add("bad_utf8", int(lineno), f"invalid UTF-8 in {int(count)} line(s), first in the "
                                  f"record at line {lineno}; decoded with replacement", int(count))
    # ---- lines that are not record headers
    for f, rec, lineno in hdr.select(FILE, "rec", "lineno", "event").filter(pl.col("event").is_null()).select(
            FILE, "rec", "lineno").iter_rows():
        if rec == last_rec[f] and not files[f].ends_with_newline:
            files[f].problems.add("truncated_line", lineno, f"the file ends inside line {lineno} (no record header)")
        else:
            files[f].problems.add("bad_header", lineno, f"line {lineno} is neither a record header nor a payload line")
    hdr = _keep(hdr, pl.col("event").is_not_null())
    present = set(hdr[FILE].unique().to_list())
    for at, f in enumerate(files):
        if at not in present and not f.problems.rows:
            f.problems.add("empty_file", None, f"{f.shown} holds no trace record")
    if hdr.is_empty():
        return {}
    for at in present:
        files[at].built = True
    # ---- cut or broken header JSON
    cut = hdr.select(FILE, "rec", "lineno", "event", "looks_complete").filter(~pl.col("looks_complete"))
    for f, rec, lineno, event, _ in cut.iter_rows():
        if rec == last_rec[f] and not files[f].ends_with_newline:
            files[f].problems.add("truncated_line", lineno, f"the file ends inside the header of a {event} record "
                                  f"at line {lineno}")
        else:
            files[f].problems.add("bad_json", lineno, f"line {lineno}: {event} header is not complete JSON")
    if thorough:
        for f, lineno, text in hdr.select(FILE, "lineno", "json_text", "looks_complete").filter(
                "looks_complete").select(FILE, "lineno", "json_text").iter_rows():
            try:
                safe_json.loads(text[text.index("] {") + 2:])
            except ValueError:
                files[f].problems.add("bad_json", lineno, f"line {lineno}: header JSON does not decode")
    # ---- unknown events
    unknown = hdr.select(FILE, "lineno", "event").filter(~pl.col("event").is_in(list(meta.KNOWN_EVENTS)))
    if unknown.height:
        for f, lineno, names, count in unknown.group_by(FILE, maintain_order=True).agg(
                pl.col("lineno").first(), pl.col("event").unique(maintain_order=True), pl.len()).iter_rows():
            files[f].problems.add("unknown_event", int(lineno), f"{len(names)} event name(s) unknown to aoti-trace: "
                                  f"{', '.join(names[:8])}", count)
    # ---- orphan payloads
    orphans = hdr.select(FILE, "lineno", "md5", "pay_lines").filter(
        pl.col("md5").is_null() & (pl.col("pay_lines") > 0))
    if orphans.height:
        for f, lineno, lines in orphans.group_by(FILE, maintain_order=True).agg(
                pl.col("lineno").first(), pl.col("pay_lines").sum()).iter_rows():
            files[f].problems.add("orphan_payload", int(lineno) + 1, f"payload lines after the header at line "
                                  f"{lineno}, which has no has_payload", int(lines))
    # ---- MD5
    md5_ok = _check_md5(hdr, files, thorough, last_rec)
    # ---- interned strings and stacks
    strings = _interned(hdr, files)
    stack_of = _stacks(hdr, files, strings)  # (file, stack_hash) -> (frames, api, user_frame)
    # ---- sessions
    session = _sessions(hdr, stack_of, files[0].session_starts if len(files) == 1 else None)
    base = hdr.select(pl.exclude("json_text")).with_columns(session=session, md5_ok=md5_ok,
                                                         compile_id=_display_compile_id())
    del hdr, md5_ok, session
    stack, stacks = _stack_rows(base, stack_of, files)
    text = _strings_of(base)
    events = base.select(
        _of_file([f.run_id for f in files], pl.String).alias("run_id"),
        _of_file([f.shown for f in files], pl.String).alias("path"), "lineno",
        pl.coalesce("rank", "rank_prefix", _of_file([f.rank for f in files], pl.Int32)).alias("rank"),
        pl.lit(text["level"]), "time", "pid", pl.lit(text["src"]), pl.lit(text["event"]), "compile_id",
        "session", pl.lit(stack), pl.lit(text["name"]), pl.lit(text["encoding"]),
        pl.col("pay_start").alias("payload_offset"), (pl.col("pay_end") - pl.col("pay_start")).alias("payload_length"),
        pl.col("pay_lines").alias("payload_lines"), "md5", "md5_ok", FILE,
    )
    keys = base.select(FILE, "session", "stack_hash", "lineno", "rank", "compile_id", "event", "name", "offset",
                       "width", "looks_complete")
    # the index columns that no frame shares are freed before the JSON decoding of the compile rows (~1 s per GB,
    # little allocation), which gives the allocator time to return them before the artifacts are built
    del text, base
    out = {}
    compiles = _compiles(keys, files, stack_of)
    out["events"] = events
    has_payload = events["md5"].is_not_null()  # (select, then filter: a filter copies every column)
    out["artifacts"] = events.select(
        "run_id", "path", "lineno", "rank", "session", "event", "name", "encoding", "payload_offset",
        "payload_length", "md5_ok", FILE).filter(has_payload)
    del events, keys
    out["stacks"] = stacks
    if compiles.height:
        out["compiles"] = compiles
    return out


SMALL_ROWS = 65_536  # index rows below which the Categorical columns are simply cast (one operation for all)


def _strings_of(base: pl.DataFrame) -> dict[str, pl.Series]:
    """The :data:`CATEGORICAL` columns of ``base`` as String columns (:func:`_strings`). A small index casts them
    all at once: equal values, and the memory of a per-row copy does not matter there."""
    if base.height < SMALL_ROWS:
        return dict(zip(CATEGORICAL, base.select(pl.col(c).cast(pl.String) for c in CATEGORICAL).get_columns()))
    return {c: _strings(base[c]) for c in CATEGORICAL}


def _strings(col: pl.Series) -> pl.Series:
    """A Categorical index column as String: a gather from its distinct values, so every row is a 16-byte view
    into one small buffer (``cast(pl.String)`` would copy the text of every row)."""
    if col.dtype != pl.Categorical:
        return col
    distinct = col.unique().drop_nulls().cast(pl.String).sort()
    return distinct.gather(col.cast(pl.Enum(distinct)).to_physical()).alias(col.name)  # type: ignore[no-any-return]  # polars' stubs


def _keep(df: pl.DataFrame, predicate: pl.Expr) -> pl.DataFrame:
    """``df.filter(predicate)``, without the copy of every column when every row passes."""
    mask = df.select(predicate.alias("m"))["m"]
    return df if mask.all() else df.filter(mask)


def _check_md5(hdr: pl.DataFrame, files: list[_File], thorough: bool, last_rec: dict[int, int]) -> pl.Series:
    """``md5_ok`` of every row of ``hdr``: every payload checked (``thorough``), else only the last of each file."""
    has = hdr.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("pos"), FILE, "rec", "lineno", "event", "name",
                     "md5", "pay_start", "pay_end").filter(pl.col("md5").is_not_null())
    if not thorough:  # the cheap check: only the last payload, where a killed process leaves a cut one
        has = has.filter(pl.col(FILE).is_last_distinct())
    at, oks = [], []
    for pos, f, rec, lineno, event, name, md5, start, end in has.iter_rows():
        fh = files[f].fh
        if start is None or fh is None:
            ok = False
        else:
            fh.seek(start)
            ok = hashlib.md5(_strip_tabs(fh.read(end - start))).hexdigest() == md5
        at.append(pos)
        oks.append(ok)
        if not ok:
            what = f"{event}{' ' + name if name else ''} record at line {lineno}"
            if rec == last_rec[f]:
                files[f].problems.add("truncated_payload", lineno, f"the file ends inside the payload of the {what} "
                                      "(MD5 does not match has_payload)")
            else:
                files[f].problems.add("md5_mismatch", lineno, f"payload of the {what} does not match its has_payload MD5")
    md5_ok = pl.repeat(None, hdr.height, dtype=pl.Boolean, eager=True).alias("md5_ok")
    return md5_ok.scatter(at, pl.Series(oks, dtype=pl.Boolean)) if at else md5_ok


def _interned(hdr: pl.DataFrame, files: list[_File]) -> dict[int, dict[int, str]]:
    """The ``str`` table of each file: file -> interned id -> path. (A function: the few filtered rows would
    otherwise stay alive until the end of :func:`_build`, and a filtered frame can keep the whole buffers of its
    string columns.)"""
    strings: dict[int, dict[int, str]] = {}
    rows = hdr.filter(pl.col("event") == "str")
    for f, lineno, text in zip(rows[FILE], rows["lineno"], _texts(rows, files)):
        got = meta.parse_str_record(text, lineno, files[f].problems)
        if got:
            strings.setdefault(f, {})[got[0]] = got[1]
    return strings


def _stacks(hdr: pl.DataFrame, files: list[_File], strings: dict[int, dict[int, str]]
            ) -> dict[tuple[int, int], tuple[Any, ...]]:
    """Decoded frames of each distinct stack of each file (by file and hash); the header of its first record is
    re-read."""
    out: dict[tuple[int, int], tuple[Any, ...]] = {}
    rows = hdr.select(FILE, "stack_hash", "lineno", "event", "offset", "width")  # select, then filter (a filter
    rows = rows.filter(pl.col("stack_hash").is_not_null())                      # copies every column of its frame)
    rows = rows.group_by(FILE, "stack_hash", maintain_order=True).agg(
        pl.col("lineno").first(), pl.col("event").first(), pl.col("offset").first(), pl.col("width").first())
    for (f, key, lineno, event, _, _), text in zip(rows.iter_rows(), _texts(rows, files)):
        problems = files[f].problems
        raw = meta.parse_stack(text.split(STACK_SEP, 1)[1])
        if raw is None:
            problems.add("bad_json", lineno, f"line {lineno}: the stack of this {event} record does not decode")
            continue
        frames = meta.resolve_stack(raw, strings.get(f, {}), lineno, problems)
        api, user_frame = meta.user_call(frames, event)
        out[f, key] = (frames, api, user_frame)
    return out


class _SessionMachine:
    """Session boundaries (see the module docstring) of the records fed to it in file order, file by file:
    ``starts``, ``file * KEY + lineno`` of each record that starts a session. Fed once with every record of an
    index (:func:`_sessions`), or chunk by chunk during a squeezed scan (:class:`_SessionSqueeze`)."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.at: int | None = None
        self.close_cid: object = None
        self.closing = self.substantive = False
        self.last_call: tuple[Any, ...] | None = None

    def feed(self, hdr: pl.DataFrame, stack_of: dict[tuple[int, int], tuple[Any, ...]]) -> None:
        notable = hdr.select(FILE, "lineno", "event", "name", "stack_hash", _display_compile_id().alias("cid")).filter(
            (pl.col("event") != "chromium_event") | pl.col("cid").is_not_null()
        )
        starts = self.starts
        at, close_cid, closing, substantive, last_call = (self.at, self.close_cid, self.closing, self.substantive,
                                                          self.last_call)
        for f, lineno, event, name, stack_hash, cid_ in notable.iter_rows():
            if f != at:
                at, close_cid, closing, substantive, last_call = f, None, False, False, None
            if closing and not (event == "chromium_event" and cid_ == close_cid):
                starts.append(f * KEY + lineno)
                closing, substantive, last_call = False, False, None
            call = stack_of[f, stack_hash][1:] if (f, stack_hash) in stack_of else None
            if event == "artifact" and name == "torch_version":
                if substantive:
                    starts.append(f * KEY + lineno)
                    substantive, last_call = False, None
            elif call and call[0] in meta.ENTRY_APIS and cid_ is None:  # Dynamo records split only at metrics
                if last_call and call != last_call and meta.api_phase(call[0]) <= meta.api_phase(last_call[0]):
                    starts.append(f * KEY + lineno)
                    substantive = False
                last_call = call
            if event == "compilation_metrics":
                closing, close_cid = True, cid_
            if event not in ("str", "chromium_event") and not (event == "artifact" and name == "torch_version"):
                substantive = True
        self.at, self.close_cid, self.closing, self.substantive, self.last_call = (at, close_cid, closing,
                                                                                    substantive, last_call)


def _sessions(hdr: pl.DataFrame, stack_of: dict[tuple[int, int], tuple[Any, ...]],
              starts: list[int] | None = None) -> pl.Series:
    """Session number of every record (see the module docstring), counted from 0 in each file; ``starts``: the
    session starts found during a squeezed scan (:class:`_SessionSqueeze`: sessions left out are numbered too)."""
    if starts is None:
        machine = _SessionMachine()
        machine.feed(hdr, stack_of)
        starts = machine.starts
    b = pl.Series(starts, dtype=pl.Int64)
    first = hdr[FILE].cast(pl.Int64) * KEY
    # session starts up to the record, less those of the files before it
    session = b.search_sorted(first + hdr["lineno"], side="right") - b.search_sorted(first, side="left")
    return session.cast(pl.Int32).alias("session")  # type: ignore[no-any-return]  # polars' stubs


def _stack_rows(base: pl.DataFrame, stack_of: dict[tuple[int, int], tuple[Any, ...]], files: list[_File]
                ) -> tuple[pl.Series, pl.DataFrame]:
    """Interned stacks: the id of each record's stack (column ``stack`` of ``events``: the position of the stack
    among its file's distinct decoded stacks, in order of first appearance; null without one), and the frame
    ``stacks``: one set of frames per distinct stack per file, with ``lineno`` of the first record that logged it and
    ``records`` = how many records of the file logged it. A stack repeated by every compile of a long log (a few
    dozen distinct stacks per GB) is stored once, not once per session."""
    keys = pl.DataFrame({FILE: [f for f, _ in stack_of], "stack_hash": [h for _, h in stack_of]},
                        schema={FILE: pl.Int32, "stack_hash": pl.UInt64})
    keys = keys.with_columns(stack=pl.int_range(pl.len(), dtype=pl.Int32).over(FILE))
    ids = base.select(FILE, "stack_hash").join(keys, on=[FILE, "stack_hash"], how="left",
                                                 maintain_order="left")["stack"]
    uses = (
        base.select(FILE, "lineno").with_columns(ids).filter(pl.col("stack").is_not_null())
        .group_by(FILE, "stack").agg(pl.col("lineno").min(), records=pl.len().cast(pl.Int32)).sort(FILE, "stack")
    )
    dropped = [(at, h, n) for at, f in enumerate(files) for h, n in f.stack_dropped.items()]
    if dropped:  # records of the sessions a squeezed scan left out (their first record of each stack is kept)
        extra = pl.DataFrame(dropped, orient="row", schema={FILE: pl.Int32, "stack_hash": pl.UInt64, "more": pl.Int32})
        extra = extra.join(keys, on=[FILE, "stack_hash"], how="inner").select(FILE, "stack", "more")
        uses = uses.join(extra, on=[FILE, "stack"], how="left", maintain_order="left").select(
            FILE, "stack", "lineno", (pl.col("records") + pl.col("more").fill_null(0)).alias("records"))
    frames_of = list(stack_of.values())
    first = dict(zip(*keys.select(FILE, pl.int_range(pl.len(), dtype=pl.Int32).alias("at")).filter(
        pl.col(FILE).is_first_distinct()).get_columns()))  # file -> position of its first stack in stack_of
    rows = [(f, lineno, stack, records, fr.depth, fr.filename, fr.line, fr.function, fr.code, fr.is_user)
            for f, stack, lineno, records in uses.iter_rows() for fr in frames_of[first[f] + stack][0]]
    table = pl.DataFrame(rows, orient="row", schema={
        FILE: pl.Int32, "lineno": pl.Int64, "stack": pl.Int32, "records": pl.Int32, "depth": pl.Int32,
        "filename": pl.String, "line": pl.Int32, "function": pl.String, "code": pl.String, "is_user": pl.Boolean})
    out = table.select(_of_file([f.run_id for f in files], pl.String).alias("run_id"),
                       _of_file([f.shown for f in files], pl.String).alias("path"), "lineno", "stack", "records",
                       "depth", "filename", "line", "function", "code", "is_user", FILE)
    return ids, out


COMPILE_ROWS = 2048  # compile rows (dicts of decoded metrics) held as Python objects before they become a frame


def _compiles(base: pl.DataFrame, files: list[_File], stack_of: dict[tuple[int, int], tuple[Any, ...]]
              ) -> pl.DataFrame:
    ev, name = pl.col("event"), pl.col("name")
    tv = (ev == "artifact") & (name == "torch_version")
    cm = ev == "compilation_metrics"
    names = base["name"].unique().drop_nulls().cast(pl.String)  # (Categorical: no str namespace)
    aoti_names = names.filter(names.str.starts_with("inductor_aot")).to_list()
    per = (
        base.group_by(FILE, "session", maintain_order=True)
        .agg(
            substantive=(~ev.is_in(["str", "chromium_event"]) & ~tv).any(),
            rank=pl.col("rank").drop_nulls().first(),
            last_lineno=pl.col("lineno").last(),
            last_cid=pl.col("compile_id").drop_nulls().last(),
            aoti_dump=((ev == "graph_dump") & name.is_in(aoti_names)).any(),
            stacks=pl.col("stack_hash").drop_nulls().unique(maintain_order=True),
            cm_lineno=pl.col("lineno").filter(cm).last(),
            cm_cid=pl.col("compile_id").filter(cm).last(),
            cm_offset=pl.col("offset").filter(cm).last(),
            cm_width=pl.col("width").filter(cm).last(),
            cm_complete=pl.col("looks_complete").filter(cm).last(),
        )
        .filter("substantive")  # sessions of only interning / timeline records: no compile happened there
    )
    partial = [(at, n) for at, f in enumerate(files) for n in f.partial_sessions]
    if partial:  # sessions a squeezed scan left out, of which a str record or a stack's first record was kept
        gone = pl.DataFrame(partial, orient="row", schema={FILE: pl.Int32, "session": pl.Int32})
        per = per.join(gone, on=[FILE, "session"], how="anti", maintain_order="left")
    rows: list[dict[str, Any]] = []
    parts: list[pl.DataFrame] = []  # rows as frames, COMPILE_ROWS at a time: a row dict costs ~4 KB
    for s in per.iter_rows(named=True):
        f, session = files[s[FILE]], s["session"]
        calls = [stack_of[s[FILE], t][1:] for t in s["stacks"] if (s[FILE], t) in stack_of]
        calls = [c for c in calls if c[0] in meta.ENTRY_APIS] or [c for c in calls if c[1]]
        best = max(calls, key=lambda c: meta.api_phase(c[0]), default=(None, None))  # the compile over the export
        row: dict[str, Any] = {"run_id": f.run_id, "path": f.shown, "session": session, "api": best[0],
                               "user_frame": best[1], "rank": s["rank"]}
        decoded = None
        has_cm = s["cm_lineno"] is not None
        if has_cm:
            row["lineno"], row["compile_id"] = s["cm_lineno"], s["cm_cid"]
            if s["cm_complete"]:
                text = header_text(f.fh, s["cm_offset"], s["cm_width"])  # (indexed: has fh)
                decoded = meta.decode_metrics(text, s["cm_lineno"], f.problems)
                if decoded is None:
                    f.problems.add("bad_json", s["cm_lineno"], f"line {s['cm_lineno']}: compilation_metrics does not decode")
        else:
            row["lineno"], row["compile_id"] = s["last_lineno"], s["last_cid"]
        if decoded is not None:
            row.update({k: v for k, v in decoded.items() if k not in ("compile_id", "duration_us")})
            row["status"] = "failed" if decoded.get("fail_type") or decoded.get("fail_reason") else "ok"
        else:
            row["status"] = "incomplete"
        if row["compile_id"] is not None:
            row["kind"] = "export" if best[0] in meta.EXPORT_APIS else "dynamo"
        elif best[0] in meta.AOTI_APIS or s["aoti_dump"] or has_cm:
            row["kind"] = "aoti"
        elif best[0] in meta.EXPORT_APIS:
            row["kind"] = "export"
        else:
            row["kind"] = None
        if row["status"] == "incomplete" and row["kind"] != "export":
            f.problems.add("incomplete_compile", row["lineno"],
                           f"compile session {session} has no complete compilation_metrics: the log ends at line "
                           f"{s['last_lineno']} (process killed or crashed mid-compile?)")
        row[FILE] = s[FILE]
        rows.append(row)
        if len(rows) == COMPILE_ROWS:
            parts.append(pl.DataFrame(rows, infer_schema_length=None))
            rows = []
    if rows:
        parts.append(pl.DataFrame(rows, infer_schema_length=None))
    if not parts:
        return pl.DataFrame()
    # each row conformed as its file's own frame would be (column types: the supertype over the rows of all files)
    return conform("compiles", parts[0] if len(parts) == 1 else pl.concat(parts, how="diagonal_relaxed"))
