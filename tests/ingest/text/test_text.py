"""Text ingest on real stderr/stdout captured with torch 2.13.0 CPU (tests/data/text/README.md says how)."""

from __future__ import annotations

import gzip
import io
import re
import sys
from pathlib import Path

import polars as pl
import pytest

from aoti_trace.model.errors import InputError
from aoti_trace.model.frames import schema
from aoti_trace.ingest.text import lines as L
from aoti_trace.ingest.text.reader import read_stream, read_text_bytes

DATA = Path(__file__).parents[2] / "data" / "text"


def read(name: str, stream: str = "stderr"):
    return read_stream(DATA / name, stream, "r1")


def kinds(frames) -> dict[int, str]:
    return dict(frames["lines"].select("lineno", "kind").iter_rows())


def test_patterns_compile_in_python_and_polars():
    for name, pattern in L.PATTERNS.items():
        re.compile(pattern)
        pl.Series(["x"]).str.contains(pattern)  # raises on a pattern the Rust engine rejects
    for pattern in (L.ANSI, L.RANK_IN_PREFIX, L.DECORATION, L.GLOG, L.GLOG_SHORT, *(p for p, _ in L.IPYTHON)):
        re.compile(pattern)
        pl.Series(["x"]).str.contains(pattern)


def test_frames_follow_their_schemas():
    f = read("aoti_oob.stderr.txt")
    for name in ("lines", "exceptions", "device_asserts", "faults", "printer"):
        assert f[name].schema == schema(name), name


def test_checked_dtype_mismatch_two_channels():
    f = read("aoti_dtype.stderr.txt")
    k = kinds(f)
    assert k[1] == "cpp_error"
    assert k[3] == "traceback" and k[4] == "traceback"
    assert k[10] == "exception"
    lines = f["lines"]
    assert lines.height == 11
    assert lines.filter(pl.col("lineno") == 1)["text"][0].startswith("Error: input_handles[0]: unmatched dtype")
    exc = f["exceptions"].row(0, named=True)
    assert f["exceptions"].height == 1
    assert exc["exc_type"] == "RuntimeError"
    assert exc["message"] == "input_handles[0]: unmatched dtype, expected: 6(at::kFloat), but got: 7"
    assert exc["lineno"] == 10 and exc["is_final"] and exc["chain"] == 0
    assert exc["user_file"].endswith("tests/data/text/run_package.py") and exc["user_line"] == 19
    assert exc["user_function"] == "<module>"
    assert exc["torch_function"] == "__call__"
    assert exc["torch_file"] == "torch/export/pt2_archive/_package.py"
    assert exc["frames"] == 2


def test_cpu_index_out_of_bounds_with_cpp_frames():
    f = read("aoti_oob.stderr.txt")
    k = kinds(f)
    assert k[1] == "cpp_error"
    assert k[2] == "cpp_frame"  # Exception raised from cpp_fused_... at ....kernel.cpp:47
    assert k[15] == "cpp_frame"  # <omitting python frames>
    counts = dict(f["lines"].group_by("kind").len().iter_rows())
    assert counts["cpp_frame"] == 36  # 2 x (Exception raised from + 16 frame lines + <omitting python frames>)
    exc = f["exceptions"].row(0, named=True)
    assert exc["message"].startswith("index out of bounds: 0 <= tmp7 < 8L\nException raised from cpp_fused_add_index")
    assert exc["message"].splitlines()[-1].startswith("frame #30: _start")
    assert f["device_asserts"].height == 0  # CPU checks are not device asserts


def test_direct_cause_chain():
    f = read("torch_chained.stderr.txt")
    ex = f["exceptions"].sort("chain")
    assert ex["exc_type"].to_list() == ["FileNotFoundError", "RuntimeError"]
    assert ex["chained_by"].to_list() == ["cause", None]
    assert ex["is_final"].to_list() == [False, True]
    first = ex.row(0, named=True)
    assert first["torch_function"] == "__init__" and first["torch_file"] == "torch/serialization.py"
    assert first["user_function"] == "load_weights" and first["user_line"] == 16
    assert ex.row(1, named=True)["message"] == "could not load weights from /nonexistent/weights.pt"
    assert kinds(f)[16] == "traceback"  # the separator line


