"""Multi-rank runs: ranks on findings, identical findings of many ranks as one, a short report for 256 ranks.

The 256-rank folder is DERIVED in tmp_path from the real capture fixtures/cases/two_rank_one_fails (mp.spawn, two
ranks; rank 1 fed a (3, 9) input to a (3, 8) package and raised, rank 0 was SIGTERMed mid-compile):

* trace/: ranks 0-127 are copies of rank 1's trace (the rank that failed), ranks 128-255 copies of rank 0's (the
  killed one); only the rank is renumbered: in the file name (``rank_N_``) and in each record's ``"rank": N``;
* stderr.txt: the real stderr's first four lines, then, for each failing rank in a seeded shuffled order (the
  order in which parallel processes would reach the shared log), rank 1's own lines: its ``[rank1]:[W1130 ...]``
  line and the traceback that mp.spawn re-printed under ``-- Process 1 terminated with the following error:``,
  each prefixed with ``[rankN]:`` as torch's launcher prefixes worker output; then the parent's lines as captured
  (its copy of the traceback unprefixed, as in the original);
* manifest.json: copied unchanged.
"""

from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

import pytest

from aoti_trace.pipeline import analyze
from aoti_trace.report.text import render_text

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "fixtures/cases/two_rank_one_fails"


def make_256_ranks(dest: Path, seed: int = 7) -> list[int]:
    """Build the derived folder (module docstring); returns the failing ranks in the order they were written."""
    dest.mkdir(parents=True)
    shutil.copy(SRC / "manifest.json", dest / "manifest.json")
    (dest / "trace").mkdir()
    failed_src = next((SRC / "trace").glob("*rank_1_*.log")).read_text()
    killed_src = next((SRC / "trace").glob("*rank_0_*.log")).read_text()
    for r in range(256):
        text, old = (failed_src, 1) if r < 128 else (killed_src, 0)
        name = f"dedicated_log_torch_trace_rank_{r}_{'d' if r < 128 else 'k'}{r:05d}.log"
        (dest / "trace" / name).write_text(text.replace(f'"rank": {old},', f'"rank": {r},'))
    lines = (SRC / "stderr.txt").read_text().split("\n")
    own = [ln for ln in lines if ln.startswith("[rank1]:")]
    start = lines.index("-- Process 1 terminated with the following error:") + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("RuntimeError: mat1"))
    block = [ln.removeprefix("[rank1]:") for ln in own] + lines[start:end + 1]
    order = list(range(128))
    random.Random(seed).shuffle(order)
    out = lines[:4]
    for r in order:
        out += [f"[rank{r}]:{ln}" for ln in block]
    out += [ln for ln in lines[4:] if not ln.startswith("[rank1]:")]
    (dest / "stderr.txt").write_text("\n".join(out))
    return order


@pytest.mark.slow
def test_256_ranks_one_finding_with_rank_set_and_first_rank_in_under_40_lines(tmp_path):
    order = make_256_ranks(tmp_path / "ranks256")
    analysis = analyze([tmp_path / "ranks256"])
    primary = analysis.primary
    assert primary is not None and primary.family == "shape_mismatch"
    assert primary.ranks == list(range(128))
    assert primary.first_rank == order[0] != 0  # the first block in the shared log, not the lowest rank
    assert sum(f.rule_id == primary.rule_id for f in analysis.findings) == 1
    text = render_text(analysis)
    assert len(text.splitlines()) < 40, text
    assert f"ranks 0-127, first failed: rank {order[0]}" in text
    assert "ranks 0-127 session 0: aoti_compile_and_package ok" in text
    assert "ranks 128-255 session 0: aoti_compile_and_package incomplete" in text
    assert re.search(r"log damage: incomplete_compile x128 in ranks 128-255, first at \S+rank_128_", text)
    assert "256 compile sessions, ranks 0-255" in text


def test_ranks_from_default_prefixes_of_real_torchrun_output():
    # tests/data/text/ranks_tee.stderr.txt: real torchrun --tee output, two ranks failing differently
    analysis = analyze([], stderr=ROOT / "tests/data/text/ranks_tee.stderr.txt")
    ranked = {f.message: f.ranks for f in analysis.findings if f.ranks}
    assert any(r == [0] for r in ranked.values()), analysis.findings
    assert all(len(r) == 1 for r in ranked.values())  # different errors stay apart


def test_single_process_run_has_no_ranks():
    analysis = analyze([ROOT / "fixtures/cases/shape_mismatch_unchecked"])
    assert analysis.findings and all(f.ranks == [] and f.first_rank is None for f in analysis.findings)


