"""Read TORCH_TRACE logs into the frames ``events``, ``compiles``, ``artifacts``, ``stacks`` and ``damage``.

Public API::

    read_trace(files: list[Path], run_id: str, *, verify: bool | None = None) -> Frames
    read_payload(path: str | Path, offset: int, length: int) -> str
    read_payloads(path: str | Path, ranges: list[tuple[int, int]]) -> list[str]   # several, in one pass
    payload_text(row: dict) -> str                      # a row of `events` / `artifacts` (needs path + payload_*)
    payload_md5_ok(path, offset, length, md5) -> bool    # full check of one payload

How a file is read (see trace-format.md §11 and :mod:`aoti_trace.ingest.trace.index`):

* The file is indexed once, by a Polars streaming query (or a byte-exact Python scanner for CRLF, invalid UTF-8
  and ``\\x01`` bytes). Only small header columns are kept (no header text: a 64-bit hash stands for the stack);
  payloads stay on disk as ``(payload_offset, payload_length)`` and are read on demand with :func:`read_payload`,
  which strips exactly one leading TAB per line. The header lines that are JSON-decoded are re-read by byte range.
* ``.log.gz`` files are decompressed (streaming, bounded: :mod:`aoti_trace.ingest.files`) to a temporary file that
  is indexed and then deleted; a corrupt or truncated stream keeps what decompressed before the damage
  (``bad_gzip``), and so does one that inflates past the size or ratio limit (a gzip bomb). Payload offsets refer
  to the decompressed stream and :func:`read_payload` re-reads the ``.gz`` (a gzip seek is a decompression from
  the start: fine for the few payloads a rule reads).
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
``orphan_payload`` (TAB lines after a header without ``has_payload``), ``incomplete_compile``.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Iterable

import polars as pl

from aoti_trace.model.frames import Frames
from aoti_trace.ingest import files, safe_json
from aoti_trace.ingest.trace import meta
from aoti_trace.ingest.trace.index import CATEGORICAL, STACK_SEP, header_text, index_file

THOROUGH_LIMIT = 64 * 1024 * 1024  # bytes: full MD5 + JSON checks below this file size when verify=None
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
def read_trace(files: list[Path], run_id: str, *, verify: bool | None = None) -> Frames:
    """Frames ``events``, ``compiles``, ``artifacts``, ``stacks``, ``damage`` of the trace ``files`` of one run."""
    frames = Frames()
    for path in files:
        _read_file(Path(path), run_id, verify, frames)
    return frames


def _damage_frame(run_id: str, path: str, problems: meta.Problems) -> pl.DataFrame:
    rows = [
        {"run_id": run_id, "path": path, "lineno": lineno, "kind": kind, "count": count, "detail": detail}
        for kind, (count, lineno, detail) in problems.rows.items()
    ]
    return pl.DataFrame(rows, schema={"run_id": pl.String, "path": pl.String, "lineno": pl.Int64,
                                      "kind": pl.String, "count": pl.Int64, "detail": pl.String})


def _read_file(path: Path, run_id: str, verify: bool | None, frames: Frames) -> None:
    problems = meta.Problems()
    shown = str(path)
    tmp: str | None = None
    try:
        try:
            st = os.stat(path)
        except OSError as exc:
            problems.add("unreadable", None, f"cannot read {shown}: {exc.strerror or exc}")
            return
        special = files.special_file(st)
        if special is not None:
            problems.add("not_regular_file", None, f"{shown} is {special}, not a file: not read")
            return
        try:
            fh = open(path, "rb")  # noqa: SIM115 (closed below; opened first so that an unreadable file is damage)
        except OSError as exc:
            problems.add("unreadable", None, f"cannot read {shown}: {exc.strerror or exc}")
            return
        with fh:
            try:
                gz = path.name.endswith(".gz") or fh.read(2) == files.GZIP_MAGIC  # also a gzip named .log
                fh.seek(0)
                if gz:
                    tmp = _inflate_to_temp(fh, shown, problems)
            except OSError as exc:
                problems.add("unreadable", None, f"cannot read {shown}: {exc.strerror or exc}")
                return
            local, size = (tmp, os.path.getsize(tmp)) if tmp else (str(path), os.fstat(fh.fileno()).st_size)
        if size == 0:
            problems.add("empty_file", None, f"{shown} is empty (the process wrote no record)")
            return
        thorough = verify if verify is not None else size <= THOROUGH_LIMIT
        try:
            fh = open(local, "rb")  # noqa: SIM115
        except OSError as exc:
            problems.add("unreadable", None, f"cannot read {shown}: {exc.strerror or exc}")
            return
        with fh:
            packed = files.compressed(fh.read(4))
            if packed:  # the indexer's CSV reader would decompress it by its magic bytes (and fail on damage)
                problems.add("bad_header", 1, f"{shown} holds {packed}-compressed data"
                             f"{' inside its gzip stream' if gz else ''}, not TORCH_TRACE text: not indexed")
                return
            fh.seek(max(0, size - 1))
            ends_with_newline = fh.read(1) == b"\n"
            fh.seek(0)
            file_rank = RANK_FILE_RE.search(path.name)
            _build(local, size, fh, shown, run_id, int(file_rank[1]) if file_rank else None, thorough,
                   ends_with_newline, problems, frames)
    finally:
        if tmp:
            os.unlink(tmp)
        frames.add("damage", _damage_frame(run_id, shown, problems))


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


def _texts(hdr: pl.DataFrame, fh: BinaryIO) -> list[str]:
    """Header texts of the rows of ``hdr`` (kept in the index, or re-read by byte range)."""
    if "json_text" in hdr.columns:
        return hdr["json_text"].to_list()
    return [header_text(fh, off, width) for off, width in hdr.select("offset", "width").iter_rows()]


def _build(local: str, size: int, fh: BinaryIO, shown: str, run_id: str, file_rank: int | None, thorough: bool,
           ends_with_newline: bool, problems: meta.Problems, frames: Frames) -> None:
    """Index ``local`` and add its frames. Memory (bench/RESULTS.md): the index is dropped as soon as the frames
    that share its columns exist, and the compile rows (JSON decoding, little allocation) are built before the
    large frames, which gives the allocator time to return the streaming query's freed buffers."""
    idx, _ = index_file(local, size, keep_text=thorough)
    # fffd, other_end: used by the indexer only. time, md5: copied into one exactly sized buffer each (the
    # streaming query leaves one partly filled buffer per morsel: ~45 instead of ~30 MB per GB of log each);
    # lower-casing copies and changes nothing here (digits and punctuation, lower-case hex). Done now, so that the
    # freed buffers are returned to the OS during the JSON decoding below, before the large frames are built.
    idx = idx.drop("fffd", "other_end").with_columns(pl.col("time", "md5").str.to_lowercase())
    last_rec = idx["rec"].max()
    # ---- lines before the first header
    lead = idx.filter(pl.col("lineno").is_null() & (pl.col("pay_lines") > 0))
    if lead.height:
        problems.add("orphan_payload", 1 if lead["pay_start"][0] == 0 else None,
                     f"{lead['pay_lines'][0]} payload line(s) before the first record header", int(lead["pay_lines"][0]))
    hdr = _keep(idx, pl.col("lineno").is_not_null())
    del idx
    # ---- bad UTF-8 (exact path only)
    bad = hdr.filter(pl.col("bad_utf8") > 0)
    if bad.height:
        problems.add("bad_utf8", int(bad["lineno"][0]),
                     f"invalid UTF-8 in {int(bad['bad_utf8'].sum())} line(s), first in the record at line "
                     f"{bad['lineno'][0]}; decoded with replacement", int(bad["bad_utf8"].sum()))
    # ---- lines that are not record headers
    nohead = hdr.filter(pl.col("event").is_null())
    for row in nohead.select("rec", "lineno").iter_rows(named=True):
        if row["rec"] == last_rec and not ends_with_newline:
            problems.add("truncated_line", row["lineno"], f"the file ends inside line {row['lineno']} (no record header)")
        else:
            problems.add("bad_header", row["lineno"], f"line {row['lineno']} is neither a record header nor a payload line")
    hdr = _keep(hdr, pl.col("event").is_not_null())
    if hdr.is_empty():
        if not problems.rows:
            problems.add("empty_file", None, f"{shown} holds no trace record")
        return
    # ---- cut or broken header JSON
    cut = hdr.filter(~pl.col("looks_complete"))
    for row in cut.select("rec", "lineno", "event").iter_rows(named=True):
        if row["rec"] == last_rec and not ends_with_newline:
            problems.add("truncated_line", row["lineno"], f"the file ends inside the header of a "
                         f"{row['event']} record at line {row['lineno']}")
        else:
            problems.add("bad_json", row["lineno"], f"line {row['lineno']}: {row['event']} header is not complete JSON")
    if thorough:
        for lineno, text in hdr.select("lineno", "json_text", "looks_complete").filter("looks_complete").select(
                "lineno", "json_text").iter_rows():
            try:
                safe_json.loads(text[text.index("] {") + 2:])
            except ValueError:
                problems.add("bad_json", lineno, f"line {lineno}: header JSON does not decode")
    # ---- unknown events
    unknown = hdr.filter(~pl.col("event").is_in(list(meta.KNOWN_EVENTS)))
    if unknown.height:
        names = unknown["event"].unique(maintain_order=True).to_list()
        problems.add("unknown_event", int(unknown["lineno"][0]),
                     f"{len(names)} event name(s) unknown to aoti-trace: {', '.join(names[:8])}", unknown.height)
    # ---- orphan payloads
    orphans = hdr.filter(pl.col("md5").is_null() & (pl.col("pay_lines") > 0))
    if orphans.height:
        problems.add("orphan_payload", int(orphans["lineno"][0]) + 1,
                     f"payload lines after the header at line {orphans['lineno'][0]}, which has no has_payload",
                     int(orphans["pay_lines"].sum()))
    # ---- MD5
    md5_ok = _check_md5(hdr, fh, thorough, last_rec, problems)  # type: ignore[arg-type]  # max() of the Int64 rec column
    # ---- interned strings and stacks
    strings = _interned(hdr, fh, problems)
    stack_of = _stacks(hdr, fh, strings, problems)  # stack_hash -> (frames, api, user_frame)
    # ---- sessions
    session = _sessions(hdr, stack_of)
    base = hdr.select(pl.exclude("json_text")).with_columns(session=session, md5_ok=md5_ok,
                                                         compile_id=_display_compile_id())
    del hdr, md5_ok, session
    text = _strings_of(base)
    events = base.select(
        pl.lit(run_id).alias("run_id"), pl.lit(shown).alias("path"), "lineno",
        pl.coalesce("rank", "rank_prefix", pl.lit(file_rank, pl.Int32)).alias("rank"),
        pl.lit(text["level"]), "time", "pid", pl.lit(text["src"]), pl.lit(text["event"]), "compile_id",
        "session", pl.lit(text["name"]), pl.lit(text["encoding"]),
        pl.col("pay_start").alias("payload_offset"), (pl.col("pay_end") - pl.col("pay_start")).alias("payload_length"),
        pl.col("pay_lines").alias("payload_lines"), "md5", "md5_ok",
    )
    keys = base.select("session", "stack_hash", "lineno", "rank", "compile_id", "event", "name", "offset", "width",
                       "looks_complete")
    # the index columns that no frame shares are freed before the JSON decoding of the compile rows (~1 s per GB,
    # little allocation), which gives the allocator time to return them before the stacks are built
    del text, base
    compiles = _compiles(keys, fh, stack_of, run_id, shown, problems)
    frames.add("events", events)
    has_payload = events["md5"].is_not_null()  # (select, then filter: a filter copies every column)
    frames.add("artifacts", events.select(
        "run_id", "path", "lineno", "rank", "session", "event", "name", "encoding", "payload_offset",
        "payload_length", "md5_ok").filter(has_payload))
    del events
    stacks = _stack_rows(keys, stack_of, run_id, shown)
    del keys
    frames.add("stacks", stacks)
    if compiles.height:
        frames.add("compiles", compiles)


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