def test_during_handling_chain():
    f = read("torch_context.stderr.txt")
    ex = f["exceptions"].sort("chain")
    assert ex["chained_by"].to_list() == ["context", None]
    assert ex["message"].to_list() == [
        "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)",
        "shape '[3]' is invalid for input of size 2",
    ]
    assert ex["user_function"].to_list() == ["matmul", "cleanup"]


def test_multiline_export_message_and_footer_noise():
    f = read("export_error.stderr.txt")
    ex = f["exceptions"].sort("chain")
    assert ex["exc_type"].to_list() == [
        "torch.fx.experimental.symbolic_shapes.ConstraintViolationError",
        "torch._dynamo.exc.UserError",
    ]
    final = ex.row(1, named=True)
    assert final["message"].startswith("Constraints violated (batch)!")
    assert "\nSuggested fixes:\n  batch = 8\n" in final["message"]
    assert final["message"].endswith("replace your `export()` call with `draft_export()`.")
    assert final["user_line"] == 14 and final["frames"] == 14
    k = kinds(f)
    assert k[17] == "exception" and k[18] == "exception"  # message continuation lines
    assert k[67] == "noise"  # the draft_export() footer


def test_faulthandler_dump_at_load():
    f = read("fault_truncated_so.stderr.txt")
    assert f["damage"].height == 0  # faulthandler ends without a newline: not a cut log
    k = kinds(f)
    assert [k[i] for i in (1, 3, 4, 9, 11)] == ["faulthandler"] * 5
    assert f["exceptions"].height == 0
    fault = f["faults"].row(0, named=True)
    assert f["faults"].height == 1
    assert fault["kind"] == "fatal_signal" and fault["signal"] == "SIGBUS" and fault["lineno"] == 1
    assert fault["torch_function"] == "_load_aoti"
    assert fault["torch_file"] == "torch/export/pt2_archive/_package.py"
    assert fault["user_file"].endswith("run_package.py") and fault["user_line"] == 10
    assert fault["phase"] == "load"
    stack = fault["stack"].splitlines()
    assert len(stack) == 6 and stack[0].endswith("_package.py:1068 in _load_aoti")
    assert "package.py:110 in load_package" in stack[3]


def test_printer_level2_blocks_and_nan():
    f = read("printer2_nan.stdout.txt", "stdout")
    p = f["printer"]
    assert p.height == 10
    assert p["event"].to_list() == ["aoti_model_inputs"] * 2 + ["before_launch"] * 4 + ["after_launch"] * 4
    first = p.row(0, named=True)
    assert first["arg"] == "arg0_1" and first["kernel"] is None
    assert first["numel"] == 32 and first["dtype"] == "float32" and first["device"] == "cpu"
    assert first["size"] == "[8, 4]" and first["stride"] == "[4, 1]"
    assert first["suspicious"]  # 'Mean value: nan', 'Min value: -nan'
    idx = p.row(1, named=True)
    assert (idx["arg"], idx["dtype"], idx["mean"], idx["min"], idx["max"]) == ("arg1_1", "long int", 2.0, 1.0, 3.0)
    assert not idx["suspicious"]
    buf1 = p.filter((pl.col("event") == "before_launch") & (pl.col("arg") == "buf1")).row(0, named=True)
    assert buf1["kernel"] == "cpp_fused_add_index_mul_relu_sum_0"
    assert buf1["numel"] == 8 and buf1["max"] == pytest.approx(1.88597e-22)  # the '1e-22 *' scaled block
    assert not p["launched_last"].any()  # every kernel finished
    k = kinds(f)
    assert k[2] == "printer" and k[10] == "printer"  # tensor values and the '[ CPUFloatType{8,4} ]' line
    assert k[178] == "plain"  # the script's own print of the result


def test_printer_level3_names_the_crashing_kernel():
    ok = read("printer3_ok.stdout.txt", "stdout")["printer"]
    assert ok["event"].to_list() == ["before_launch", "after_launch"]
    assert not ok["launched_last"].any()
    crash = read("printer3_oob.stdout.txt", "stdout")["printer"]
    assert crash.height == 1
    row = crash.row(0, named=True)
    assert row["event"] == "before_launch" and row["kernel"] == "cpp_fused_add_index_mul_relu_sum_0"
    assert row["launched_last"]


