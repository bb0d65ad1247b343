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
from pathlib import Path
from typing import Any

import polars as pl

from aoti_trace.model.errors import InputError
from aoti_trace.model.frames import Frames
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
    frames = read_text_bytes(data, stream, run_id, str(path))
    if damage:
        frames.add("damage", pl.DataFrame(damage))
    return frames


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
    text, bad_line, bad_count = decode(data)
    lines, complete = L.split_lines(text)
    frames = Frames()
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
    df = L.classify(lines, stream, run_id, path)
    frames.add("lines", L.public(df))
    if df.height:
        frames.add("exceptions", exceptions_frame(df))
        frames.add("device_asserts", device_asserts_frame(df))
        frames.add("faults", faults_frame(df))
        frames.add("printer", printer_frame(df))
    if damage:
        frames.add("damage", pl.DataFrame(damage, infer_schema_length=None))
    return frames