def _check_md5(hdr: pl.DataFrame, fh: BinaryIO, thorough: bool, last_rec: int, problems: meta.Problems) -> pl.Series:
    has = hdr.select("rec", "lineno", "event", "name", "md5", "pay_start", "pay_end")
    if thorough:
        has = has.filter(pl.col("md5").is_not_null())
    else:  # the cheap check: only the last payload, where a killed process leaves a cut one
        last = hdr.select(pl.arg_where(pl.col("md5").is_not_null()).last())[0, 0]
        has = has.slice(last, 1) if last is not None else has.clear()
    results: dict[int, bool] = {}
    for rec, lineno, event, name, md5, start, end in has.iter_rows():
        if start is None:
            ok = False
        else:
            fh.seek(start)
            ok = hashlib.md5(_strip_tabs(fh.read(end - start))).hexdigest() == md5
        results[rec] = ok
        if not ok:
            what = f"{event}{' ' + name if name else ''} record at line {lineno}"
            if rec == last_rec:
                problems.add("truncated_payload", lineno, f"the file ends inside the payload of the {what} "
                             "(MD5 does not match has_payload)")
            else:
                problems.add("md5_mismatch", lineno, f"payload of the {what} does not match its has_payload MD5")
    if not results:
        return pl.Series("md5_ok", [None] * hdr.height, dtype=pl.Boolean)
    if len(results) == 1:
        (rec, ok), = results.items()
        return hdr.select(pl.when(pl.col("rec") == rec).then(ok).alias("md5_ok"))["md5_ok"]
    checked = pl.DataFrame({"rec": list(results), "ok": list(results.values())},
                           schema={"rec": pl.Int64, "ok": pl.Boolean})
    return hdr.select("rec").join(checked, on="rec", how="left", maintain_order="left")["ok"].alias("md5_ok")


