"""Reading trace files together (``read_groups``: one index query and one build over a batch of small files) gives
exactly the frames of reading each file alone, concatenated in order: on every real and damaged trace of the
repository, on damaged copies made here (the hostile inputs of tests/fuzz and the index edge cases), and on mixtures
of all of them (good, damaged, gzip, several ranks, several runs, large files that are read alone)."""

from __future__ import annotations

import gzip
import random
import shutil
from pathlib import Path

import polars as pl
import pytest

from aoti_trace.ingest import parallel
from aoti_trace.ingest.trace import index, reader
from aoti_trace.ingest.trace.reader import read_groups, read_trace
from aoti_trace.model.frames import Frames

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "fixtures"
TRACE_FRAMES = ("events", "compiles", "artifacts", "stacks", "damage")
# every TORCH_TRACE file of the fixtures (cases, traces, holdout, ladder, minify, distributed, public, damaged...)
REAL = sorted(p for p in FIXTURES.rglob("*torch_trace*") if p.is_file() and p.name.endswith((".log", ".log.gz")))
CPP = next((FIXTURES / "cases" / "cpp_compile_error" / "trace").glob("dedicated_log_torch_trace_*.log"))
SMALL = FIXTURES / "cases" / "missing_custom_op" / "trace" / "dedicated_log_torch_trace_cskortti.log"


def alone(groups: list[list[tuple[Path, str]]], verify: bool | None = None) -> list[Frames]:
    """Each file read on its own (one file per read_trace call: index_file and a build of one file), each group's
    frames concatenated in order, as Frames appends them."""
    out = []
    for group in groups:
        frames = Frames()
        for path, run_id in group:
            frames.merge(read_trace([path], run_id, verify=verify))
        out.append(frames)
    return out


def assert_same(got: list[Frames], want: list[Frames]) -> None:
    assert len(got) == len(want)
    for g, (a, b) in enumerate(zip(got, want)):
        assert set(a.tables) == set(b.tables), g
        for name in TRACE_FRAMES:
            x, y = a[name], b[name]
            assert x.schema == y.schema, (g, name)
            assert x.equals(y), (g, name)


