"""Long stderr/stdout read in chunks (aoti_trace/ingest/text/stream.py, issue 12).

Inputs are real captures (tests/data/text, fixtures/cases) and streams derived from them by repeating them byte
for byte, which is what a long log of a retrying job looks like. The chunk sizes are made small so that the
chunked path runs on small files; the production sizes are measured in bench/RESULTS.md.
"""

from __future__ import annotations

import gzip
import io
import sys
from pathlib import Path

import polars as pl
import pytest

from aoti_trace.pipeline import analyze
from aoti_trace.ingest.text import stream as TS
from aoti_trace.ingest.text.reader import read_stream

REPO = Path(__file__).resolve().parents[3]
DATA = REPO / "tests" / "data" / "text"
CASES = REPO / "fixtures" / "cases"


@pytest.fixture
def small_chunks(monkeypatch):
    """Every stream goes through the chunked path, 16 KiB at a time, keeping 20 head and 20 tail lines."""
    monkeypatch.setattr(TS, "WHOLE_MAX", 0)
    monkeypatch.setattr(TS, "CHUNK", 16 << 10)
    monkeypatch.setattr(TS, "CUT_WINDOW", 8 << 10)
    monkeypatch.setattr(TS, "HEAD_LINES", 20)
    monkeypatch.setattr(TS, "TAIL_LINES", 20)


def _findings(case: Path) -> list[tuple[str, str, str]]:
    return [(f.rule_id, f.severity, f.message) for f in analyze([case]).findings]


@pytest.mark.parametrize("case", ["cpp_compile_error", "cuda_illegal_memory_access", "export_numpy_in_forward",
                                  "noisy_success", "two_rank_one_fails", "cuda_printer_level2"])
def test_chunked_read_finds_what_the_whole_read_finds(case, monkeypatch):
    whole = _findings(CASES / case)
    monkeypatch.setattr(TS, "WHOLE_MAX", 0)
    monkeypatch.setattr(TS, "CHUNK", 4 << 10)
    monkeypatch.setattr(TS, "CUT_WINDOW", 2 << 10)
    monkeypatch.setattr(TS, "HEAD_LINES", 10)
    monkeypatch.setattr(TS, "TAIL_LINES", 10)
    assert _findings(CASES / case) == whole


def _repeated(tmp_path: Path, name: str, times: int) -> tuple[Path, bytes]:
    unit = (DATA / name).read_bytes()
    data = unit * times
    path = tmp_path / "stderr.txt"
    path.write_bytes(data)
    return path, data


def test_long_stream_keeps_head_tail_and_failures_and_reports_the_rest(tmp_path, small_chunks):
    # torch's +inductor,output_code log (mostly generated code and info lines) around one real AOTI failure
    noise = (DATA / "aoti_output_code.stderr.txt").read_bytes()
    failure = (DATA / "aoti_oob.stderr.txt").read_bytes()
    data = noise * 3 + failure + noise * 3
    path = tmp_path / "stderr.txt"
    path.write_bytes(data)
    whole_lines = data.decode().split("\n")[:-1]
    f = read_stream(path, "stderr", "r")
    lines = f["lines"]
    n = len(whole_lines)
    kept = lines.get_column("lineno").to_list()
    assert kept == sorted(set(kept))
    assert kept[:20] == list(range(1, 21)) and kept[-20:] == list(range(n - 19, n + 1))
    # line numbers are those of the whole stream
    for lineno, text in lines.filter(pl.col("kind") == "traceback").select("lineno", "text").rows():
        assert whole_lines[lineno - 1].endswith(text)
    # the failure is there, whole: the same exceptions as reading the failure alone
    alone = read_stream(DATA / "aoti_oob.stderr.txt", "stderr", "r")["exceptions"]
    got = f["exceptions"]
    offset = noise.count(b"\n") * 3
    assert got.select("exc_type", "message", "frames").rows() == alone.select("exc_type", "message", "frames").rows()
    assert (got.get_column("lineno") - offset).to_list() == alone.get_column("lineno").to_list()
    # what was left out is reported, by kind
    (row,) = f["damage"].filter(pl.col("kind") == "lines_skipped").rows(named=True)
    assert row["count"] == n - lines.height > 0
    assert "output_code" in row["detail"] and str(n) in row["detail"]
    assert row["lineno"] == 21


