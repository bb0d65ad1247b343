"""Fleet triage: signatures, per-run analysis in batches, both engines, the CLI.

The corpora are built in tmp_path by :mod:`aoti_trace.fleet.corpus`: byte copies of real fixture runs under varied
host/model/rank folders (derived, not invented).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from aoti_trace.cli import main
from aoti_trace.fleet.corpus import build_corpus, source_runs
from aoti_trace.fleet.signatures import add_signatures, mask
from aoti_trace.fleet.triage import analyse_batch, analyse_run, compare, run_facts, triage
from aoti_trace.discover import discover
from aoti_trace.model.ranks import rank_ranges

ROOT = Path(__file__).resolve().parents[2]


def _masked(text: str) -> str:
    return pl.DataFrame({"m": [text]}).select(mask(pl.col("m"))).item()


def test_mask_paths_numbers_addresses_hashes():
    assert _masked("mat1 and mat2 shapes cannot be multiplied (3x9 and 8x4)") == \
        "mat1 and mat2 shapes cannot be multiplied (<n>x<n> and <n>x<n>)"
    assert _masked("at /tmp/.../cl5kc2362abc.py:33 ptr 0x7f00deadbeef") == "at <path>:<n> ptr <addr>"
    assert _masked("constant 9b0c1f2e3d4a5b6c7d8e9f00 missing") == "constant <hash> missing"
    assert _masked("compiled C++/Triton checks") == "compiled C++/Triton checks"  # one slash: not a path
    assert _masked("see a/b/c.py and ./x") == "see <path> and <path>"


def test_signature_ignores_numbers_and_kernel_suffix_but_not_rule_or_words():
    df = pl.DataFrame({
        "rule_id": ["A", "A", "A", "B"],
        "message": ["bad size 3 in /tmp/x/a.py", "bad size 17 in /var/y/b.py", "bad dtype 3 in /tmp/x/a.py",
                    "bad size 3 in /tmp/x/a.py"],
        "kernel": ["triton_poi_fused_add_0", "triton_poi_fused_add_12", "triton_poi_fused_add_0", None],
        "op": [None] * 4, "exc_type": [None] * 4,
    })
    sig = add_signatures(df)["signature"].to_list()
    assert sig[0] == sig[1] and len({sig[0], sig[2], sig[3]}) == 3


def test_shape_pairs_share_one_signature():
    none = pl.Series([None] * 3, dtype=pl.String)
    df = pl.DataFrame({"rule_id": ["E"] * 3, "kernel": none, "op": none, "exc_type": none,
                       "message": ["mat1 and mat2 shapes cannot be multiplied (3x9 and 8x4)",
                                   "mat1 and mat2 shapes cannot be multiplied (64x1024 and 512x10)",
                                   "mat1 and mat2 must have the same dtype"]})
    out = add_signatures(df)
    sig = out["signature"].to_list()
    assert sig[0] == sig[1] != sig[2]
    assert "<n>x<n> and <n>x<n>" in out["template"][0]


def test_rank_ranges():
    assert rank_ranges(range(256)) == "0-255"
    assert rank_ranges([0, *range(2, 256)]) == "0, 2-255"
    assert rank_ranges([5, 3, 4, 9, None, 3, 11, 12]) == "3-5, 9, 11, 12"
    assert rank_ranges([]) == ""


def _sources(n_cases: int = 6):
    """Small real runs: the public logs and a few captured cases (two_rank_one_fails among them)."""
    public = source_runs([ROOT / "fixtures/public"])
    cases = [r for r in source_runs([ROOT / "fixtures/cases"])
             if r.root.name in ("two_rank_one_fails", "shape_mismatch_unchecked", "dtype_mismatch_checked",
                                "cuda_triton_index_oob", "killed_mid_compile", "ok_compile_load_run")][:n_cases]
    return public + cases


@pytest.mark.slow
def test_batch_equals_each_run_alone():
    runs = _sources()[::4]
    together = analyse_batch(runs)
    alone = [analyse_run(r) for r in runs]
    assert together == alone
    assert sum(1 for run, _ in together if run["primary_rule"]) >= len(runs) // 2


def test_a_batch_reads_its_traces_in_its_own_process(monkeypatch):
    """An engine worker is already one of N processes: a batch with many trace files must not start a pool."""
    from aoti_trace.ingest import parallel

    pools = []

    def no_pool(files, n):  # analyse_batch never raises: record the call instead
        pools.append(n)
        raise OSError("no pool here")

    monkeypatch.setenv(parallel.WORKERS_ENV, "4")
    monkeypatch.setattr(parallel, "PARALLEL_MIN_CPU_S", 0.0)  # outside a worker, any two files would start a pool
    monkeypatch.setattr(parallel, "_read_parallel", no_pool)
    runs = [r for r in source_runs([ROOT / "fixtures/cases"]) if r.trace_files]
    batch, files = [], 0
    for r in runs:
        batch.append(r)
        files += len(r.trace_files)
        if files >= 16:
            break
    assert files >= 16
    results = analyse_batch(batch)
    assert pools == []
    assert [row["error"] for row, _ in results] == [None] * len(batch)


def test_run_facts_from_hive_folders_and_torchrun(tmp_path):
    d = tmp_path / "host=h07" / "model=bert" / "rank=3" / "run1"
    d.mkdir(parents=True)
    shutil.copy(ROOT / "fixtures/cases/two_rank_one_fails/manifest.json", d / "manifest.json")
    (run,) = discover([tmp_path])
    facts = run_facts(run)
    assert (facts["host"], facts["model"], facts["rank"]) == ("h07", "bert", 3)
    assert facts["started"].isoformat() == "2026-11-30T05:34:07+00:00"  # the manifest's started_at
    t = tmp_path / "logs" / "attempt_0" / "12"
    t.mkdir(parents=True)
    shutil.copy(ROOT / "tests/data/text/ranks_tee.stderr.txt", t / "stderr.log")
    (run,) = discover([tmp_path / "logs"])
    assert run_facts(run)["rank"] == 12


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    dest = tmp_path_factory.mktemp("corpus")
    build_corpus(dest, 300, _sources(), hosts=20, models=6, ranks=4, seed=1)
    return dest


@pytest.mark.slow
def test_local_and_ray_engines_give_identical_signature_tables(corpus):
    ray = pytest.importorskip("ray")
    local = triage([corpus], engine="local", jobs=2)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = triage([corpus], engine="ray")
    finally:
        ray.shutdown()
    assert local.runs.height == remote.runs.height == 300
    assert_frame_equal(local.signatures, remote.signatures)
    assert_frame_equal(local.findings, remote.findings)
    sig = local.signatures
    assert sig["runs"].sum() >= 250 and sig["runs"].max() >= 4  # each source ~4 times, some rules across sources
    top = sig.row(0, named=True)
    assert top["hosts"] >= 2 and top["models"] >= 2 and top["ranks"]
    assert (sig["share"] == sig["runs"] / 300).all()
    # shape pairs such as '(3x9 and 8x4)' are templated, never kept as numbers (whether the seeded sample holds a log
    # with one changes as the corpus grows; test_shape_pairs_share_one_signature checks the folding itself)
    assert sig.filter(pl.col("template").str.contains(r"\d+x\d+ and \d+x\d+")).height == 0


def test_cli_writes_parquet_and_since_marks_changes(corpus, tmp_path, capsys):
    small = tmp_path / "small"
    shutil.copytree(corpus / "host=h001", small / "host=h001")
    with pytest.raises(SystemExit) as e:
        main(["triage", str(small), "-j", "1", "-o", str(tmp_path / "t1"), "-f", "json"])
    assert e.value.code == 0
    first = json.loads(capsys.readouterr().out)
    sigs = pl.read_parquet(tmp_path / "t1" / "signatures.parquet")
    assert first["runs"] == pl.read_parquet(tmp_path / "t1" / "runs.parquet").height > 0
    assert len(first["signatures"]) == sigs.height
    findings = pl.read_parquet(tmp_path / "t1" / "findings.parquet")
    assert set(findings["signature"].drop_nulls()) >= set(sigs["signature"])
    # drop the runs of the top signature, then compare with the earlier table
    top = sigs.row(0, named=True)
    for run_id in findings.filter(pl.col("signature") == top["signature"])["run_id"].unique():
        shutil.rmtree(small / run_id)
    with pytest.raises(SystemExit) as e:
        main(["triage", str(small), "-j", "1", "--since", str(tmp_path / "t1" / "signatures.parquet")])
    text = capsys.readouterr().out
    assert f"sig {top['signature']}  [gone]" in text
    assert "[same]" in text or "[changed" in text


def test_compare_new_changed_same_gone():
    prev = pl.DataFrame({"signature": ["a", "b", "c"], "runs": [3, 2, 1], "share": [.5, .3, .2],
                         "primary": [3, 2, 1], "rule_id": ["A", "B", "C"]})
    cur = pl.DataFrame({"signature": ["a", "b", "d"], "runs": [3, 5, 1], "share": [.3, .6, .1],
                        "primary": [3, 5, 1], "rule_id": ["A", "B", "D"]}).with_columns(
        pl.col("runs", "primary").cast(pl.UInt32))
    out = compare(cur, prev)
    assert dict(zip(out["signature"], out["change"])) == {"a": "same", "b": "changed", "d": "new", "c": "gone"}


def test_cli_user_errors_exit_2_with_one_line(tmp_path):
    cmd = [sys.executable, "-m", "aoti_trace", "triage"]
    r = subprocess.run([*cmd, str(tmp_path / "nope")], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no such file or folder" in r.stderr
    (tmp_path / "empty").mkdir()
    r = subprocess.run([*cmd, str(tmp_path / "empty")], capture_output=True, text=True)
    assert r.returncode == 2 and "no runs found" in r.stderr
    (tmp_path / "prev.parquet").write_text("not parquet")
    r = subprocess.run([*cmd, str(ROOT / "fixtures/cases/nan_assert"), "--since", str(tmp_path / "prev.parquet")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--since" in r.stderr


def _triage_of(rows: list[tuple[dict, list[dict]]]):
    from aoti_trace.fleet.triage import Triage, frames_of, signature_table

    runs, findings = frames_of(rows)
    return Triage(runs, findings, signature_table(findings, runs), "local", 1, 2.0, ["fleet"])


def _finding_row(run_id: str, message: str, **kw) -> dict:
    return {"run_id": run_id, "rule_id": "AOTI-E005", "rule_name": "unchecked-matmul-shapes",
            "family": "shape_mismatch", "severity": "error", "primary": True, "title": "A matmul got bad shapes",
            "message": message, "remedy": "Rerun with `AOTI_RUNTIME_CHECK_INPUTS=1`.", "kernel": None,
            "op": None, "exc_type": None, "evidence": None, "ranks": [], "first_rank": None, **kw}


def test_html_page_has_one_row_per_signature_with_its_facts_and_escapes_log_text():
    from datetime import datetime, timezone

    from aoti_trace.fleet.html import render_html

    t0, t1 = datetime(2026, 11, 30, 5, 6, tzinfo=timezone.utc), datetime(2026, 12, 1, 10, 21, tzinfo=timezone.utc)
    run = {"root": "fleet", "model": "m1", "exit_code": 1, "findings": 1, "primary_rule": "AOTI-E005", "error": None}
    rows = [
        ({**run, "run_id": "host=h1/r1", "host": "h1", "rank": 0, "started": t0},
         [_finding_row("host=h1/r1", "shapes cannot be multiplied (3x9 and 8x4)")]),
        ({**run, "run_id": "host=h2/r2", "host": "h2", "rank": 3, "started": t1},
         [_finding_row("host=h2/r2", "shapes cannot be multiplied (5x7 and 2x2)")]),
        ({**run, "run_id": "host=h2/<b>r3</b>", "host": "h2", "rank": 1, "started": t1},
         [_finding_row("host=h2/<b>r3</b>", "<script>alert(1)</script> failed", rule_id="AOTI-X001")]),
    ]
    result = _triage_of(rows)
    page = render_html(result)
    assert page.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "<script" not in page and "&lt;script&gt;alert(" in page  # the template masks the rest
    assert "host=h2/&lt;b&gt;r3&lt;/b&gt;" in page  # run folders are log text too
    assert page.count("<tbody>") == 1 and page.count("<tr>") == 1 + result.signatures.height == 3
    matmul = result.signatures.filter(pl.col("rule_id") == "AOTI-E005").row(0, named=True)
    assert matmul["runs"] == 2
    assert "shapes cannot be multiplied (&lt;n&gt;x&lt;n&gt; and &lt;n&gt;x&lt;n&gt;)" in page
    assert f"sig {matmul['signature']}" in page and "66.7%" in page and "33.3%" in page
    assert "2026-11-30 05:06<br>2026-12-01 10:21" in page  # first / last seen
    assert "2 hosts, 1 models" in page and "ranks 0, 3" in page
    assert "<code>host=h1/r1</code>" in page  # the example run: the earliest
    assert "<p>Rerun with <code>AOTI_RUNTIME_CHECK_INPUTS=1</code>.</p>" in page  # the remedy, as Markdown
    assert "3 runs, 3 with a primary finding" in page and "<th>since</th>" not in page
    since = compare(result.signatures, result.signatures.filter(pl.col("rule_id") == "AOTI-E005")
                    .with_columns(pl.lit(1, pl.UInt32).alias("runs")))
    page = render_html(result, since)
    assert "<th>since</th>" in page and "changed (was 1)" in page and ">new</td>" in page


def test_cli_html_format(corpus, tmp_path, capsys):
    small = tmp_path / "small"
    shutil.copytree(corpus / "host=h002", small / "host=h002")
    with pytest.raises(SystemExit) as e:
        main(["triage", str(small), "-j", "1", "-f", "html"])
    assert e.value.code == 0
    page = capsys.readouterr().out
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    runs = sum(1 for p in (small / "host=h002").glob("*/*/*") if p.is_dir())
    assert f"triage: {runs} runs" in page and '<table class="list">' in page