def edited(tmp: Path) -> list[Path]:
    """Damaged and unusual copies of real traces: the hostile inputs of tests/fuzz and the index's edge cases."""
    src = CPP.read_bytes()
    lines = src.split(b"\n")
    first_payload = next(i for i, line in enumerate(lines) if line.startswith(b"\t"))
    blank = list(lines)
    blank.insert(first_payload + 1, b"")  # blank line inside a payload
    blank.insert(first_payload, b"")  # blank line between a header and its payload
    head, rest = src.split(b"\n", 1)
    fields = head.split(b" ")
    fields[2] = b"1" + b"0" * 3000  # an overlong pid
    at = src.index(b"\n\t") + 2
    cases = {
        "blank_and_leading": b"\n\t1\n" + b"\n".join(blank),
        "ends_with_blank_lines": src + b"\n\n",
        "no_final_newline": src.rstrip(b"\n"),
        "only_payload_lines": b"\tx\n\ty\n",
        "only_blank_lines": b"\n\n\n",
        "one_header": lines[0] + b"\n",
        "drift_ff": src[:at] + b"\xff" + src[at:],  # invalid UTF-8: the exact index
        "crlf": src.replace(b"\n", b"\r\n"),
        "x01_first_line": b"\x01" + src,
        "x01_payload": src[:at] + b"\x01" + src[at:],
        "nul": src[:at] + b"\x00" + src[at:],
        "bom": b"\xef\xbb\xbf" + src,
        "fffd_header": src.replace(b'{"str": ["', '{"str": ["\ufffd'.encode(), 1),
        "surrogate": src.replace(b'{"str": ["', b'{"str": ["\\ud800', 1),
        "nested_stack": src.replace(b'"stack": [', b'"stack": [' + b"[" * 5000, 1),
        "nested_str": src.replace(b'{"str": ["', b'{"str": [' + b"[" * 5000 + b'"', 1),
        "overlong_pid": b" ".join(fields) + b"\n" + rest,
        "truncated": src[: len(src) // 2],
        "cut_header": src[: src.index(b'{"compilation_metrics"') + 200],
        "unknown_event": src.replace(b'] {"artifact"', b'] {"brand_new_event"', 2),
        "no_md5": src.replace(b'"has_payload"', b'"has_pay1oad"', 3),
        "empty": b"",
        "bzip2": b"BZh91AY&SY" + src[:100],
    }
    out = []
    for name, data in cases.items():
        d = tmp / name
        d.mkdir()
        path = d / f"dedicated_log_torch_trace_rank_{len(out) % 3}_{name}.log"
        path.write_bytes(data)
        out.append(path)
    gz = tmp / "gz"
    gz.mkdir()
    (gz / "dedicated_log_torch_trace_ok.log.gz").write_bytes(gzip.compress(SMALL.read_bytes()))
    (gz / "dedicated_log_torch_trace_cut.log.gz").write_bytes(gzip.compress(src)[:-200])  # truncated stream
    (gz / "dedicated_log_torch_trace_named_log.log").write_bytes(gzip.compress(src))  # gzip named .log
    out += sorted(gz.iterdir())
    out += [tmp / "missing" / "dedicated_log_torch_trace_gone.log", tmp]  # not there; a folder
    return out


@pytest.mark.slow
def test_every_real_trace_alone_and_together():
    """All real and damaged fixture traces in one group, and each in its own group: one batch (the large ones
    alone), frames equal to reading each alone."""
    assert len(REAL) > 90
    one = [[(p, "r") for p in REAL]]
    assert_same(read_groups(one), alone(one))
    each = [[(p, f"run{i}")] for i, p in enumerate(REAL)]
    assert_same(read_groups(each), alone(each))


@pytest.mark.parametrize("verify", [False, True])
def test_verify_modes(verify):
    groups = [[(p, "r") for p in REAL[::3]], [(p, "s") for p in REAL[1::3]]]
    assert_same(read_groups(groups, verify=verify), alone(groups, verify=verify))


@pytest.mark.slow
def test_damaged_and_unusual_files_mixed_with_good_ones(tmp_path):
    odd = edited(tmp_path)
    good = [p for p in REAL if "damaged" not in p.parts][:12]
    mixed = [p for pair in zip(odd, good * 3) for p in pair] + odd[len(good) * 3:]
    for groups in ([[(p, "r") for p in mixed]],  # one run
                   [[(p, f"run{i % 4}") for p in mixed[i::4]] for i in range(4)],  # several runs, interleaved
                   [[(p, "r")] for p in odd]):  # each alone in its group
        assert_same(read_groups(groups), alone(groups))


@pytest.mark.slow
def test_every_odd_file_next_to_a_good_one(tmp_path):
    """Each unusual file in a batch of two (the batch query holds exactly it and a good file), both orders."""
    for odd in edited(tmp_path):
        for pair in ([(SMALL, "r"), (odd, "r")], [(odd, "r"), (SMALL, "r")]):
            assert_same(read_groups([pair]), alone([pair]))


def test_batches_split_by_size(tmp_path, monkeypatch):
    """Small batches (BATCH_BYTES) and a low SMALL_FILE: files read alone between batches, in order."""
    monkeypatch.setattr(reader, "SMALL_FILE", 200_000)
    monkeypatch.setattr(reader, "BATCH_BYTES", 600_000)
    rng = random.Random(12)
    files = rng.sample(REAL, 40) + edited(tmp_path)
    rng.shuffle(files)
    groups = [[(p, f"run{i}") for p in files[i * 7:(i + 1) * 7]] for i in range(8)]
    assert_same(read_groups(groups), alone(groups))


@pytest.mark.slow
def test_many_copies_of_one_trace(tmp_path):
    """The bench's many_N folders: copies of one small trace under rank names (ranks from the file name)."""
    files = []
    for i in range(150):
        path = tmp_path / f"dedicated_log_torch_trace_rank_{i}_cskortti.log"
        shutil.copyfile(SMALL, path)
        files.append(path)
    groups = [[(p, "r") for p in files]]
    got = read_groups(groups)
    assert_same(got, alone(groups))
    assert got[0]["events"]["rank"].unique().len() == 150


@pytest.mark.slow
def test_read_traces_batches_across_runs(tmp_path, monkeypatch):
    """aoti_trace.ingest.parallel: the frames of each job, in this process and in a pool, equal reading alone."""
    jobs = [([p for p in REAL[i::5]], f"run{i}") for i in range(5)]
    want = alone([[(p, run_id) for p in paths] for paths, run_id in jobs])
    assert_same(list(parallel.read_traces(jobs, processes=1)), want)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_CPU_S", 0.0)  # these files are read faster here than by a pool
    assert_same(list(parallel.read_traces(jobs, processes=2)), want)


def test_a_pool_is_started_only_when_reading_would_take_longer_than_starting_it(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(parallel, "_read_parallel", lambda files, n: started.append(n) or [])  # record, read nothing
    jobs = [([p for p in REAL[i::5]], f"run{i}") for i in range(5)]
    list(parallel.read_traces(jobs, processes=2))
    assert started == [] and parallel.estimated_cpu_s([p for paths, _ in jobs for p in paths]) < 3
    many = [(list(REAL) * 400, "big")]  # the same files many times: ~40,000 reads
    assert parallel.estimated_cpu_s(many[0][0]) >= parallel.PARALLEL_MIN_CPU_S
    list(parallel.read_traces(many, processes=2))
    assert started == [2]


def test_batch_query_failure_reads_each_file_alone(monkeypatch):
    """If the batch query raises, every file is indexed alone: the same frames."""
    def broken(datas, keep_text):
        raise pl.exceptions.ComputeError("no")

    monkeypatch.setattr(index, "index_batch", broken)
    groups = [[(p, "r") for p in REAL[:20]]]
    assert_same(read_groups(groups), alone(groups))


def test_batch_index_rows_equal_the_index_alone():
    """index_batch: each clean file's rows are index_fast of it alone (with ``file`` set)."""
    files = [p for p in REAL if not p.name.endswith(".gz") and p.stat().st_size
             and index.clean(p.read_bytes())]
    for keep_text in (False, True):
        idx, inexact = index.index_batch([p.read_bytes() for p in files], keep_text)
        assert not inexact
        for i, p in enumerate(files):
            mine = idx.filter(pl.col("file") == i).with_columns(pl.lit(0, pl.Int32).alias("file"))
            assert mine.equals(index.index_fast(str(p), keep_text)), p