def test_output_code_is_code_not_an_error():
    f = read("aoti_output_code.stderr.txt")
    lines = f["lines"]
    echoed = lines.filter(pl.col("text").str.contains("index out of bounds"))
    assert echoed.height == 1 and echoed["kind"][0] == "output_code"
    counts = dict(lines.group_by("kind").len().iter_rows())
    assert counts["output_code"] == 978
    assert set(counts) == {"output_code", "torch_log", "noise"}  # noise: the LeafSpec FutureWarning (2 lines)
    assert counts["noise"] == 2
    assert lines.filter(pl.col("kind") == "torch_log")["level"].drop_nulls().len() == counts["torch_log"]
    first = lines.filter(pl.col("text").str.contains(r"\[__output_code\]")).row(0, named=True)
    assert first["level"] == "V" and first["src"] == "site-packages/torch/_inductor/compile_fx.py:1568"
    for frame in ("exceptions", "device_asserts", "faults", "printer"):
        assert f[frame].height == 0, frame


def test_rank_prefix_and_torchrun_failure():
    f = read("ranks_tee.stderr.txt")
    lines = f["lines"]
    assert lines.filter(pl.col("lineno") == 6)["text"][0].startswith('  File "')  # prefix removed, indent kept
    assert lines.filter(pl.col("rank") == 0).height == 5 and lines.filter(pl.col("rank") == 1).height == 4
    ex = f["exceptions"].sort("lineno")
    assert ex["exc_type"].to_list() == ["RuntimeError", "RuntimeError",
                                        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError"]
    assert ex["chain"].to_list() == [0, 0, 0]  # three separate exceptions, no chain
    assert ex["message"][2].startswith("============================================================\n")
    assert "Root Cause (first observed failure):" in ex["message"][2]


def test_vllm_worker_tags_give_the_rank():
    """vLLM's multiprocess workers tag each line with their rank (ROCm/vllm#390, fixtures/public/blind18): the tag
    and the logging header after it are removed, and each rank's lines classify on their own."""
    log = ("(VllmWorker rank=1 pid=6482) ERROR 07-10 15:02:03 [multiproc_executor.py:522]     extern_kernels._scaled_mm("
           "buf0, arg4_1)\n"
           "(VllmWorker rank=0 pid=6481) ERROR 07-10 15:02:03 [multiproc_executor.py:522] Traceback (most recent call "
           "last):\n"
           "(VllmWorker rank=1 pid=6482) ERROR 07-10 15:02:03 [multiproc_executor.py:522] RuntimeError: torch._scaled_mm "
           "is only supported on CUDA devices with compute capability >= 9.0 or 8.9, or ROCm MI300+\n")
    lines = read_text_bytes(log.encode(), "stderr", "v")["lines"]
    assert lines["rank"].to_list() == [1, 0, 1]
    assert lines["kind"].to_list() == ["plain", "traceback", "exception"]  # rank 1: not inside rank 0's traceback
    assert lines["text"][2].startswith("RuntimeError: torch._scaled_mm")


def test_interleaved_ranks_classify_as_if_alone():
    """Interleave the real rank-0 and rank-1 lines one by one (derived from the real capture)."""
    raw = (DATA / "ranks_tee.stderr.txt").read_bytes().splitlines(keepends=True)
    r0 = [x for x in raw if x.startswith(b"[default0]:")]
    r1 = [x for x in raw if x.startswith(b"[default1]:")]
    mixed = [x for pair in zip(r0, r1) for x in pair] + r0[len(r1):]
    f = read_text_bytes(b"".join(mixed), "stderr", "mix")
    ex = f["exceptions"].sort("lineno")
    assert ex["message"].to_list() == ["shape '[3]' is invalid for input of size 2",
                                       "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"]
    assert ex["user_line"].to_list() == [13, 11]
    alone = read_text_bytes(b"".join(r0), "stderr", "r0")["lines"]["kind"].to_list()
    assert f["lines"].filter(pl.col("rank") == 0)["kind"].to_list() == alone


def test_crlf_and_ansi_colours_are_transparent():
    """The real file rewritten with CRLF and coloured lines (derived) parses like the original."""
    raw = (DATA / "aoti_dtype.stderr.txt").read_bytes()
    coloured = re.sub(rb"(?m)^(RuntimeError|Error)(:)", lambda m: b"\x1b[1;31m" + m[1] + b"\x1b[0m" + m[2], raw)
    coloured = re.sub(rb"(?m)^(Traceback.*)$", lambda m: b"\x1b[35m" + m[1] + b"\x1b[0m", coloured)
    assert coloured.count(b"\x1b[") == 6
    crlf = coloured.replace(b"\n", b"\r\n")
    a, b = read_text_bytes(raw, "stderr", "x"), read_text_bytes(crlf, "stderr", "x")
    assert a["lines"].equals(b["lines"]) and a["exceptions"].equals(b["exceptions"])
    assert b["damage"].height == 0


def test_cut_mid_line_is_damage_and_kept():
    raw = (DATA / "aoti_oob.stderr.txt").read_bytes()
    cut = raw[: raw.index(b"frame #7") + 20]
    f = read_text_bytes(cut, "stderr", "cut", "stderr.txt")
    d = f["damage"].row(0, named=True)
    n = cut.count(b"\n") + 1
    assert (d["kind"], d["lineno"], d["path"], d["count"]) == ("cut_mid_line", n, "stderr.txt", 1)
    assert f["lines"].height == n
    assert f["lines"]["text"][-1] == "frame #7: torch::ind"
    assert kinds(f)[1] == "cpp_error"


def test_invalid_utf8_is_decoded_lossily_and_recorded():
    raw = (DATA / "aoti_dtype.stderr.txt").read_bytes()
    bad = raw.replace(b"print(model", b"print(\xff\xfemodel", 1)
    f = read_text_bytes(bad, "stderr", "bad")
    d = f["damage"].row(0, named=True)
    assert d["kind"] == "bad_utf8" and d["lineno"] == 5 and d["count"] == 2
    assert f["lines"].height == 11
    assert "\ufffd" in f["lines"]["text"][4]
    assert f["exceptions"]["exc_type"].to_list() == ["RuntimeError"]


def test_warning_between_code_records_is_noise_not_code():
    f = read("aoti_output_code.stderr.txt")
    k = kinds(f)
    assert k[69] == "output_code"  # a [__pre_grad_graphs] line
    assert k[70] == "noise" and k[71] == "noise"  # the LeafSpec FutureWarning and its source line
    assert k[72] == "torch_log"


def test_old_style_output_code_block():
    """Releases that prefixed only a record's first line: the bare lines after the tagged header are code.
    Derived from the real capture by removing the glog header and tag from the code lines after the first."""
    raw = (DATA / "aoti_output_code.stderr.txt").read_text().splitlines()
    start = next(i for i, x in enumerate(raw) if "[__output_code] Output wrapper code:" in x)
    end = next(i for i in range(start + 1, len(raw)) if "[__output_code]" not in raw[i])
    bare = [re.sub(r"^.*?\[__output_code\] ?", "", x) for x in raw[start + 1:end]]
    text = "\n".join(raw[:start + 1] + bare + raw[end:]) + "\n"
    f = read_text_bytes(text.encode(), "stderr", "old")
    lines = f["lines"]
    assert lines.slice(start, end - start)["kind"].unique().to_list() == ["output_code"]
    assert lines.filter(pl.col("text").str.contains("index out of bounds"))["kind"].to_list() == ["output_code"]
    assert lines.row(end, named=True)["kind"] == "torch_log"
    assert f["exceptions"].height == 0


def test_read_stream_stdin_and_gzip(monkeypatch, tmp_path):
    raw = (DATA / "torch_mm.stderr.txt").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw)))
    f = read_stream(Path("-"), "stderr", "s")
    assert f["lines"]["path"].unique().to_list() == ["-"]
    assert f["exceptions"]["message"].to_list() == ["mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"]
    gz = tmp_path / "stderr.txt.gz"
    gz.write_bytes(gzip.compress(raw))
    assert read_stream(gz, "stderr", "s")["exceptions"].height == 1
    cut = tmp_path / "cut_stderr.txt.gz"
    cut.write_bytes(gzip.compress(raw)[:-30])
    g = read_stream(cut, "stderr", "s")
    assert "truncated_payload" in g["damage"]["kind"].to_list()
    assert g["lines"].height > 0


