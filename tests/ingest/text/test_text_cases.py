"""Text ingest on the captured fixture corpus (fixtures/cases: real CPU runs here, real CUDA runs on an H200)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from aoti_trace.ingest.text.reader import read_stream

CASES = Path(__file__).parents[3] / "fixtures" / "cases"


def case(name: str, stream: str = "stderr"):
    path = CASES / name / f"{stream}.txt"
    if not path.exists():
        pytest.skip(f"fixture {name} not captured yet")
    return read_stream(path, stream, name)


def kinds(f) -> dict[int, str]:
    return dict(f["lines"].select("lineno", "kind").iter_rows())


@pytest.mark.slow
def test_every_case_parses_without_damage():
    streams = sorted(CASES.glob("*/std*.txt"))
    if not streams:
        pytest.skip("no fixtures")
    for path in streams:
        f = read_stream(path, path.stem, path.parent.name)
        assert f["lines"].height == path.read_bytes().count(b"\n") + (0 if path.read_bytes().endswith(b"\n") or not path.read_bytes() else 1), path
        assert set(f["damage"]["kind"].to_list()) <= {"cut_mid_line"}, path


def test_cuda_triton_index_oob():
    f = case("cuda_triton_index_oob")
    da = f["device_asserts"]
    assert da.height == 1
    row = da.row(0, named=True)
    assert row["kernel_file"].endswith("/l5/cl5kc2362vsjutu46fgx6gremb5ukiu2bdha2jsbwagrlnehpozi.py")
    assert row["kernel_line"] == 33 and row["function"] == "unknown"
    assert (row["block"], row["thread"]) == ("2,0,0", "3,0,0")  # the first of the folded lines
    assert row["assertion"] == "index out of bounds: 0 <= tmp4 < ks0"
    assert (row["index_var"], row["lower"], row["upper"], row["count"]) == ("tmp4", "0", "ks0", 8)
    assert row["lineno"] == 5
    ex = f["exceptions"].row(0, named=True)
    assert ex["exc_type"] == "torch.AcceleratorError"
    assert ex["message"].startswith("CUDA error: device-side assert triggered\nSearch for `cudaErrorAssert'")
    assert ex["user_line"] == 38 and ex["user_function"] == "main"
    faults = f["faults"].sort("lineno")
    assert faults["kind"].to_list() == ["terminate", "fatal_signal"]
    assert faults.row(0, named=True)["what"] == "CUDA error: device-side assert triggered"
    assert faults.row(0, named=True)["exc_type"] == "std::runtime_error"
    assert faults.row(1, named=True)["signal"] == "SIGABRT"
    k = kinds(f)
    assert k[1] == "noise" and k[3] == "noise"  # LeafSpec FutureWarning, TF32 hint
    assert k[22] == "noise"  # 'Search for `cudaErrorAssert' ...' hint


def test_cuda_illegal_memory_access_blocking_carrier():
    f = case("cuda_illegal_memory_access_blocking")
    k = kinds(f)
    assert k[5] == "cpp_error"
    text = f["lines"].filter(pl.col("lineno") == 5)["text"][0]
    assert text == "Error: CUDA driver error: an illegal memory access was encountered"
    ex = f["exceptions"].row(0, named=True)
    assert ex["exc_type"] == "RuntimeError" and ex["message"].startswith("run_func_( container_handle_")
    assert ex["torch_file"] == "torch/export/pt2_archive/_package.py" and ex["torch_function"] == "__call__"
    assert f["faults"].filter(pl.col("kind") == "fatal_signal")["signal"].to_list() == ["SIGABRT"]


def test_cuda_load_segfault_phase_and_frames():
    f = case("cuda_default_cxx_load_segfault")
    assert f["damage"].height == 0
    fault = f["faults"].row(0, named=True)
    assert f["faults"].height == 1
    assert fault["signal"] == "SIGSEGV" and fault["phase"] == "load"
    assert fault["torch_function"] == "_load_aoti" and fault["torch_file"] == "torch/export/pt2_archive/_package.py"
    assert fault["user_file"].endswith("cuda_default_cxx_load_segfault/repro.py") and fault["user_line"] == 26
    assert len(fault["stack"].splitlines()) == 6  # the current thread only, not the three other threads


def test_cuda_out_of_memory_shim_log_and_cpp_stack():
    f = case("cuda_out_of_memory")
    lines = f["lines"]
    shim = lines.filter(pl.col("kind") == "aoti_torch_exception").row(0, named=True)
    assert shim["level"] == "E" and shim["src"] == "shim_common.cpp:460"
    assert "CUDA out of memory. Tried to allocate 335.28 GiB" in shim["text"]
    assert lines.filter(pl.col("text") == "C++ CapturedTraceback:")["kind"].to_list() == ["cpp_frame"]
    assert lines.filter(pl.col("text").str.starts_with("#18 aoti_torch_empty_strided"))["kind"].to_list() == ["cpp_frame"]
    assert f["exceptions"]["exc_type"].to_list() == ["RuntimeError"]


def test_cuda_printer_level2_names_the_crashing_kernel():
    f = case("cuda_printer_level2", "stdout")
    p = f["printer"]
    last = p.filter(pl.col("launched_last"))
    assert last["kernel"].unique().to_list() == ["triton_poi_fused_index_mul_0"]
    assert last["arg"].to_list() == ["arg3_1", "arg2_1", "buf0"]  # the second run's launch
    bad_index = last.row(0, named=True)
    assert bad_index["dtype"] == "long int" and bad_index["max"] == 1e11 and bad_index["numel"] == 4
    # the block printed as '[ ... s70: 32 ]\n[ ... arg3_1 ]:' on one line (literal backslash-n) is still parsed
    assert p.filter(pl.col("kernel").str.contains("s70")).height == 0
    # the last after_launch header was cut before its statistics: the run died while printing it
    tail = p.row(-1, named=True)
    assert tail["event"] == "after_launch" and tail["numel"] is None and not tail["launched_last"]
    assert not p["suspicious"].any()


def test_cuda_printer_level3_all_launches_complete():
    f = case("cuda_printer_level3", "stdout")
    p = f["printer"]
    assert p.height == 12 and p["arg"].null_count() == 12  # two runs x three launches x before/after
    assert p["event"].to_list() == ["before_launch", "after_launch"] * 6
    assert p["lineno"].to_list() == [3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 16]
    assert "aoti_torch_cuda_addmm_out" in p["kernel"].to_list()
    assert not p["launched_last"].any()  # the IMA is asynchronous: every launch printed after_launch


def test_cpu_cpp_compile_error_diagnostics():
    f = case("cpp_compile_error")
    diags = f["lines"].filter(pl.col("kind") == "compiler_diagnostic")
    assert diags.height >= 1
    assert diags["text"].str.contains("error: unused parameter").any()
    final = f["exceptions"].filter(pl.col("is_final")).row(0, named=True)
    assert final["exc_type"] == "torch._inductor.exc.InductorError"
    assert final["message"].startswith("CppCompileError: C++ compile error")
    assert "\nCommand:\n" in final["message"] and "\nOutput:\n" in final["message"]


def test_cpu_ok_run_has_only_noise():
    f = case("ok_compile_load_run")
    assert f["lines"]["kind"].to_list() == ["noise", "noise"]
    assert f["exceptions"].height == 0 and f["faults"].height == 0
