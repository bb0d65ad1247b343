"""The real ladder run on the GPU machine (fixtures/ladder/cuda_illegal_memory_access), re-analysed here."""

import json
from pathlib import Path

from aoti_trace.pipeline import analyze

LADDER = Path(__file__).resolve().parents[2] / "fixtures" / "ladder" / "cuda_illegal_memory_access"


def test_ladder_record_names_the_kernel_at_stage_4():
    saved = json.loads((LADDER / "ladder.json").read_text())
    stages = {s["stage"]: s for s in saved["stages"]}
    assert [s["stage"] for s in saved["stages"]] == ["1", "2", "3", "4a", "4b"]
    assert all(s["signal"] == "SIGABRT" for s in saved["stages"])
    assert not stages["1"]["definite"] and not stages["3"]["definite"]
    assert saved["stopped_at"] == "4a" and stages["4a"]["kernel"] == "triton_poi_fused_index_mul_0"
    assert stages["4b"]["env"]["AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT"] == "triton_poi_fused_index_mul_0"
    assert stages["3"]["env"]["AOTI_RUNTIME_CHECK_INPUTS"] == "1"  # flags accumulate
    assert "Stopped at stage 4a (kernel-names)" in (LADDER / "terminal.txt").read_text()


def test_stages_reanalysed_here_agree():
    baseline = analyze([LADDER / "stage-1-baseline"]).primary
    assert baseline.family == "illegal_memory_access" and baseline.fields["launch_blocking"] == "unset"
    names = analyze([LADDER / "stage-4a-kernel-names"]).primary
    assert names.fields["crash_kernel"] == "triton_poi_fused_index_mul_0"
    inputs = analyze([LADDER / "stage-4b-kernel-inputs"]).primary
    assert inputs.fields["suspicious_input"] == "arg3_1"
    assert any("max 1e+11" in e.text for e in inputs.evidence)
