"""aoti_trace.ladder: one real ladder over a real AOTI shape mismatch (torch 2.13 CPU), plus pure helpers."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from aoti_trace.model.findings import Finding
from aoti_trace.run.ladder import (
    STAGES,
    is_definite,
    last_launched_kernel,
    not_definite_because,
    run_ladder,
)

HAS_TORCH = importlib.util.find_spec("torch") is not None
DATA = Path(__file__).parents[1] / "data" / "capture"
# Two test-only rules (a symptom asking for AOTI_RUNTIME_CHECK_INPUTS=1, and the input check's message), so the
# test does not depend on how the shipped rule library ranks this case.
RULES = DATA / "rules"


@pytest.fixture(scope="module")
def tiny_package(tmp_path_factory) -> Path:
    """Linear(8, 4) compiled for (2, 8) inputs: compiled once for the module (a real AOTI compile, ~20 s)."""
    pkg = tmp_path_factory.mktemp("pkg") / "tiny.pt2"
    subprocess.run([sys.executable, str(DATA / "tiny_aoti.py"), "compile", str(pkg)], check=True,
                   capture_output=True, timeout=600)
    return pkg


@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_ladder_turns_an_unchecked_shape_error_into_the_input_check_message(tiny_package, tmp_path):
    out = tmp_path / "ladder"
    cmd = [sys.executable, str(DATA / "tiny_aoti.py"), "bad-shape", str(tiny_package)]
    result = run_ladder(cmd, out, echo=False, rules_path=RULES)
    by_id = {s.stage.id: s for s in result.stages}
    assert [s.stage.id for s in result.stages] == [s.id for s in STAGES]

    # Stage 1: the unchecked symptom only.
    err1 = (out / "stage-1-baseline" / "stderr.txt").read_text()
    assert "mat1 and mat2 shapes cannot be multiplied (3x9 and 8x4)" in err1
    assert "unmatched dim value" not in err1
    assert by_id["1"].outcome() == "exit 1" and not by_id["1"].definite

    # Stage 2: AOTI_RUNTIME_CHECK_INPUTS=1 names the input, the dimension and both values.
    stage2 = out / "stage-2-sanity-checks"
    err2 = (stage2 / "stderr.txt").read_text()
    assert "input_handles[0]: unmatched dim value at 0, expected: 2, but got: 3" in err2
    env2 = json.loads((stage2 / "manifest.json").read_text())["env"]
    assert env2["AOTI_RUNTIME_CHECK_INPUTS"] == "1" and env2["TORCHINDUCTOR_NAN_ASSERTS"] == "1"
    assert env2["TORCHINDUCTOR_CACHE_DIR"] == str((stage2 / "inductor-cache").absolute())

    # The analysis (with the test rules): stage 1's finding is a symptom that asks for the input checks, so it is
    # not definite; stage 2's is, and the ladder stops there.
    assert by_id["1"].primary.rule_id == "AOTI-E901" and not by_id["1"].definite
    assert by_id["2"].primary.rule_id == "AOTI-E902" and by_id["2"].definite
    assert by_id["2"].primary.message == "Input 0 dimension 0 was compiled as 2 but is 3"
    assert result.decisive is by_id["2"] and result.reported is by_id["2"]
    for later in ("3", "4a", "4b"):
        assert by_id[later].skipped and by_id[later].note == "not needed"
    assert not (out / "stage-4a-kernel-names").exists()
    assert "Stopped at stage 2 (sanity-checks): Model input has a different static size" in result.table()

    table = result.table().splitlines()
    assert table[0].split()[:3] == ["stage", "flags", "outcome"]
    row1 = next(line for line in table if line.startswith("1-baseline"))
    assert row1.endswith("[shape_mismatch] (not definite: asks for AOTI_RUNTIME_CHECK_INPUTS=1)")
    row2 = next(line for line in table if line.startswith("2-sanity-checks"))
    assert "AOTI_RUNTIME_CHECK_INPUTS=1 TORCHINDUCTOR_NAN_ASSERTS=1 (fresh cache)" in row2 and "exit 1" in row2
    row3 = next(line for line in table if line.startswith("3-deterministic"))
    assert "skipped" in row3 and "not needed" in row3

    saved = json.loads((out / "ladder.json").read_text())
    assert saved["schema"] == "aoti-trace.ladder/v1"
    assert [s["stage"] for s in saved["stages"]] == [s.id for s in STAGES]
    assert saved["stages"][1]["outcome"] == "exit 1" and saved["stages"][1]["dir"] == "stage-2-sanity-checks"
    assert saved["stopped_at"] == "2" and saved["diagnosis"]["rule_id"] == "AOTI-E902"


@pytest.mark.torch  # runs `aoti-trace run` / capture: its environment probe imports torch
def test_ladder_walks_every_stage_when_nothing_is_definite_and_skips_cuda_stages_on_cpu(tmp_path):
    out = tmp_path / "ladder"
    cmd = [sys.executable, "-c", "import ctypes; ctypes.string_at(0)"]
    result = run_ladder(cmd, out, echo=False, rules_path=RULES)
    by_id = {s.stage.id: s for s in result.stages}

    assert result.decisive is None and result.reported is by_id["4a"]  # the last stage that ran
    for sid in ("1", "2", "4a"):
        assert by_id[sid].outcome() == "SIGSEGV" and not by_id[sid].definite
        assert "Fatal Python error: Segmentation fault" in (out / by_id[sid].stage.dirname / "stderr.txt").read_text()
    assert by_id["4a"].kernel is None
    # flags accumulate: stage 4a still has stage 2's checks on
    assert by_id["4a"].capture.env.get("AOTI_RUNTIME_CHECK_INPUTS") == "1"
    assert by_id["4a"].capture.env.get("AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER") == "3"
    assert by_id["4b"].skipped and "printed no unfinished kernel launch" in by_id["4b"].note
    env = by_id["1"].capture.environment
    if not (env.get("cuda_available") or env.get("gpus")):
        assert by_id["3"].skipped and "no CUDA device" in by_id["3"].note
        assert not (out / "stage-3-deterministic").exists()
    table = result.table()
    assert "No stage gave a definite diagnosis." in table
    row4a = next(line for line in table.splitlines() if line.startswith("4a-kernel-names "))
    assert row4a.split()[1:7] == ["AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER=3", "(fresh", "cache)", "+", "earlier",
                                  "flags"]
    assert row4a.split()[7] == "SIGSEGV"
    assert json.loads((out / "ladder.json").read_text())["stopped_at"] is None


# --------------------------------------------------------------------------- pure helpers


def _finding(**kw) -> Finding:
    base = dict(run_id="r", rule_id="AOTI-X001", rule_name="x", family="shape_mismatch", severity="error",
                title="t", message="m", remedy="r", primary=True)
    return Finding(**{**base, **kw})


def test_is_definite():
    assert is_definite(_finding(), {})
    assert not is_definite(None, {})
    assert not is_definite(_finding(severity="warning"), {})
    assert not is_definite(_finding(family="segfault"), {})
    assert not is_definite(_finding(family="log_damage"), {})
    assert not is_definite(_finding(rule_name="generic-error-carrier"), {})
    assert not is_definite(_finding(rule_id="AOTI-Z001"), {})
    # flags the ladder never sets do not make a finding indefinite
    assert is_definite(_finding(env_flags={"TORCH_LOGS": "+inductor"}), {})
    # a symptom whose rule asks for a rerun with flags this stage has not set
    symptom = _finding(env_flags={"AOTI_RUNTIME_CHECK_INPUTS": "1"})
    assert not is_definite(symptom, {})
    assert not_definite_because(symptom, {}) == "asks for AOTI_RUNTIME_CHECK_INPUTS=1"
    assert is_definite(symptom, {"AOTI_RUNTIME_CHECK_INPUTS": "1"})
    ima = _finding(family="illegal_memory_access")
    assert not is_definite(ima, {})
    assert not_definite_because(ima, {"CUDA_LAUNCH_BLOCKING": "1"}) == "faulting kernel not named yet"
    named = _finding(family="illegal_memory_access", fields={"crash_kernel": "triton_poi_fused_index_mul_0"})
    assert not is_definite(named, {})
    assert is_definite(named, {"CUDA_LAUNCH_BLOCKING": "1"})


def test_last_launched_kernel_is_the_unfinished_launch():
    # printer level 3 line format (aoti-signatures.md 5.3)
    crashed = "[ before_launch: cpp_fused_0 ]\n[ after_launch: cpp_fused_0 ]\n[ before_launch: aoti_torch_cpu_addmm_out ]\n"
    assert last_launched_kernel(crashed) == "aoti_torch_cpu_addmm_out"
    finished = crashed + "[ after_launch: aoti_torch_cpu_addmm_out ]\nresult\n"
    assert last_launched_kernel(finished) is None
    assert last_launched_kernel("no printer output\n") is None
