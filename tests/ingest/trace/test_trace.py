"""read_trace on real TORCH_TRACE captures (fixtures/cases, fixtures/traces) and on damaged copies derived from them."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import polars as pl
import pytest

from aoti_trace.model.frames import SCHEMAS, schema
from aoti_trace.ingest.trace.reader import payload_md5_ok, payload_text, read_payload, read_trace
from aoti_trace.ingest.trace.index import index_exact, index_fast

ROOT = Path(__file__).resolve().parents[3]
CASES = ROOT / "fixtures" / "cases"
DAMAGED = ROOT / "fixtures" / "damaged"
TRACE_FRAMES = ("events", "compiles", "artifacts", "stacks", "damage")


def traces(folder: Path) -> list[Path]:
    return sorted(folder.glob("dedicated_log_torch_trace_*.log*"))


def read(folder: Path, **kw):
    return read_trace(traces(folder), folder.parent.name if folder.name == "trace" else folder.name, **kw)


def damage(frames) -> dict[str, dict]:
    return {r["kind"]: r for r in frames["damage"].iter_rows(named=True)}


def header_count(path: Path) -> int:
    """Independent count: lines that start a record (not TAB, not blank)."""
    return sum(1 for line in path.read_bytes().split(b"\n") if line and not line.startswith(b"\t"))


# cases whose process never wrote a TORCH_TRACE file (e.g. a load-only failure) have an empty trace folder
CASES_WITH_TRACE = sorted(p.parent.name for p in CASES.glob("*/trace") if traces(p))


@pytest.mark.parametrize("case", CASES_WITH_TRACE)
def test_real_cases_parse_cleanly(case):
    folder = CASES / case / "trace"
    frames = read(folder)
    for name in TRACE_FRAMES:
        assert frames[name].schema == schema(name), name
    assert frames["damage"].filter(pl.col("kind") != "incomplete_compile").is_empty()
    assert frames["events"].height == sum(header_count(p) for p in traces(folder))
    # every payload verified against its has_payload MD5 (small files are checked fully)
    ev = frames["events"].filter(pl.col("md5").is_not_null())
    assert ev.height > 0 and ev["md5_ok"].all()


def test_payload_roundtrip_matches_md5_and_tabs_stripped():
    frames = read(CASES / "ok_compile_load_run" / "trace")
    wrapper = frames["artifacts"].filter(pl.col("name") == "inductor_aot_wrapper_code").row(0, named=True)
    text = payload_text(wrapper)
    md5 = frames["events"].filter(pl.col("lineno") == wrapper["lineno"])["md5"][0]
    assert hashlib.md5(text.encode()).hexdigest() == md5
    assert "AOTInductorModel" in text and not text.startswith("\t")
    tv = frames["artifacts"].filter(pl.col("name") == "torch_version").row(0, named=True)
    assert json.loads(read_payload(tv["path"], tv["payload_offset"], tv["payload_length"]))["pytorch_version"]


def test_ok_compile_row():
    frames = read(CASES / "ok_compile_load_run" / "trace")
    c = frames["compiles"].row(0, named=True)
    assert frames["compiles"].height == 1
    assert (c["kind"], c["status"], c["api"]) == ("aoti", "ok", "aoti_compile_and_package")
    assert re.search(r"ok_compile_load_run/repro\.py:\d+$", c["user_frame"])
    repro_line = int(c["user_frame"].rsplit(":", 1)[1])
    src = (CASES / "ok_compile_load_run" / "repro.py").read_text().splitlines()[repro_line - 1]
    assert "aoti_compile_and_package" in src
    assert c["device_key"] == "cpu" and c["pytorch_version"].startswith("2.")
    assert c["duration_s"] > 0 and c["end_time_us"] > c["start_time_us"]
    assert c["compile_id"] is None and c["nan_asserts"] is False


def test_failed_compile_carries_fail_reason():
    frames = read(CASES / "cpp_compile_error" / "trace")
    c = frames["compiles"].row(0, named=True)
    assert c["status"] == "failed" and c["fail_type"] == "InductorError"
    assert c["fail_reason"].startswith("CppCompileError") and "\n" in c["fail_reason"]
    # the compiler the repro configured (cpp.cxx = (<dir>/cxx_wrapper.sh,)) is reported from inductor_config
    assert c["cxx"].endswith("/cxx_wrapper.sh")


def test_two_aoti_compiles_in_one_process_are_two_sessions():
    folder = ROOT / "fixtures" / "traces" / "two_aoti" / "trace"
    frames = read(folder)
    c = frames["compiles"]
    assert c["session"].to_list() == [0, 1]
    assert c["status"].to_list() == ["ok", "ok"] and c["kind"].to_list() == ["aoti", "aoti"]
    ev = frames["events"]
    metrics = ev.filter(pl.col("event") == "compilation_metrics")
    assert metrics["session"].to_list() == [0, 1]
    # every record of session 1 comes after the first compilation_metrics, and each session has its own C++ dump
    assert ev.filter(pl.col("session") == 1)["lineno"].min() > metrics["lineno"][0]
    dumps = ev.filter(pl.col("name") == "inductor_aot_wrapper_code")
    assert dumps["session"].to_list() == [0, 1]


def test_export_failure_session_is_export_kind():
    frames = read(CASES / "export_error" / "trace")
    c = frames["compiles"].row(0, named=True)
    assert (c["kind"], c["api"], c["status"]) == ("export", "export", "incomplete")
    assert "incomplete_compile" not in damage(frames)  # no compile was attempted: not damage


def test_two_ranks_from_file_names_and_stacks_resolved():
    frames = read(CASES / "two_rank" / "trace")
    assert sorted(frames["events"]["rank"].unique().to_list()) == [0, 1]
    st = frames["stacks"]
    assert st.height > 0 and st["filename"].null_count() == 0
    assert not st["filename"].str.starts_with("<str ").any()  # every interned id resolved per file
    user = st.filter(pl.col("is_user"))
    assert user["filename"].str.ends_with("repro.py").all()
    assert st.filter(~pl.col("is_user"))["filename"].str.contains("torch").any()


@pytest.mark.parametrize("case", CASES_WITH_TRACE)
def test_fast_and_exact_index_agree(case):
    for path in traces(CASES / case / "trace"):
        fast = index_fast(str(path), keep_text=True)
        exact = index_exact(str(path), keep_text=True)
        assert fast.equals(exact)


def test_fast_index_without_morsel_offsets_falls_back_to_one_cumulative_sum(monkeypatch):
    from aoti_trace.ingest.trace import index as trace_index

    folder = CASES / "two_rank" / "trace"
    want = [index_exact(str(p), keep_text=False) for p in traces(folder)]
    monkeypatch.setattr(trace_index._MorselOffsets, "offsets", lambda self, hdr: None)
    assert all(index_fast(str(p), keep_text=False).equals(w) for p, w in zip(traces(folder), want))


def test_morsel_offsets_need_contiguous_complete_morsels():
    from aoti_trace.ingest.trace.index import _MorselOffsets

    hdr = pl.DataFrame({"lineno": [1, 4, 6], "local": [0, 7, 3]})
    m = _MorselOffsets()
    m.parts = [(4, 3, 50), (1, 3, 40)]  # lines 1-3 (40 bytes) and 4-6, seen out of order
    assert m.offsets(hdr).to_list() == [0, 47, 43]
    m.parts = [(1, 3, 40), (5, 2, 50)]  # line 4 missing
    assert m.offsets(hdr) is None


@pytest.mark.parametrize("case", ["two_rank", "missing_kwarg_at_call", "two_aoti"])
def test_stacks_interned_one_set_per_distinct_stack_per_file(case):
    # missing_kwarg_at_call logs a stack twice; two_aoti logs the same stacks in two sessions
    folder = CASES / case / "trace" if (CASES / case).exists() else ROOT / "fixtures" / "traces" / case / "trace"
    frames = read(folder)
    st, ev = frames["stacks"], frames["events"]
    sets = st.group_by("path", "stack", maintain_order=True).agg(
        pl.col("records").unique(), pl.col("lineno").unique(), pl.col("depth"), pl.col("filename"), pl.col("line"))
    assert sets["records"].list.len().eq(1).all() and sets["records"].list.first().min() >= 1
    assert all(d == list(range(len(d))) for d in sets["depth"].to_list())  # outermost first, complete
    # ids 0.. per file in order of first appearance (one set of frames each)
    for _, ids, firsts in sets.group_by("path", maintain_order=True).agg(
            pl.col("stack"), pl.col("lineno").list.first()).iter_rows():
        assert ids == list(range(len(ids))) and firsts == sorted(firsts)
    # events.stack names the stack of every record that logged one: counts and first lines agree
    uses = ev.filter(pl.col("stack").is_not_null()).group_by("path", "stack", maintain_order=True).agg(
        pl.len().alias("n"), pl.col("lineno").first())
    got = sets.select("path", "stack", pl.col("records").list.first().alias("n"),
                      pl.col("lineno").list.first().cast(pl.Int64))
    assert got.sort("path", "stack").equals(uses.with_columns(pl.col("n").cast(pl.Int32)).sort("path", "stack"))
    logged = sum(sum(1 for line in p.read_bytes().split(b"\n") if b'"stack": [' in line and not line.startswith(b"\t"))
                 for p in traces(folder))
    assert uses["n"].sum() == logged


def test_cheap_mode_checks_only_the_last_payload():
    frames = read(CASES / "ok_compile_load_run" / "trace", verify=False)
    md5 = frames["events"].filter(pl.col("md5").is_not_null())["md5_ok"]
    assert md5.null_count() == md5.len() - 1 and md5.drop_nulls().to_list() == [True]
    row = frames["events"].filter(pl.col("md5").is_not_null()).row(0, named=True)
    assert payload_md5_ok(row["path"], row["payload_offset"], row["payload_length"], row["md5"])


# ------------------------------------------------------------------------------------------ damaged inputs
def test_truncated_mid_line():
    frames = read(DAMAGED / "truncated_mid_line")
    d = damage(frames)
    full = read(CASES / "cpp_compile_error" / "trace")
    cut_at = full["compiles"]["lineno"][0]  # the compilation_metrics line
    # every record up to the cut is kept, the cut header too (as a partial record)
    assert frames["events"]["lineno"].to_list() == full["events"].filter(pl.col("lineno") <= cut_at)["lineno"].to_list()
    assert frames["events"]["event"][-1] == "compilation_metrics"
    assert d["truncated_line"]["lineno"] == cut_at
    assert frames["compiles"]["status"].to_list() == ["incomplete"]
    assert "incomplete_compile" in d
    assert frames["events"].filter(pl.col("md5").is_not_null())["md5_ok"].all()


def test_truncated_payload():
    frames = read(DAMAGED / "truncated_payload")
    d = damage(frames)
    bad = frames["events"].filter(pl.col("md5_ok") == False)  # noqa: E712
    assert bad["name"].to_list() == ["inductor_aot_wrapper_code"]
    assert d["truncated_payload"]["lineno"] == bad["lineno"][0]
    assert "md5_mismatch" not in d and frames["compiles"]["status"].to_list() == ["incomplete"]
    partial = payload_text(bad.row(0, named=True))  # the partial C++ is still readable
    assert partial.startswith("\n#include <torch/csrc/inductor/aoti_include/cpu.h>") and 2500 < len(partial) < 3000


def test_bad_utf8_recovers_everything_else():
    frames = read(DAMAGED / "bad_utf8")
    full = read(CASES / "cpp_compile_error" / "trace")
    d = damage(frames)
    assert set(d) == {"bad_utf8", "md5_mismatch"}
    assert d["bad_utf8"]["lineno"] == d["md5_mismatch"]["lineno"]
    assert frames["events"].drop("md5_ok").equals(full["events"].drop("md5_ok").with_columns(
        pl.lit("bad_utf8").alias("run_id"), pl.lit(frames["events"]["path"][0]).alias("path")))
    assert frames["compiles"]["fail_type"].to_list() == ["InductorError"]


def test_schema_drift_nulls_only_the_drifted_field():
    frames = read(DAMAGED / "schema_drift")
    d = damage(frames)
    assert "start_time_us" in d["schema_drift"]["detail"]
    c = frames["compiles"].row(0, named=True)
    assert c["start_time_us"] is None and c["status"] == "failed" and c["end_time_us"] is not None


def test_gzip_equals_plain():
    gz = read(DAMAGED / "gz")
    plain = read(CASES / "cpp_compile_error" / "trace")
    cols = [c for c in SCHEMAS["events"][1] if c not in ("run_id", "path")]
    assert gz["events"].select(cols).equals(plain["events"].select(cols))
    assert gz["damage"].is_empty()
    row = gz["artifacts"].filter(pl.col("name") == "inductor_aot_wrapper_code").row(0, named=True)
    assert "AOTInductorModel" in payload_text(row)


def test_crlf_uses_exact_offsets():
    crlf = read(DAMAGED / "crlf")
    plain = read(CASES / "export_error" / "trace")
    assert crlf["events"]["event"].to_list() == plain["events"]["event"].to_list()
    assert crlf["events"].filter(pl.col("md5").is_not_null())["md5_ok"].all()
    assert crlf["damage"].is_empty()


def test_envelope_edits():
    frames = read(DAMAGED / "envelope_edits")
    d = damage(frames)
    assert {"bad_json", "unknown_event", "orphan_payload"} <= set(d)
    assert "artifact_v9" in d["unknown_event"]["detail"]
    assert d["orphan_payload"]["count"] == 5  # the torch_version JSON payload lines
    assert frames["events"].height == header_count(traces(DAMAGED / "envelope_edits")[0])


def test_stray_line_and_empty_file():
    frames = read(DAMAGED / "stray_line")
    assert damage(frames)["bad_header"]["lineno"] == 9
    assert frames["events"].height == read(CASES / "export_error" / "trace")["events"].height
    empty = read(DAMAGED / "empty")
    assert list(damage(empty)) == ["empty_file"] and empty["events"].is_empty()


def test_unreadable_file_is_damage(tmp_path):
    missing = tmp_path / "dedicated_log_torch_trace_gone.log"
    frames = read_trace([missing], "r")
    assert list(damage(frames)) == ["unreadable"]


def test_cli_frames_writes_flat_files(tmp_path):
    from click.testing import CliRunner

    from aoti_trace.cli import _register, cli

    _register()
    result = CliRunner().invoke(cli, ["frames", str(DAMAGED / "truncated_payload"), "--out", str(tmp_path),
                                      "--format", "csv"])
    assert result.exit_code == 0, result.output
    dmg = pl.read_csv(tmp_path / "damage.csv")
    assert "truncated_payload" in dmg["kind"].to_list()
    assert (tmp_path / "events.csv").exists() and not (tmp_path / "lines.csv").exists()


def test_fast_index_handles_blank_lines_and_leading_lines(tmp_path):
    """Blank lines inside records and lines before the first header: fast == exact index."""
    src = traces(CASES / "ok_compile_load_run" / "trace")[0].read_bytes()
    lines = src.split(b"\n")
    first_payload = next(i for i, line in enumerate(lines) if line.startswith(b"\t"))
    lines.insert(first_payload + 1, b"")  # blank line inside a payload
    lines.insert(first_payload, b"")  # blank line between a header and its payload
    edited = b"\n\t1\n" + b"\n".join(lines)  # a leading blank line and an orphan payload line
    path = tmp_path / "dedicated_log_torch_trace_edit.log"
    path.write_bytes(edited)
    fast, exact = index_fast(str(path), keep_text=True), index_exact(str(path), keep_text=True)
    assert fast.equals(exact)
    assert fast.filter(pl.col("lineno").is_null())["pay_lines"].to_list() == [1]  # the orphan before the first header


def test_offset_drift_falls_back_to_exact(tmp_path):
    """Invalid UTF-8 in a payload shifts the decoded widths: the fast index notices and the exact one is used."""
    from aoti_trace.ingest.trace.index import Inexact, index_file

    src = traces(CASES / "ok_compile_load_run" / "trace")[0].read_bytes()
    at = src.index(b"\n\t") + 2
    path = tmp_path / "dedicated_log_torch_trace_drift.log"
    path.write_bytes(src[:at] + b"\xff" + src[at:])
    with pytest.raises(Inexact):
        index_fast(str(path), keep_text=False)
    idx, how = index_file(str(path), path.stat().st_size, keep_text=False)
    assert how.startswith("exact") and idx.equals(index_exact(str(path), keep_text=False))
