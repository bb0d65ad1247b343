"""Damaged and hostile inputs *derived from the real fixture captures*, and the in-process pipeline they go through.

Nothing here is a fixture: every input is a copy of a genuine capture (``fixtures/cases``, ``fixtures/public``,
``fixtures/traces``, ``fixtures/packages``) with a described mutation applied. :data:`SEEDS` lists the captures;
:func:`apply` applies one mutation (byte flips, truncation, line duplication/removal, CRLF, invalid UTF-8, NULs,
long runs of one character, deeply nested JSON, hostile text, gzip / truncated gzip, and edits of the entries of a
``.pt2``); :func:`analyse` runs discovery -> frames -> rules -> every report format, the way ``aoti-trace
analyze`` does, under a time limit (:func:`time_limit`).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import shutil
import signal
import struct
import time
import zlib
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"

# Real captures the fuzzer starts from: small and varied (stderr-only public logs, capture folders with traces,
# packages, a multi-rank trace, a gzip trace). Paths relative to fixtures/.
SEEDS = (
    "cases/dtype_mismatch_checked",
    "cases/export_error",
    "cases/cpp_compile_error",
    "cases/killed_mid_compile",
    "cases/nan_assert",
    "cases/cuda_autotune_error",
    "cases/corrupt_so_segfault",
    "cases/two_rank_one_fails",
    "cases/cuda_triton_index_oob",
    "cases/missing_custom_op",
    "cases/bad_torch_logs",
    "public/litgpt_774_triton_oob",
    "public/pytorch_146524_cuda_oom",
    "public/torchchat_709_create_container",
    "damaged/gz",
    "packages/linear.pt2",
    "packages/pickle_weights.pt2",
    "packages/dynamic.pt2",
    "packages/custom_op.pt2",
)
INPUT_SUFFIXES = (".log", ".gz", ".txt", ".json", ".pt2")
SKIP_NAMES = {"expected.yaml", "repro.py", "make_input.py", "build_package.py", "cxx_wrapper.sh", "README.md"}

# text that must never become markup, control sequences or crashes when it appears in a log
HOSTILE = (
    b"<img src=x onerror=alert(1)>", b"</details><script>alert(1)</script>", b"[click](http://evil.example)",
    b"![img](http://evil.example/x.png)", b"\x1bc\x1b(0\x1b]0;title\x07\x08\x08", "\u009b31m\u202e".encode(),
    b'"\\ud800"', b"9" * 5000, b"```\n<b>fence</b>\n```", b"`` ` ``", b"| a | b |\n|---|---|",
    b'  File "a.py", line 1, in f' + b" " * 2000 + b"x", b"Fatal Python error: " + b" " * 2000 + b"x",
    b"x.wrapper.cpp:" + b"a" * 3000, b'{"str": ["\\ud800", 1]}', b"Infinity NaN -1e999",
)
RUN_CHARS = (b" ", b"a", b'"', b"[", b"{", b"\\", b"`", b"<", b"\t", b"0", b":", b"/", b"\x1b", b"\n", b"\r", b"*")


def seed_files(seed: str) -> list[Path]:
    """The input files of a seed capture (a folder's inputs, or the file itself)."""
    src = FIXTURES / seed
    if src.is_file():
        return [src]
    return sorted(p for p in src.rglob("*") if p.is_file() and p.name not in SKIP_NAMES
                  and p.suffix in INPUT_SUFFIXES)


def materialise(seed: str, dest: Path) -> Path:
    """Copy a seed capture to ``dest``; returns the path to analyse."""
    src = FIXTURES / seed
    if src.is_file():
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / src.name)
        return dest / src.name
    for f in seed_files(seed):
        out = dest / f.relative_to(src)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, out)
    return dest


# ---------------------------------------------------------------------------------------------- mutations
@dataclass(frozen=True)
class Mutation:
    """One edit: ``op`` with integer parameters (positions are taken modulo the data length)."""

    op: str
    a: int = 0
    b: int = 0
    c: int = 0

    def __str__(self) -> str:
        return f"{self.op}({self.a}, {self.b}, {self.c})"


OPS = ("flip", "truncate", "dup_line", "drop_line", "crlf", "bad_utf8", "nul", "run", "nest", "inject", "splice",
       "gzip", "gzip_cut")


def _line_bounds(data: bytes, k: int) -> tuple[int, int]:
    """(start, end) of line ``k`` (modulo the number of lines), the end after its newline."""
    lines = data.split(b"\n")
    idx = k % len(lines)
    s = sum(len(x) + 1 for x in lines[:idx])
    return s, min(len(data), s + len(lines[idx]) + 1)