def _interned(hdr: pl.DataFrame, fh: BinaryIO, problems: meta.Problems) -> dict[int, str]:
    """The ``str`` table: interned id -> path. (A function: the few filtered rows would otherwise stay alive
    until the end of :func:`_build`, and a filtered frame can keep the whole buffers of its string columns.)"""
    strings: dict[int, str] = {}
    rows = hdr.filter(pl.col("event") == "str")
    for lineno, text in zip(rows["lineno"], _texts(rows, fh)):
        got = meta.parse_str_record(text, lineno, problems)
        if got:
            strings[got[0]] = got[1]
    return strings


def _stacks(hdr: pl.DataFrame, fh: BinaryIO, strings: dict[int, str], problems: meta.Problems) -> dict[int, tuple[Any, ...]]:
    """Decoded frames of each distinct stack (by hash); the header of its first record is re-read."""
    out: dict[int, tuple[Any, ...]] = {}
    rows = hdr.select("stack_hash", "lineno", "event", "offset", "width")  # select, then filter (a filter copies
    rows = rows.filter(pl.col("stack_hash").is_not_null())                # every column of its frame)
    rows = rows.group_by("stack_hash", maintain_order=True).agg(
        pl.col("lineno").first(), pl.col("event").first(), pl.col("offset").first(), pl.col("width").first())
    for (key, lineno, event, _, _), text in zip(rows.iter_rows(), _texts(rows, fh)):
        raw = meta.parse_stack(text.split(STACK_SEP, 1)[1])
        if raw is None:
            problems.add("bad_json", lineno, f"line {lineno}: the stack of this {event} record does not decode")
            continue
        frames = meta.resolve_stack(raw, strings, lineno, problems)
        api, user_frame = meta.user_call(frames, event)
        out[key] = (frames, api, user_frame)
    return out


