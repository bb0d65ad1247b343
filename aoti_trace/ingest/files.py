"""Getting bytes out of input files: what kind of file a path is, and bounded, damage-tolerant gzip.

:func:`special_file` tells a regular file from a FIFO, a device or a socket (reading those can block forever or
never end: discovery reports them as damage instead). :class:`Inflater` streams the decompressed bytes of a gzip file in chunks and never raises on bad data: a corrupt
or truncated stream ends the iteration, and everything decompressed before the damage has been yielded (a
truncated ``.log.gz`` keeps its readable records). Concatenated members and zero padding are read like
:mod:`gzip` reads them. Decompression stops, as damage, when the output passes :data:`MAX_INFLATED` bytes or
inflates more than :data:`MAX_RATIO` times the input (a gzip bomb); :attr:`Inflater.problem` says why it stopped.
Only :class:`OSError` from reading the file itself propagates.
"""

from __future__ import annotations

import os
import stat
import zlib
from collections.abc import Iterator
from typing import BinaryIO

IN_CHUNK = 1 << 20
IN_STEP = 64 << 10  # compressed bytes per decompress call (zlib loses the output of a call that fails)
SALVAGE_STEP = 64  # after a failure, the failing step is replayed this many bytes at a time
OUT_CHUNK = 4 << 20  # at most this many bytes per yielded chunk (bounded memory per step)
MAX_INFLATED = 16 << 30  # decompressed bytes of one file
MAX_RATIO = 200  # decompressed / compressed, checked once RATIO_MIN_BYTES have been produced
RATIO_MIN_BYTES = 64 << 20
GZIP_MAGIC = b"\x1f\x8b"


def special_file(st: os.stat_result) -> str | None:
    """What a non-regular, non-folder file is ('a FIFO (named pipe)', 'a character device', ...); None otherwise."""
    mode = st.st_mode
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def compressed(head: bytes) -> str | None:
    """The compression whose magic bytes start ``head`` (gzip, zlib, zstd: what Polars' CSV reader decompresses by
    itself), or None. A TORCH_TRACE log or a captured stream starts with text."""
    if head[:2] == GZIP_MAGIC:
        return "gzip"
    if head[:2] in (b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda"):
        return "zlib"
    if head[:4] == b"\x28\xb5\x2f\xfd":
        return "zstd"
    return None


class Inflater:
    """``for chunk in Inflater(fh): ...``; afterwards :attr:`problem` is None for a complete, sane stream."""

    def __init__(self, src: BinaryIO, *, limit: int = MAX_INFLATED, max_ratio: float = MAX_RATIO,
                 ratio_min: int = RATIO_MIN_BYTES) -> None:
        self.src = src
        self.limit = limit
        self.max_ratio = max_ratio
        self.ratio_min = ratio_min
        self.consumed = 0  # compressed bytes read
        self.produced = 0  # decompressed bytes yielded
        self.problem: str | None = None

    def __iter__(self) -> Iterator[bytes]:
        d: zlib._Decompress | None = zlib.decompressobj(16 + zlib.MAX_WBITS)  # None: between members
        members = 0
        while True:
            buf = self.src.read(IN_CHUNK)
            self.consumed += len(buf)
            if not buf:
                break
            for at in range(0, len(buf), IN_STEP):
                step = buf[at:at + IN_STEP]
                while step:
                    if d is None:  # a member ended: zero padding, another member, or garbage
                        step = step.lstrip(b"\x00")
                        if not step:
                            break
                        if step[:2] != GZIP_MAGIC[:len(step[:2])]:
                            self.problem = (f"data that is not gzip follows gzip member {members} (after "
                                            f"{self.produced} decompressed bytes); ignored it")
                            return
                        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    saved = d.copy()
                    try:
                        out = d.decompress(step, OUT_CHUNK)
                    except zlib.error as exc:
                        # zlib drops the output of a failing call: replay the step in small pieces from the saved
                        # state, so that everything before the damaged bytes is kept
                        yield from self._salvage(saved, step)
                        if not self.problem:
                            self.problem = (f"gzip stream damaged ({exc}); analysed the {self.produced} bytes "
                                            "decompressed before it")
                        return
                    if out:
                        yield from self._emit(out)
                        if self.problem:
                            return
                    if d.eof:
                        members += 1
                        step, d = d.unused_data, None
                    else:
                        step = d.unconsumed_tail
        if d is None:
            return
        # the input ended inside a member: flush what zlib still holds, then report the cut
        try:
            while True:
                out = d.decompress(b"", OUT_CHUNK)
                if not out:
                    break
                yield from self._emit(out)
                if self.problem:
                    return
        except zlib.error:
            pass
        if not d.eof:
            what = "empty" if self.consumed == 0 else "cut short (truncated)"
            self.problem = f"gzip stream {what}; analysed the {self.produced} bytes decompressed before the end"

    def _salvage(self, d: zlib._Decompress, data: bytes) -> Iterator[bytes]:
        for i in range(0, len(data), SALVAGE_STEP):
            piece = data[i:i + SALVAGE_STEP]
            while piece:
                try:
                    out = d.decompress(piece, OUT_CHUNK)
                except zlib.error:
                    return
                piece = d.unconsumed_tail
                if out:
                    yield from self._emit(out)
                    if self.problem:
                        return
                if d.eof:
                    return

    def _emit(self, out: bytes) -> Iterator[bytes]:
        room = self.limit - self.produced
        if len(out) > room:
            out = out[:room]
            self.problem = (f"decompression stopped at {self.limit} bytes (the limit for one file); analysed "
                            "those bytes")
        self.produced += len(out)
        if out:
            yield out
        if (self.problem is None and self.produced > self.ratio_min
                and self.produced > self.max_ratio * max(self.consumed, 1)):
            self.problem = (f"{self.consumed} compressed bytes inflated to over {self.produced} (more than "
                            f"{self.max_ratio:g} times: a gzip bomb?); decompression stopped there")


def read_range(src: BinaryIO, offset: int, length: int) -> bytes:
    """Decompressed bytes ``[offset, offset + length)`` of a gzip stream (fewer when it ends or is damaged)."""
    parts: list[bytes] = []
    pos, end = 0, offset + length
    for chunk in Inflater(src):
        nxt = pos + len(chunk)
        if nxt > offset:
            parts.append(chunk[max(0, offset - pos): end - pos])
        pos = nxt
        if pos >= end:
            break
    return b"".join(parts)
