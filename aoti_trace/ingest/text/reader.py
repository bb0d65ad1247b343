"""Captured stderr / stdout -> frames: ``lines``, ``exceptions``, ``device_asserts``, ``faults``, ``printer``, ``damage``.

Damaged text is never an error: undecodable bytes are replaced (``bad_utf8``) and a last line without a line
terminator is kept (``cut_mid_line``), both recorded in the ``damage`` frame.

Streams up to 64 MiB are read whole and every line is kept. Longer ones (a 2 GiB stdout, a TORCH_LOGS=+dynamo
stderr) and gzip files are read in bounded memory by :mod:`aoti_trace.ingest.text.stream`.
"""

from __future__ import annotations

import gzip
import re
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import polars as pl

from aoti_trace.model.errors import InputError
from aoti_trace.model.frames import Frames, empty
from aoti_trace.ingest.text import lines as L
from aoti_trace.ingest.text.asserts import device_asserts_frame
from aoti_trace.ingest.text.faults import faults_frame
from aoti_trace.ingest.text.printer import printer_frame
from aoti_trace.ingest.text.tracebacks import exceptions_frame

STREAMS = ("stderr", "stdout")
# faulthandler ends its dump with this line and no newline; a file ending there was not cut
FH_LAST = re.compile(r"^(?:\[(?:rank|default)\d+\]:)?Extension modules: .*\(total: \d+\)\s*$")


def read_stream(path: Path, stream: str, run_id: str) -> Frames:
    """Read one captured stream (``Path('-')``: standard input; ``.gz``: gzip) into frames."""
    return read_streams([(path, stream, run_id)])[0]


def read_streams(items: list[tuple[Path, str, str]]) -> list[Frames]:
    """The frames of each ``(path, stream, run_id)``, as :func:`read_stream` of each gives them. The lines of all the
    streams read whole are classified in one pass (:func:`aoti_trace.ingest.text.lines.classify_many`), which costs about
    what one stream costs when they are small (``aoti-trace triage`` reads a batch of runs this way)."""
    out: list[Frames | None] = [None] * len(items)
    texts: list[tuple[int, _Text]] = []
    for k, (path, stream, run_id) in enumerate(items):
        got = _load(path, stream, run_id)
        if isinstance(got, Frames):
            out[k] = got
        else:
            texts.append((k, got))
    for (k, _), frames in zip(texts, _parse([t for _, t in texts])):
        out[k] = frames
    return [f if f is not None else Frames() for f in out]


@dataclass
class _Text:
    """A stream read whole: its bytes, and the damage found while reading them (a damaged gzip stream)."""

    data: bytes
    stream: str
    run_id: str
    path: str
    damage: list[dict[str, Any]] = field(default_factory=list)


def _load(path: Path, stream: str, run_id: str) -> Frames | _Text:
    """A stream's bytes, or its frames when it is read in chunks (a long file, standard input or a pipe)."""
    if stream not in STREAMS:
        raise ValueError(f"stream must be one of {STREAMS}, not {stream!r}")
    from aoti_trace.ingest.text import stream as text_stream

    damage: list[dict[str, Any]] = []
    if str(path) == "-":
        data = sys.stdin.buffer.read(text_stream.WHOLE_MAX + 1)
        if len(data) > text_stream.WHOLE_MAX:
            return text_stream.read_chunked(sys.stdin.buffer, data, stream, run_id, str(path))
    else:
        try:
            if text_stream.is_long(Path(path)):
                return text_stream.read_long_file(Path(path), stream, run_id)
            if Path(path).exists() and not Path(path).is_file() and not Path(path).is_dir():
                with open(path, "rb") as fh:  # a pipe (--stderr <(cmd)): as long as it is, like standard input
                    data = fh.read(text_stream.WHOLE_MAX + 1)
                    if len(data) > text_stream.WHOLE_MAX:
                        return text_stream.read_chunked(fh, data, stream, run_id, str(path))
            else:
                data = Path(path).read_bytes()
        except FileNotFoundError:
            raise InputError(f"no such file: {path}") from None
        except IsADirectoryError:
            raise InputError(f"{path} is a folder, not a captured {stream} file") from None
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror}") from None
        if data[:2] == b"\x1f\x8b":
            data, detail = _gunzip(data)
            if detail:
                damage.append(_damage(run_id, str(path), None, "truncated_payload", 1, detail))
    return _Text(data, stream, run_id, str(path), damage)


def _gunzip(data: bytes) -> tuple[bytes, str | None]:
    """Decompress as much as possible of a (possibly truncated or corrupt) gzip stream."""
    try:
        return gzip.decompress(data), None
    except (OSError, EOFError, zlib.error) as exc:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out = d.decompress(data)
        except zlib.error:
            out = b""
        return out, f"gzip stream is damaged ({exc}); analysed the {len(out)} bytes that could be decompressed"


def _damage(run_id: str, path: str, lineno: int | None, kind: str, count: int, detail: str) -> dict[str, Any]:
    return {"run_id": run_id, "path": path, "lineno": lineno, "kind": kind, "count": count, "detail": detail}