def mutate_bytes(data: bytes, m: Mutation) -> bytes:
    """Apply one byte-level mutation (gzip ops are handled by :func:`apply`, they rename the file)."""
    n = len(data)
    pos = m.a % (n + 1)
    if m.op == "flip":
        if n == 0:
            return b"\xff"
        i = m.a % n
        return data[:i] + bytes([(data[i] ^ (m.b % 255 + 1))]) + data[i + 1:]
    if m.op == "truncate":
        return data[:pos]
    if m.op in ("dup_line", "drop_line"):
        s, e = _line_bounds(data, m.a)
        if m.op == "drop_line":
            return data[:s] + data[e:]
        times = min(1 + m.b % 50, MAX_GROWTH // max(1, e - s))  # repeated dups must not compound
        return data[:e] + data[s:e] * times + data[e:]
    if m.op == "crlf":
        return data.replace(b"\n", b"\r\n") if m.b % 2 == 0 else data.replace(b"\n", b"\r")
    if m.op == "bad_utf8":
        return data[:pos] + (b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80")[m.b % 4] + data[pos:]
    if m.op == "nul":
        return data[:pos] + b"\x00" * (1 + m.b % 4096) + data[pos:]
    if m.op == "run":
        return data[:pos] + RUN_CHARS[m.b % len(RUN_CHARS)] * (1000 + m.c % 200_000) + data[pos:]
    if m.op == "nest":
        # deep nesting right after a JSON key (a trace header, a manifest, a package's JSON entry), else anywhere
        keys = [i + 3 for i in _find_all(data, b'": ', 1000)]
        at = keys[m.a % len(keys)] if keys else pos
        opener = (b"[", b'{"a":')[m.b % 2]
        return data[:at] + opener * (100 + m.c % 60_000) + data[at:]
    if m.op == "inject":
        s, _ = _line_bounds(data, m.a) if m.c % 2 == 0 else (pos, pos)
        return data[:s] + HOSTILE[m.b % len(HOSTILE)] + (b"\n" if m.c % 2 == 0 else b"") + data[s:]
    if m.op == "splice":
        # a line of another real capture (an error signature) dropped in
        other = SPLICE_LINES[m.b % len(SPLICE_LINES)]
        s, _ = _line_bounds(data, m.a)
        return data[:s] + other + data[s:]
    raise ValueError(m.op)


def _find_all(data: bytes, needle: bytes, limit: int) -> list[int]:
    out, i = [], data.find(needle)
    while i >= 0 and len(out) < limit:
        out.append(i)
        i = data.find(needle, i + 1)
    return out


def _signature_lines() -> tuple[bytes, ...]:
    lines: list[bytes] = []
    for seed in ("cases/dtype_mismatch_checked", "public/litgpt_774_triton_oob", "cases/export_error"):
        f = FIXTURES / seed / "stderr.txt"
        lines += [ln + b"\n" for ln in f.read_bytes().splitlines()[-6:] if ln.strip()]
    return tuple(lines)


SPLICE_LINES = _signature_lines()


MAX_GROWTH = 1 << 20  # bytes one mutation may add
MAX_FILE = 16 << 20  # a mutation that would make a file larger is skipped


def apply(target: Path, m: Mutation) -> Path:
    """Mutate the file ``target`` in place (a ``.pt2``: its raw bytes or one of its entries); returns its path
    (gzip ops rename it to ``.gz``)."""
    data = target.read_bytes()
    if m.op in ("gzip", "gzip_cut"):
        if target.suffix == ".gz" and m.op == "gzip":
            try:
                data = gzip.decompress(data)
            except (OSError, EOFError, zlib.error):  # an earlier mutation broke it: compress it as it is
                pass
        packed = gzip.compress(data, mtime=0)
        if m.op == "gzip_cut":
            packed = packed[: 10 + m.a % max(1, len(packed) - 10)]
        out = target if target.suffix in (".gz", ".pt2") else target.with_name(target.name + ".gz")
        out.write_bytes(packed)
        if out != target:
            target.unlink()
        return out
    out = mutate_entry(data, m) if target.suffix == ".pt2" and m.c % 3 != 0 else mutate_bytes(data, m)
    if len(out) <= MAX_FILE:
        target.write_bytes(out)
    return target


def mutate_entry(pkg: bytes, m: Mutation) -> bytes:
    """A ``.pt2`` rewritten with one entry (a text or JSON entry, chosen by ``m.b``) mutated by ``m``; a package an
    earlier mutation already broke gets ``m`` on its raw bytes."""
    try:
        return _rezip(pkg, m)
    except Exception:  # noqa: BLE001 - zipfile on a broken archive: any error means "mutate the raw bytes"
        return mutate_bytes(pkg, m)


def _rezip(pkg: bytes, m: Mutation) -> bytes:
    with zipfile.ZipFile(io.BytesIO(pkg)) as zin:
        infos = zin.infolist()
        texts = [i for i in infos if i.filename.endswith((".json", ".cpp", "archive_format", "archive_version"))]
        victim = texts[m.b % len(texts)].filename if texts else None
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zout:
            for info in infos:
                data = zin.read(info)
                if info.filename == victim:
                    data = mutate_bytes(data, Mutation(m.op, m.a, m.c // 3, m.c))
                zi = zipfile.ZipInfo(info.filename, info.date_time)
                zi.compress_type = info.compress_type
                zi.external_attr = info.external_attr
                zout.writestr(zi, data)
    return buf.getvalue()


def encrypt_flag(pkg: Path, needle: str) -> None:
    """Set the 'encrypted' flag bit of the entries whose name contains ``needle`` (local and central headers)."""
    data = bytearray(pkg.read_bytes())
    with zipfile.ZipFile(pkg) as z:
        offsets = [i.header_offset for i in z.infolist() if needle in i.filename]
    for o in offsets:
        data[o + 6] |= 1
    pos = data.find(b"PK\x01\x02")
    while pos >= 0:
        n, extra, comment = struct.unpack("<HHH", data[pos + 28:pos + 34])
        if needle in data[pos + 46:pos + 46 + n].decode("utf-8", "replace"):
            data[pos + 8] |= 1
        pos = data.find(b"PK\x01\x02", pos + 46 + n + extra + comment)
    pkg.write_bytes(bytes(data))


def replace_entry(pkg: Path, needle: str, edit) -> None:
    """Rewrite ``pkg`` with ``edit(bytes) -> bytes`` applied to the entries whose name contains ``needle``."""
    with zipfile.ZipFile(pkg) as zin:
        items = [(i, zin.read(i)) for i in zin.infolist()]
    with zipfile.ZipFile(pkg, "w") as zout:
        for info, data in items:
            zi = zipfile.ZipInfo(info.filename, info.date_time)
            zi.compress_type = info.compress_type
            zout.writestr(zi, edit(data) if needle in info.filename else data)


# ---------------------------------------------------------------------------------------------- the pipeline
class CaseTimeout(Exception):
    """A case ran past its wall-clock limit (a hang)."""


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise :class:`CaseTimeout` in the main thread after ``seconds`` of wall-clock time."""
    def fire(_sig, _frame):
        raise CaseTimeout(f"over {seconds:g} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Outcome:
    analysis: object
    reports: dict[str, str]
    wall_s: float
    cpu_s: float


def analyse(paths: list[Path], rules, **kw) -> Outcome:
    """discover -> frames -> rules -> every report format, in-process (what ``aoti-trace analyze`` runs)."""
    from aoti_trace import engine
    from aoti_trace.model.analysis import Analysis
    from aoti_trace.pipeline import build_frames, read_guides
    from aoti_trace.discover import discover
    from aoti_trace.report import FORMATS, render

    t0, c0 = time.monotonic(), time.process_time()
    runs = discover(paths, **kw)
    frames = build_frames(runs)
    findings = engine.evaluate(rules, frames)
    analysis = Analysis(runs=runs, frames=frames, findings=findings, guides=read_guides(findings, rules))
    reports = {fmt: render(analysis, fmt) for fmt in FORMATS}
    reports["text-color"] = render(analysis, "text", color=True)
    json.loads(reports["json"])  # the machine-readable formats stay valid
    for line in reports["jsonl"].splitlines():
        json.loads(line)
    json.loads(reports["sarif"])
    return Outcome(analysis, reports, time.monotonic() - t0, time.process_time() - c0)


CONTROL_BYTES = {chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F, *range(0x80, 0xA0))}


def terminal_safe(text: str, colored: bool = False) -> bool:
    """No control character but newline and tab (and, in the coloured report, the SGR sequences rich writes)."""
    if colored:
        import re

        text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return not any(c in CONTROL_BYTES for c in text)