def test_torchrun_log_dir_ranks_from_attempt_folders(tmp_path):
    # DERIVED from the real torchrun --tee output tests/data/text/ranks_tee.stderr.txt: each worker's lines
    # ([defaultN]: prefix removed) written to <log_dir>/attempt_0/N/stderr.log, the layout of torchrun --log-dir
    text = (ROOT / "tests/data/text/ranks_tee.stderr.txt").read_text().splitlines()
    for n in (0, 1):
        d = tmp_path / "logs" / "attempt_0" / str(n)
        d.mkdir(parents=True)
        own = [ln.removeprefix(f"[default{n}]:") for ln in text if ln.startswith(f"[default{n}]:")]
        (d / "stderr.log").write_text("\n".join(own) + "\n")
    analysis = analyze([tmp_path / "logs"])
    by_run = {f.run_id: f.ranks for f in analysis.findings if f.ranks}
    assert by_run == {"attempt_0/0": [0], "attempt_0/1": [1]}, analysis.findings


# ---------------------------------------------------------------------------------------------- collective failures
DIST = ROOT / "fixtures/distributed"


def test_nccl_timeouts_after_another_ranks_failure_are_its_consequences():
    # fixtures/distributed/nccl_after_crash: DERIVED from two real captures (its README): rank 1's AOTI failure,
    # a real NCCL watchdog timeout as ranks 0 and 2
    analysis = analyze([DIST / "nccl_after_crash"])
    primary = analysis.primary
    assert (primary.rule_id, primary.ranks, primary.first_rank) == ("AOTI-E005", [1], 1)
    assert primary.fields["consequences"] == "0, 2"
    rest = {f.rule_id: f for f in analysis.findings if not f.primary}
    assert rest["AOTI-N001"].ranks == [0, 2] and rest["AOTI-N001"].fields["consequence_of"] == "1"
    # the watchdog's abort is its own 'terminate called ... what(): [PG ...] Watchdog caught collective operation
    # timeout', which N001 explains: no separate fatal-signal finding (AOTI-S002 v2)
    assert "AOTI-S002" not in rest
    text = render_text(analysis)
    assert "rank 1  failed first; then ranks 0, 2 as a consequence" in text
    assert "(a consequence of rank 1's failure)" in text


def test_nccl_watchdog_timeout_alone_is_the_primary_finding():
    analysis = analyze([DIST / "nccl_watchdog_timeout"])
    primary = analysis.primary
    assert primary.rule_id == "AOTI-N001" and primary.fields["op"] == "ALLREDUCE" and primary.ranks == [0]
    assert all("consequence_of" not in f.fields and "consequences" not in f.fields for f in analysis.findings)
    assert "AOTI-N004" not in {f.rule_id for f in analysis.findings}  # torchrun's summary: a carrier, dropped


def test_per_rank_captures_of_one_launch_are_one_job():
    # torchrun started one capture per rank: rank 0's gloo failure is a consequence of rank 1's, across runs
    analysis = analyze([DIST / "rank_captures"])
    assert (analysis.primary.rule_id, analysis.primary.run_id, analysis.primary.ranks) == ("AOTI-E005", "rank1", [1])
    gloo = [f for f in analysis.findings if f.rule_id == "AOTI-N003"]
    assert gloo and all(f.ranks == [0] and f.fields["consequence_of"] == "1" for f in gloo)


def test_rank_from_the_capture_manifest_when_the_lines_carry_none(tmp_path):
    # DERIVED from the real capture rank_captures/rank1: torch's '[rank1]:' prefix removed from its stderr (as
    # torch versions without that prefix print it); the manifest's RANK=1 is then the only rank
    from aoti_trace.model.ranks import manifest_ranks

    src = DIST / "rank_captures/rank1"
    dest = tmp_path / "rank1"
    shutil.copytree(src, dest)
    (dest / "stderr.txt").write_text((src / "stderr.txt").read_text().replace("[rank1]:", ""))
    analysis = analyze([dest])
    assert manifest_ranks(analysis.frames) == {"rank1": 1}
    assert analysis.primary.rule_id == "AOTI-E005" and analysis.primary.ranks == [1]


def test_ranks_that_compiled_differently_are_one_divergence_finding():
    # real torchrun run: rank 1 recompiled the torch.compile'd MLP and packaged a wider model
    analysis = analyze([DIST / "two_rank_diverge"])
    (div,) = [f for f in analysis.findings if f.rule_id == "AOTI-N005"]
    assert div.ranks == [1] and div.severity == "warning" and analysis.primary is None
    assert div.message == ("Ranks compiled differently: rank 1 vs rank 0: 3 compiled graphs instead of 2, "
                           "compile ids [0/1] extra, different guards, different generated code")


def test_ranks_that_compiled_the_same_have_no_divergence():
    # both real two-rank captures: identical compiles (object ids in guards differ per process, and are masked);
    # in two_rank_one_fails rank 0 was killed mid-compile, which is not a divergence
    for case in ("two_rank", "two_rank_one_fails"):
        analysis = analyze([ROOT / "fixtures/cases" / case])
        assert analysis.frames["divergence"].is_empty()
        assert not any(f.rule_id == "AOTI-N005" for f in analysis.findings)
