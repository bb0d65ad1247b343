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
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        tail = b""
        between = False  # a member ended; what follows is padding, another member or garbage
        members = 0
        while True:
            if not tail:
                tail = self.src.read(IN_CHUNK)
                self.consumed += len(tail)
                if not tail:
                    break
            if between:
                tail = tail.lstrip(b"\x00")
                if not tail:
                    continue
                if tail[:1] != GZIP_MAGIC[:1] or (len(tail) > 1 and tail[:2] != GZIP_MAGIC):
                    self.problem = (f"{len(tail)}+ bytes of data that is not gzip follow gzip member {members} "
                                    f"(after {self.produced} decompressed bytes); ignored them")
                    return
                d, between = zlib.decompressobj(16 + zlib.MAX_WBITS), False
            try:
                out = d.decompress(tail, OUT_CHUNK)
            except zlib.error as exc:
                self.problem = (f"gzip stream damaged ({exc}); analysed the {self.produced} bytes decompressed "
                                "before it")
                return
            tail = d.unconsumed_tail
            if out:
                yield from self._emit(out)
                if self.problem:
                    return
            if d.eof:
                members += 1
                tail, between = d.unused_data, True
        if between:
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
