"""Captured stderr / stdout -> frames: ``lines``, ``exceptions``, ``device_asserts``, ``faults``, ``printer``, ``damage``.

Damaged text is never an error: undecodable bytes are replaced (``bad_utf8``) and a last line without a line
terminator is kept (``cut_mid_line``), both recorded in the ``damage`` frame.

Streams up to 64 MiB are read whole and every line is kept. Longer ones (a 2 GiB stdout, a TORCH_LOGS=+dynamo
stderr) and gzip files are read in bounded memory by :mod:`aoti_trace.ingest.text_stream`.
"""

from __future__ import annotations

import gzip
import re
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from aoti_trace.errors import InputError
from aoti_trace.frames import Frames
from aoti_trace.ingest import lines as L
from aoti_trace.ingest.asserts import device_asserts_frame
from aoti_trace.ingest.faults import faults_frame
from aoti_trace.ingest.printer import printer_frame
from aoti_trace.ingest.tracebacks import exceptions_frame

STREAMS = ("stderr", "stdout")
# faulthandler ends its dump with this line and no newline; a file ending there was not cut
FH_LAST = re.compile(r"^(?:\[(?:rank|default)\d+\]:)?Extension modules: .*\(total: \d+\)\s*$")


def read_stream(path: Path, stream: str, run_id: str) -> Frames:
    """Read one captured stream (``Path('-')``: standard input; ``.gz``: gzip) into frames."""
    return read_streams([(path, stream, run_id)])[0]


def read_streams(items: list[tuple[Path, str, str]]) -> list[Frames]:
    """The frames of each ``(path, stream, run_id)``, as :func:`read_stream` of each gives them; the lines of all
    the streams read whole are classified in one pass (:func:`aoti_trace.ingest.lines.classify_many`), which costs
    about what one stream costs when they are small (``aoti-trace triage`` reads a batch of runs this way)."""
    out: list[Frames | None] = [None] * len(items)
    texts: list[tuple[int, _Text]] = []
    for k, (path, stream, run_id) in enumerate(items):
        if stream not in STREAMS:
            raise ValueError(f"stream must be one of {STREAMS}, not {stream!r}")
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
    damage: list[dict] = field(default_factory=list)


def _load(path: Path, stream: str, run_id: str) -> Frames | _Text:
    """A stream's bytes, or its frames when it is read in chunks (a long file, standard input, a pipe)."""
    from aoti_trace.ingest import text_stream

    damage: list[dict] = []
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


def _damage(run_id: str, path: str, lineno: int | None, kind: str, count: int, detail: str) -> dict:
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


def clipped_damage(run_id: str, path: str, lineno: int | None, count: int) -> dict:
    """The damage row for ``count`` lines cut to :data:`lines.MAX_LINE_CHARS` characters, the first at ``lineno``."""
    return _damage(run_id, path, lineno, "line_clipped", count,
                   f"{count} line(s) longer than {L.MAX_LINE_CHARS} characters: only their first "
                   f"{L.MAX_LINE_CHARS} characters were analysed")


def read_text_bytes(data: bytes, stream: str, run_id: str, path: str = "-") -> Frames:
    """Parse captured ``stream`` text given as bytes; ``path`` is recorded in every row."""
    return _parse([_Text(data, stream, run_id, path)])[0]


ASSEMBLED = (("exceptions", exceptions_frame), ("device_asserts", device_asserts_frame), ("faults", faults_frame),
             ("printer", printer_frame))


def _parse(texts: list[_Text]) -> list[Frames]:
    """The frames of each text: decoded, split and checked one by one, classified and assembled all at once, then
    split again per text (``_f``: the text's index)."""
    files: list[tuple[list[str], str, str, str]] = []
    damages: list[list[dict]] = []
    for t in texts:
        run_id, path, stream = t.run_id, t.path, t.stream
        text, bad_line, bad_count = decode(t.data)
        lines, complete = L.split_lines(text)
        damage: list[dict] = []
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
    parts = {"lines": _split(L.public(df, keep_file=True), len(files))}
    if df.height:
        for name, assemble in ASSEMBLED:
            parts[name] = _split(assemble(df), len(files))
    out = []
    for k, (lines, *_rest) in enumerate(files):
        frames = Frames()
        frames.add("lines", parts["lines"][k])
        if lines:
            for name, _ in ASSEMBLED:
                frames.add(name, parts[name][k])
        if damages[k]:
            frames.add("damage", pl.DataFrame(damages[k], infer_schema_length=None))
        out.append(frames)
    return out


def _split(df: pl.DataFrame, n: int) -> list[pl.DataFrame]:
    """The rows of ``df`` per text (by ``_f``, which is dropped), for texts ``0..n-1`` (an empty frame for a text
    with no rows)."""
    if n == 1 or "_f" not in df.columns:  # one text, or no rows (an empty frame has no _f)
        return [df.drop("_f", strict=False)] * n
    by_file = df.partition_by("_f", as_dict=True, include_key=False, maintain_order=True)
    none = df.drop("_f").clear()
    return [by_file.get((k,), none) for k in range(n)]