def _sessions(hdr: pl.DataFrame, stack_of: dict[int, tuple[Any, ...]]) -> pl.Series:
    """Session number of every record (see the module docstring)."""
    cid = _display_compile_id()
    notable = hdr.select("rec", "event", "name", "stack_hash", cid.alias("cid")).filter(
        (pl.col("event") != "chromium_event") | pl.col("cid").is_not_null()
    )
    boundaries: list[int] = []
    close_cid: object = None
    closing = False
    substantive = False
    last_call = None
    for rec, event, name, stack_hash, cid_ in notable.iter_rows():
        if closing and not (event == "chromium_event" and cid_ == close_cid):
            boundaries.append(rec)
            closing, substantive, last_call = False, False, None
        call = stack_of[stack_hash][1:] if stack_hash in stack_of else None
        if event == "artifact" and name == "torch_version":
            if substantive:
                boundaries.append(rec)
                substantive, last_call = False, None
        elif call and call[0] in meta.ENTRY_APIS and cid_ is None:  # Dynamo records split only at metrics
            if last_call and call != last_call and meta.api_phase(call[0]) <= meta.api_phase(last_call[0]):
                boundaries.append(rec)
                substantive = False
            last_call = call
        if event == "compilation_metrics":
            closing, close_cid = True, cid_
        if event not in ("str", "chromium_event") and not (event == "artifact" and name == "torch_version"):
            substantive = True
    b = pl.Series(boundaries, dtype=pl.Int64)
    return b.search_sorted(hdr["rec"], side="right").cast(pl.Int32).alias("session")  # type: ignore[no-any-return]  # polars' stubs