def test_read_stream_user_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_stream(tmp_path / "missing.txt", "stderr", "x")
    with pytest.raises(InputError, match="is a folder"):
        read_stream(tmp_path, "stderr", "x")


def test_empty_input():
    f = read_text_bytes(b"", "stdout", "e")
    assert f["lines"].height == 0 and f["damage"].height == 0
    assert f["lines"].schema == schema("lines")


def test_shell_signal_report_after_faulthandler_dump():
    f = read("shell_segv.stderr.txt")
    faults = f["faults"].sort("lineno")
    assert faults["kind"].to_list() == ["fatal_signal", "fatal_signal"]  # faulthandler's dump, then bash's report
    dump, shell = faults.row(0, named=True), faults.row(1, named=True)
    assert dump["signal"] == "SIGSEGV" and dump["torch_function"] is None and dump["phase"] == "unknown"
    assert dump["stack"].splitlines()[0].endswith("ctypes/__init__.py:519 in string_at")
    assert dump["user_file"] is None  # '<string>' (python -c) counts as generated code
    assert (shell["signal"], shell["lineno"], shell["stack"]) == ("SIGSEGV", f["lines"].height, None)
    assert f["damage"].height == 0


def test_python_warning_and_its_source_line():
    f = read("torch_userwarning.stderr.txt")
    assert f["lines"]["kind"].to_list() == ["warning", "warning"]
    assert f["exceptions"].height == 0


