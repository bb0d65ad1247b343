"""Text ingest on stderr posted in public issue threads (fixtures/public/<case>/stderr.txt, URL in expected.yaml)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import yaml

from aoti_trace.model.findings import FAMILIES
from aoti_trace.ingest.text.reader import read_stream

PUBLIC = Path(__file__).parents[3] / "fixtures" / "public"
NAMES = sorted(p.name for p in PUBLIC.iterdir() if (p / "stderr.txt").exists())
FIELDS = ["description", "primary", "evidence", "origin", "url", "device", "torch", "xfail"]


def case(name: str):
    return read_stream(PUBLIC / name / "stderr.txt", "stderr", name)


def kinds(f) -> dict[int, str]:
    return dict(f["lines"].select("lineno", "kind").iter_rows())


@pytest.mark.parametrize("name", NAMES)
def test_expected_yaml_and_evidence_present(name):
    exp = yaml.safe_load((PUBLIC / name / "expected.yaml").read_text())
    assert list(exp) == FIELDS
    assert exp["origin"] == "public" and exp["url"].startswith("https://github.com/")
    assert exp["primary"] in FAMILIES and exp["evidence"]
    text = "\n".join(case(name)["lines"]["text"].to_list())
    for ev in exp["evidence"]:
        assert ev in text, ev


def test_count_and_family_spread():
    assert len(NAMES) >= 8
    fams = {yaml.safe_load((PUBLIC / n / "expected.yaml").read_text())["primary"] for n in NAMES}
    assert len(fams) >= 5


def test_litgpt_triton_assert_lines_fold():
    da = case("litgpt_774_triton_oob")["device_asserts"]
    assert da.height == 1
    row = da.row(0, named=True)
    assert (row["kernel_file"], row["kernel_line"], row["function"]) == ("unknown", 0, "unknown")
    assert (row["block"], row["thread"], row["count"]) == ("0,0,0", "8,0,0", 11)
    assert (row["index_var"], row["lower"], row["upper"]) == ("tmp4", "0", "32000")


def test_gpt_fast_exception_then_asserts():
    f = case("gpt_fast_14_compile_prefill_oob")
    ex = f["exceptions"].row(0, named=True)
    assert ex["exc_type"] == "RuntimeError"
    assert ex["message"] == "Triton Error [CUDA]: device-side assert triggered"  # trailing spaces dropped
    assert ex["frames"] == 1  # the excerpt starts inside the traceback
    assert f["device_asserts"]["count"].to_list() == [4]
    assert kinds(f)[8] == "plain"  # '...'


def test_torchchat_840_indented_ci_log():
    f = case("torchchat_840_host_pointer")
    first = f["lines"].row(0, named=True)
    assert first["kind"] == "aoti_torch_exception" and first["level"] == "E" and first["src"] == "shim_common.cpp:311"
    # the glog header is decoration: the message is the text, the header is kept in prefix
    assert first["text"].startswith("Exception in aoti_torch")
    assert first["prefix"] == "[E520 19:20:12.156885067 shim_common.cpp:311] "
    assert [kinds(f)[i] for i in range(2, 7)] == ["cpp_frame"] * 5


def test_torchchat_709_error_then_abort():
    f = case("torchchat_709_create_container")
    k = kinds(f)
    assert (k[1], k[2], k[3], k[4], k[5]) == ("plain", "cpp_error", "terminate", "terminate", "plain")
    faults = f["faults"].sort("lineno")
    assert faults["kind"].to_list() == ["terminate", "fatal_signal"]
    shell = faults.row(1, named=True)  # './we-run-this.sh: line 34:  1930 Aborted  (core dumped) ...'
    assert (shell["lineno"], shell["signal"], shell["phase"], shell["stack"]) == (5, "SIGABRT", "unknown", None)
    t = faults.row(0, named=True)
    assert t["kind"] == "terminate" and t["exc_type"] == "std::runtime_error"
    assert t["what"].startswith("create_func_( &container_handle_") and t["what"].endswith("line 49")


def test_shim_glog_lines():
    for name in ("pytorch_141042_device_index", "pytorch_146524_cuda_oom"):
        row = case(name)["lines"].row(0, named=True)
        assert row["kind"] == "aoti_torch_exception" and row["level"] == "E", name
    assert case("pytorch_146524_cuda_oom")["lines"]["src"][0] == "c_shim_cuda.cpp:776"


def test_pylate_exception_then_rank_prefixed_traceback():
    f = case("pylate_75_triton_ima")
    ex = f["exceptions"].row(0, named=True)
    assert ex["exc_type"] == "RuntimeError"
    assert ex["message"] == "Triton Error [CUDA]: an illegal memory access was encountered"
    assert ex["frames"] == 6 and ex["torch_function"] == "run"
    assert ex["user_file"] is None  # '<string>' (Triton launcher) and the Inductor cache file are generated code
    assert ex["torch_file"] == "torch/_inductor/triton_heuristics.py"
    ranked = f["lines"].filter(pl.col("rank") == 0)
    assert ranked["text"].to_list()[0] == "Traceback (most recent call last):"
    assert ranked["text"].to_list()[1].startswith('  File "/workspace/sigrid/ModernBERT/./examples/')
    assert ranked["kind"].to_list() == ["traceback", "traceback"]


def test_torchchat_1293_banner_is_noise_and_compiler_error_found():
    f = case("torchchat_1293_python_h")
    k = kinds(f)
    assert [k[i] for i in range(1, 5)] == ["noise"] * 4
    assert k[5] == "compiler_diagnostic"
    assert k[9] == "traceback"
    # the posted traceback is cut before its exception line: one incomplete row, without a type
    exc = f["exceptions"].row(0, named=True)
    assert f["exceptions"].height == 1 and exc["complete"] is False and exc["exc_type"] is None


def test_torch_2_1_logger_header_gives_level_and_source():
    """torch 2.0-2.2 logged '[<time>] [0/1] torch._subclasses.fake_tensor: [ERROR] TypeError: ...' (blind round 11)."""
    f = read_stream(PUBLIC / "blind11" / "huggingface_stable_cascade_4_fake_tensor_multiple_dispatch_size" / "stderr.txt",
                    "stderr", "x")
    row = f["lines"].row(0, named=True)
    assert (row["level"], row["src"], row["kind"]) == ("E", "torch._subclasses.fake_tensor", "exception")
    assert row["text"].startswith("TypeError: Multiple dispatch failed for 'torch.ops.aten.size'")
    assert row["prefix"].endswith("torch._subclasses.fake_tensor: [ERROR] ")


def test_a_log_pasted_with_a_tab_indent_reads_like_the_log():
    # derived input: a real capture (fixtures/cases/export_numpy_in_forward) with a tab before every line, as a
    # tab-indented block in an issue; the shared indent is decoration, spaces or tabs
    from aoti_trace.ingest.text.reader import read_text_bytes

    log = (Path(__file__).resolve().parents[3] / "fixtures/cases/export_numpy_in_forward/stderr.txt").read_bytes()
    plain = read_text_bytes(log, "stderr", "r")["lines"]
    tabbed = read_text_bytes(b"".join(b"\t" + ln for ln in log.splitlines(keepends=True)), "stderr", "r")["lines"]
    assert tabbed.get_column("kind").to_list() == plain.get_column("kind").to_list()
    assert tabbed.get_column("text").to_list() == plain.get_column("text").to_list()