def _stack_rows(base: pl.DataFrame, stack_of: dict[int, tuple[Any, ...]], run_id: str, shown: str) -> pl.DataFrame:
    """One set of frames per distinct stack per session: ``lineno`` of the first record that logged it, ``records``
    = how many records of the session logged it.

    Built by two gathers (pair rows repeated, table rows in runs) rather than a join: the result is ~2 M rows
    per GB of log, and a join's intermediates are as large again."""
    table = pl.DataFrame(
        [{"depth": f.depth, "filename": f.filename, "line": f.line, "function": f.function, "code": f.code,
          "is_user": f.is_user} for frames, _, _ in stack_of.values() for f in frames],
        schema={"depth": pl.Int32, "filename": pl.String, "line": pl.Int32, "function": pl.String,
                "code": pl.String, "is_user": pl.Boolean},
    )
    start, count = {}, {}
    at = 0
    for key, (frames, _, _) in stack_of.items():
        start[key], count[key] = at, len(frames)
        at += len(frames)
    firsts = (
        base.select("session", "stack_hash", "lineno").filter(pl.col("stack_hash").is_in(list(start)))
        .group_by(["session", "stack_hash"], maintain_order=True)
        .agg(pl.col("lineno").first(), records=pl.len().cast(pl.Int32))
        .with_columns(
            start=pl.col("stack_hash").replace_strict(start, return_dtype=pl.UInt32),
            n=pl.col("stack_hash").replace_strict(count, return_dtype=pl.UInt32),
        )
        .filter(pl.col("n") > 0)  # (a stack without frames has no rows; explode would give it a null)
    )
    pair = firsts.select(pl.int_range(pl.len(), dtype=pl.UInt32).repeat_by("n").explode())["literal"]
    rows = firsts.select(pl.int_ranges("start", pl.col("start") + pl.col("n"), dtype=pl.UInt32).explode())["start"]
    out = firsts.select("lineno", "session", "records")[pair].hstack(table[rows].get_columns())
    return out.select(pl.lit(run_id).alias("run_id"), pl.lit(shown).alias("path"), "lineno", "session", "records",
                      "depth", "filename", "line", "function", "code", "is_user")


def _compiles(base: pl.DataFrame, fh: BinaryIO, stack_of: dict[int, tuple[Any, ...]], run_id: str, shown: str,
              problems: meta.Problems) -> pl.DataFrame:
    ev, name = pl.col("event"), pl.col("name")
    tv = (ev == "artifact") & (name == "torch_version")
    cm = ev == "compilation_metrics"
    names = base["name"].unique().drop_nulls().cast(pl.String)  # (Categorical: no str namespace)
    aoti_names = names.filter(names.str.starts_with("inductor_aot")).to_list()
    per = (
        base.group_by("session", maintain_order=True)
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
    rows = []
    for s in per.iter_rows(named=True):
        session = s["session"]
        calls = [stack_of[t][1:] for t in s["stacks"] if t in stack_of]
        calls = [c for c in calls if c[0] in meta.ENTRY_APIS] or [c for c in calls if c[1]]
        best = max(calls, key=lambda c: meta.api_phase(c[0]), default=(None, None))  # the compile over the export
        row: dict[str, Any] = {"run_id": run_id, "path": shown, "session": session, "api": best[0], "user_frame": best[1],
                     "rank": s["rank"]}
        decoded = None
        has_cm = s["cm_lineno"] is not None
        if has_cm:
            row["lineno"], row["compile_id"] = s["cm_lineno"], s["cm_cid"]
            if s["cm_complete"]:
                text = header_text(fh, s["cm_offset"], s["cm_width"])
                decoded = meta.decode_metrics(text, s["cm_lineno"], problems)
                if decoded is None:
                    problems.add("bad_json", s["cm_lineno"], f"line {s['cm_lineno']}: compilation_metrics does not decode")
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
            problems.add("incomplete_compile", row["lineno"],
                         f"compile session {session} has no complete compilation_metrics: the log ends at line "
                         f"{s['last_lineno']} (process killed or crashed mid-compile?)")
        rows.append(row)
    if not rows:
        return pl.DataFrame()
    return pl.DataFrame(rows, infer_schema_length=None)