@pytest.mark.parametrize("window", [8 << 10, 64])  # 64: the cut cannot see the Traceback header, the carry helps
def test_a_traceback_across_a_chunk_boundary_stays_whole(tmp_path, monkeypatch, small_chunks, window):
    monkeypatch.setattr(TS, "CUT_WINDOW", window)
    failure = (DATA / "torch_chained.stderr.txt").read_bytes()
    filler = (DATA / "aoti_output_code.stderr.txt").read_bytes()
    alone = read_stream(DATA / "torch_chained.stderr.txt", "stderr", "r")["exceptions"]
    first = failure.index(b"Traceback")
    # put the traceback's first line a few hundred bytes before the end of the first chunk, for several offsets
    for before in (10, 200, 600):
        pad = filler[: TS.CHUNK - before - first]
        pad = pad[: pad.rfind(b"\n") + 1]
        path = tmp_path / f"s{before}.txt"
        path.write_bytes(pad + failure + filler[:4096])
        got = read_stream(path, "stderr", "r")["exceptions"]
        cols = ["exc_type", "message", "chain", "chained_by", "is_final", "frames"]
        assert got.select(cols).rows() == alone.select(cols).rows(), before


def test_error_looking_plain_lines_survive(tmp_path, small_chunks):
    filler = (DATA / "aoti_output_code.stderr.txt").read_bytes()
    shell = (DATA / "shell_segv.stderr.txt").read_bytes()  # ends with bash's 'Segmentation fault' (a plain line)
    path = tmp_path / "stderr.txt"
    path.write_bytes(filler + shell + filler)
    texts = read_stream(path, "stderr", "r")["lines"].get_column("text").to_list()
    assert any("Segmentation fault" in t for t in texts)


def test_gzip_and_stdin_read_the_same(tmp_path, small_chunks, monkeypatch):
    path, data = _repeated(tmp_path, "aoti_oob.stderr.txt", 8)
    plain = read_stream(path, "stderr", "r")
    gz = tmp_path / "stderr.txt.gz"
    gz.write_bytes(gzip.compress(data))
    zipped = read_stream(gz, "stderr", "r")

    class Stdin:
        buffer = io.BytesIO(data)

    monkeypatch.setattr(sys, "stdin", Stdin)
    piped = read_stream(Path("-"), "stderr", "r")
    for other in (zipped, piped):
        for name in ("lines", "exceptions", "faults"):
            assert other[name].drop("path").equals(plain[name].drop("path")), name
    assert plain["exceptions"].height == 8


def test_truncated_gzip_is_damage_not_an_error(tmp_path, small_chunks):
    _, data = _repeated(tmp_path, "aoti_oob.stderr.txt", 8)
    gz = tmp_path / "cut.gz"
    gz.write_bytes(gzip.compress(data)[: -200])
    f = read_stream(gz, "stderr", "r")
    assert "truncated_payload" in f["damage"].get_column("kind").to_list()
    assert f["exceptions"].height >= 1


def test_a_line_longer_than_a_chunk_is_split_and_reported(tmp_path, small_chunks):
    path = tmp_path / "stderr.txt"
    path.write_bytes(b"RuntimeError: " + b"x" * (3 * TS.CHUNK) + b"\n" + (DATA / "aoti_dtype.stderr.txt").read_bytes())
    f = read_stream(path, "stderr", "r")
    kinds = f["damage"].get_column("kind").to_list()
    assert "line_split" in kinds