def decode(data: bytes) -> tuple[str, int | None, int]:
    """UTF-8 decode, lossily. Returns the text, the 1-based line of the first bad byte (or None) and the count of
    undecodable sequences."""
    try:
        return data.decode("utf-8"), None, 0
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        bad = text.count("\ufffd") - data.count("\ufffd".encode())
        return text, data.count(b"\n", 0, exc.start) + 1, max(bad, 1)


def clipped_damage(run_id: str, path: str, lineno: int | None, count: int) -> dict[str, Any]:
    """The damage row for ``count`` lines cut to :data:`lines.MAX_LINE_CHARS` characters, the first at ``lineno``."""
    return _damage(run_id, path, lineno, "line_clipped", count,
                   f"{count} line(s) longer than {L.MAX_LINE_CHARS} characters: only their first "
                   f"{L.MAX_LINE_CHARS} characters were analysed")


def read_text_bytes(data: bytes, stream: str, run_id: str, path: str = "-") -> Frames:
    """Parse captured ``stream`` text given as bytes; ``path`` is recorded in every row."""
    return _parse([_Text(data, stream, run_id, path)])[0]


def _exception_rows() -> pl.Expr:
    c = pl.col
    return c("_tb_head") | c("_tb_cause") | c("_tb_context") | c("_in_tb") | c("_exc") | (c("_exc_owner") >= 0)


# each assembler, and the rows without which it returns its empty frame (it is called only on files that have some)
ASSEMBLED: tuple[tuple[str, Callable[[pl.DataFrame], pl.DataFrame], Callable[[], pl.Expr]], ...] = (
    ("exceptions", exceptions_frame, _exception_rows),
    ("device_asserts", device_asserts_frame, lambda: pl.col("kind") == "device_assert"),
    ("faults", faults_frame,
     lambda: pl.col("kind").is_in(["faulthandler", "terminate"]) | pl.col("_what") | pl.col("_elsewhere")),
    ("printer", printer_frame, lambda: pl.col("kind") == "printer"),
)


def _parse(texts: list[_Text]) -> list[Frames]:
    """The frames of each text: decoded, split and checked one by one, classified all at once, then assembled per
    text (each text's rows are a slice of the classified frame)."""
    files: list[tuple[list[str], str, str, str]] = []
    damages: list[list[dict[str, Any]]] = []
    for t in texts:
        run_id, path, stream = t.run_id, t.path, t.stream
        text, bad_line, bad_count = decode(t.data)
        lines, complete = L.split_lines(text)
        damage: list[dict[str, Any]] = []
        if bad_line is not None:
            damage.append(_damage(run_id, path, bad_line, "bad_utf8", bad_count,
                                  f"{bad_count} invalid UTF-8 sequence(s), replaced by U+FFFD; first on line {bad_line}"))
        if not complete and not FH_LAST.match(lines[-1]):
            damage.append(_damage(run_id, path, len(lines), "cut_mid_line", 1,
                                  f"the last line has no line terminator: the {stream} capture may have been cut "
                                  f"mid-line ({len(lines[-1])} characters: {lines[-1][:80]!r})"))
        lines, clipped, first_clipped = L.clip_long_lines(lines)
        if clipped:
            damage.append(clipped_damage(run_id, path, (first_clipped or 0) + 1, clipped))
        files.append((lines, stream, run_id, path))
        damages.append(damage + t.damage)
    if not files:
        return []
    df = L.classify_many(files)
    public = L.public(df)
    # the files that have rows for each assembler (the others get its empty frame, as the assembler would give)
    if len(files) > 1 and df.height:
        wanted = df.select(*(pl.col("_f").filter(rows()).unique().implode().alias(name)
                             for name, _, rows in ASSEMBLED)).row(0)
        need = [set(w) for w in wanted]
    else:
        need = [{0}] * len(ASSEMBLED)
    # the exceptions of every file in one pass (most files of a failed run have some): split per file below
    by_file: dict[int, pl.DataFrame] = {}
    if len(files) > 1 and need[0]:
        excs = exceptions_frame(df)
        if "_f" in excs.columns:
            by_file = {int(key[0]): part for key, part in
                       excs.partition_by("_f", as_dict=True, include_key=False, maintain_order=True).items()}
    out = []
    start = 0
    for k, (lines, *_rest) in enumerate(files):
        n = len(lines)
        frames = Frames()
        frames.add("lines", public.slice(start, n) if len(files) > 1 else public)
        if n:
            part = df.slice(start, n) if len(files) > 1 else df
            for (name, assemble, _), files_with_rows in zip(ASSEMBLED, need):
                if name == "exceptions" and len(files) > 1:
                    frames.add(name, by_file.get(k, empty(name)))
                else:
                    frames.add(name, assemble(part) if k in files_with_rows else empty(name))
        if damages[k]:
            frames.add("damage", pl.DataFrame(damages[k], infer_schema_length=None))
        out.append(frames)
        start += n
    return out
