"""Long trace logs in bounded memory: the plain chromium_event records beyond the head and the tail are counted
(damage ``records_skipped``), every other record is kept, and the frames built from what is kept are those of the
whole log (index.Squeeze, reader.SQUEEZE_BYTES)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from aoti_trace.ingest.trace import index, reader
from aoti_trace.ingest.trace.reader import read_trace

ROOT = Path(__file__).resolve().parents[3]
LOGS = sorted(ROOT.glob("fixtures/cases/*/trace/dedicated_log_torch_trace_*.log")) + sorted(
    ROOT.glob("fixtures/traces/*/trace/dedicated_log_torch_trace_*.log")) + sorted(
    ROOT.glob("fixtures/damaged/*/dedicated_log_torch_trace_*.log"))


def plain_chromium(path: Path) -> int:
    """Independent count of the records Squeeze may leave out: chromium_event headers with a payload MD5 and no
    compile id or stack (whole-line checks, not the indexer's regexes)."""
    lines = path.read_bytes().split(b"\n")
    n = 0
    for i, line in enumerate(lines):
        if b'{"chromium_event": ' in line[:120] and not line.startswith(b"\t") and line.endswith(b'"}') \
                and b'"has_payload": ' in line and b'"stack": [' not in line \
                and not any(k in line for k in (b'"frame_id": ', b'"compiled_autograd_id": ', b'"attempt": ')) \
                and i + 1 < len(lines) and lines[i + 1] != b"":
            n += 1
    return n


@pytest.mark.parametrize("path", LOGS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_squeezed_index_is_the_whole_index_less_the_counted_records(path, monkeypatch):
    monkeypatch.setattr(index, "BATCH_ROWS", 7)  # many batches: records and their payload ranges across batch ends
    try:
        whole = index.index_fast(str(path), keep_text=False)
    except (index.Inexact, pl.exceptions.PolarsError):
        pytest.skip("the exact path indexes this file (nothing is squeezed there)")
    squeeze = index.Squeeze(keep=3)
    part = index.index_fast(str(path), keep_text=False, squeeze=squeeze)
    kept = whole.filter(pl.col("lineno").is_in(part["lineno"].implode()) | pl.col("lineno").is_null())
    assert kept.drop("rec").equals(part.drop("rec"))  # same rows, payload ranges included (rec: renumbered)
    assert part.height + squeeze.skipped == whole.height
    assert squeeze.total == plain_chromium(path)
    # kept: the first 3 and last 3 (and the file's last record, always kept)
    assert squeeze.total - squeeze.skipped in (min(squeeze.total, 6), min(squeeze.total, 7))
    if squeeze.skipped:
        gone = whole.filter(~pl.col("lineno").is_in(part["lineno"].implode()) & pl.col("lineno").is_not_null())
        assert gone["event"].cast(pl.String).unique().to_list() == ["chromium_event"]
        assert (squeeze.first, squeeze.last) == (gone["lineno"].min(), gone["lineno"].max())


@pytest.mark.parametrize("case", ["two_rank_one_fails", "killed_mid_compile", "cuda_autotune_error", "lowering_error"])
def test_a_long_log_keeps_the_frames_of_the_whole_log_and_reports_what_it_left_out(case, monkeypatch):
    paths = sorted((ROOT / "fixtures" / "cases" / case / "trace").glob("dedicated_log_torch_trace_*.log"))
    whole = read_trace(paths, case)
    monkeypatch.setattr(reader, "SQUEEZE_BYTES", 0)  # every file counts as long
    monkeypatch.setattr(reader, "SMALL_FILE", 0)  # and is read alone
    monkeypatch.setattr(index, "KEEP_CHROMIUM", 2)
    part = read_trace(paths, case)
    # sessions, compiles (failed and incomplete ones with their status) and stacks: as from the whole log
    for name in ("compiles", "stacks"):
        assert part[name].equals(whole[name]), name
    assert whole["compiles"]["status"].is_in(["failed", "incomplete"]).any()
    # every record but plain chromium_event ones is kept, with the columns of the whole log
    ev, all_ev = part["events"], whole["events"]
    key = ["path", "lineno"]
    assert ev.equals(all_ev.join(ev.select(key), on=key, how="semi", maintain_order="left"))
    assert all_ev.filter(pl.col("event") != "chromium_event").join(ev, on=key, how="anti").is_empty()
    # what was left out is counted, per file, never silently
    skipped = part["damage"].filter(pl.col("kind") == "records_skipped")
    per_file = all_ev.join(ev.select("path", "lineno"), on=["path", "lineno"], how="anti").group_by("path").len()
    assert dict(skipped.select("path", "count").iter_rows()) == dict(per_file.iter_rows()) != {}
    assert part["damage"].filter(pl.col("kind") != "records_skipped").equals(whole["damage"])
    assert skipped["detail"].str.contains("counted, not kept").all()


def _long_log(tmp_path: Path, copies: int, failed: int) -> Path:
    """A log of the records of fixtures/traces/two_aoti repeated ``copies`` times (two ok AOTI compile sessions
    each; the str table repeats with the same ids), the compilation_metrics of copy ``failed`` made a failure."""
    src = next((ROOT / "fixtures" / "traces" / "two_aoti" / "trace").glob("dedicated_log_torch_trace_*.log"))
    text = src.read_text()
    failing = "".join(line.replace('"fail_type": null', '"fail_type": "RuntimeError"', 1)
                      if '{"compilation_metrics": ' in line[:120] else line for line in text.splitlines(keepends=True))
    assert failing != text
    parts = [failing if i == failed else text for i in range(copies)]
    out = tmp_path / "dedicated_log_torch_trace_long.log"
    out.write_text("".join(parts))
    return out


@pytest.mark.parametrize("compact_rows", [1, 7, 50])
def test_a_long_log_counts_the_sessions_that_finished_ok_in_the_middle(tmp_path, monkeypatch, compact_rows):
    path = _long_log(tmp_path, copies=6, failed=3)
    whole = read_trace([path], "r", verify=False)  # (a long log is read so)
    c = whole["compiles"]
    assert c.height == 12 and c["status"].to_list() == ["ok"] * 6 + ["failed"] * 2 + ["ok"] * 4
    monkeypatch.setattr(reader, "SQUEEZE_BYTES", 0)
    monkeypatch.setattr(reader, "SMALL_FILE", 0)
    monkeypatch.setattr(reader, "COMPACT_ROWS", compact_rows)
    monkeypatch.setattr(index, "KEEP_CHROMIUM", 10**9)  # only sessions are squeezed here
    monkeypatch.setattr(index, "BATCH_ROWS", 5)
    part = read_trace([path], "r", verify=False)
    kept = part["compiles"]["session"].to_list()
    # the first and the failed sessions are kept, and the last one; ok sessions in the middle are left out
    assert {0, 6, 7, 11} <= set(kept) and len(kept) < 12
    assert part["compiles"].equals(c.filter(pl.col("session").is_in(kept)))
    ev, all_ev = part["events"], whole["events"]
    key = ["path", "lineno"]
    assert ev.equals(all_ev.join(ev.select(key), on=key, how="semi", maintain_order="left"))  # same rows, sessions
    # every record of a kept session is there; of the others only str records and a stack's first record
    assert all_ev.filter(pl.col("session").is_in(kept)).join(ev, on=key, how="anti").is_empty()
    extra = ev.filter(~pl.col("session").is_in(kept))
    assert extra.filter(pl.col("event") != "str")["stack"].is_not_null().all()
    assert part["stacks"].equals(whole["stacks"])  # the uses of the left-out records are counted
    skipped = part["damage"].filter(pl.col("kind") == "records_skipped")
    assert skipped["count"].to_list() == [all_ev.height - ev.height]
    assert skipped["detail"].str.contains("compile sessions that finished ok").all()
    assert not skipped["detail"].str.contains("plain chromium_event").any()  # (KEEP_CHROMIUM: all kept)
    assert part["damage"].filter(pl.col("kind") != "records_skipped").equals(whole["damage"])