def test_the_cut_prefers_a_block_start():
    text = b"x\n" * 100 + b"a\nb\n" + b"Traceback (most recent call last):\n  File \"f.py\", line 1, in g\n" + b"  y\n" * 5
    cut = TS.cut_point(text)
    assert text[cut:].startswith(b"Traceback")
    # no block start: between two non-indented lines, never before an indented one
    text = b"A\nB\n  c\n  d\n"
    assert text[TS.cut_point(text):].startswith(b"B\n")
    assert TS.cut_point(b"no newline at all") is None


def test_short_streams_keep_every_line(tmp_path):
    path = tmp_path / "stderr.txt"
    data = (DATA / "aoti_output_code.stderr.txt").read_bytes()
    path.write_bytes(data)
    f = read_stream(path, "stderr", "r")
    assert f["lines"].height == data.count(b"\n")
    assert "lines_skipped" not in f["damage"].get_column("kind").to_list()


def test_a_long_pipe_is_read_in_chunks(tmp_path, monkeypatch):
    import os
    import threading

    monkeypatch.setattr(TS, "WHOLE_MAX", 64 << 10)
    monkeypatch.setattr(TS, "CHUNK", 16 << 10)
    monkeypatch.setattr(TS, "CUT_WINDOW", 8 << 10)
    monkeypatch.setattr(TS, "HEAD_LINES", 20)
    monkeypatch.setattr(TS, "TAIL_LINES", 20)
    data = (DATA / "aoti_output_code.stderr.txt").read_bytes() + (DATA / "aoti_oob.stderr.txt").read_bytes()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def write():
        with open(fifo, "wb") as out:
            out.write(data)

    writer = threading.Thread(target=write)
    writer.start()
    f = read_stream(fifo, "stderr", "r")
    writer.join(timeout=30)
    assert "lines_skipped" in f["damage"].get_column("kind").to_list()
    assert f["exceptions"].height >= 1


def test_a_small_gzip_that_decompresses_to_a_long_stream_is_chunked(tmp_path, monkeypatch):
    monkeypatch.setattr(TS, "WHOLE_MAX", 64 << 10)
    monkeypatch.setattr(TS, "CHUNK", 16 << 10)
    monkeypatch.setattr(TS, "CUT_WINDOW", 8 << 10)
    data = (DATA / "aoti_output_code.stderr.txt").read_bytes() * 4 + (DATA / "aoti_oob.stderr.txt").read_bytes()
    gz = tmp_path / "stderr.txt.gz"
    gz.write_bytes(gzip.compress(data))
    assert gz.stat().st_size < TS.WHOLE_MAX < len(data)
    f = read_stream(gz, "stderr", "r")
    assert "lines_skipped" in f["damage"].get_column("kind").to_list()
    assert f["exceptions"].height >= 1


def test_over_the_limit_the_first_and_the_last_half_of_the_lines_that_matter_are_kept(tmp_path, small_chunks,
                                                                                      monkeypatch):
    monkeypatch.setattr(TS, "MAX_KEPT_LINES", 600)  # each half spans ~3 chunks of 16 KiB (~110 such lines each)
    path, data = _repeated(tmp_path, "aoti_oob.stderr.txt", 30)
    frames = read_stream(path, "stderr", "r")
    kept = frames["lines"].get_column("lineno").to_list()
    monkeypatch.setattr(TS, "WHOLE_MAX", 1 << 40)
    whole = read_stream(path, "stderr", "r")["lines"]  # every line, read at once
    matters = whole.filter(
        ~pl.col("kind").is_in(TS.BULK_KINDS) | pl.col("level").is_in(("W", "E", "F", "C")).fill_null(False)
        | (pl.col("kind").is_in(("plain", "torch_log")) & pl.col("text").str.contains(TS.ERROR_LOOKING))
    ).get_column("lineno").to_list()
    n = whole.height
    assert len(matters) > 2 * 600  # the last half rolls over many chunks
    expected = {*range(1, 21), *range(n - 19, n + 1), *matters[:300], *matters[-300:]}
    assert kept == sorted(expected)
    (row,) = frames["damage"].filter(pl.col("kind") == "lines_skipped").rows(named=True)
    assert row["count"] == n - len(expected)