@pytest.mark.parametrize("text, signal, lineno", [
    # the header alone (fixtures/public/blind12/pytorch_113740_...: the 'Caught signal' line was not posted)
    ("BFD: DWARF error: section .debug_info is larger than its filesize!\n==== backtrace (tid:3341850) ====\n"
     " 0 0x0000000000042520 __sigaction()  ???:0\n 6 0x0000000000001873 launch()  main.c:0\n", None, 2),
    # UCX's signal line, then its backtrace: one fault, with the signal
    ("[node1:12345:0:12345] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x8)\n"
     "==== backtrace (tid:  12345) ====\n 0 0x0000000000042520 __sigaction()  ???:0\n", "SIGSEGV", 1),
])
def test_ucx_crash_handler_is_a_fatal_signal(text, signal, lineno):
    faults = read_text_bytes(text.encode(), "stderr", "u")["faults"]
    assert faults.height == 1
    row = faults.row(0, named=True)
    assert (row["kind"], row["signal"], row["lineno"]) == ("fatal_signal", signal, lineno)


@pytest.mark.parametrize("line,diagnostic", [
    ("clang: error: linker command failed due to signal (use -v to see invocation)", True),
    ("/usr/bin/clang-15: error: unsupported option '-fopenmp'", True),
    ("C:\\ROCm\\bin\\clang.exe: error: linker command failed with exit code 1104", True),
    ("xcrun: error: unable to find utility \"metal\", not a developer tool or in PATH", True),
    ("cc1plus: fatal error: /tmp/x.cpp: No such file or directory", True),
    ("/tmp/k.cpp:3:18: internal compiler error: in vect_get_vector_types_for_stmt, at tree-vect-stmts.c:12252", True),
    # words that only look like a driver
    ("clangd: error reading index", False),
    ("Error: clang was not found", False),
])
def test_compiler_driver_lines_are_compiler_diagnostics(line, diagnostic):
    # the drivers' own error lines (compiler_errors cites them as the first compiler error); lines built from the
    # forms the drivers print, not a log
    frames = read_text_bytes((line + "\n").encode(), "stderr", "r")
    assert (frames["lines"].item(0, "kind") == "compiler_diagnostic") is diagnostic
