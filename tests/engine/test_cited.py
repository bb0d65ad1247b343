"""Evidence cites a log line as the log wrote it (aoti_trace.engine.cited)."""

from __future__ import annotations

from pathlib import Path

from aoti_trace.engine.cited import as_written
from aoti_trace.model.findings import CLIP_TAIL, clip
from aoti_trace.pipeline import analyze


def test_decoration_keeps_its_separator():
    # torchrun's '[rank0]: ' separator is removed from the message by ingest; the citation keeps it
    assert as_written("[rank0]:", "NameError('s10 is not defined')", "[rank0]: NameError('s10 is not defined')",
                      500) == "[rank0]: NameError('s10 is not defined')"


def test_long_message_is_clipped_without_counting_the_decoration():
    prefix = "(VllmWorkerProcess pid=802) ERROR 04-23 00:04:19 multiproc_worker_utils.py:240] "
    message = "CalledProcessError: " + "x" * 600 + "' returned non-zero exit status 1."
    cited = as_written(prefix, message, prefix + message, 500)
    assert cited.startswith(prefix + "CalledProcessError: xxx") and len(cited) == len(prefix) + 500
    # the end of a long line stays: its verdict is often there
    assert cited.endswith("x' returned non-zero exit status 1.") and " … " in cited


def test_clip_keeps_head_and_tail():
    assert clip("abc", 10) == "abc"
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))
    clipped = clip(text, 300)  # a short limit: a third of it for the tail
    assert len(clipped) == 300
    assert clipped.startswith(text[:100]) and clipped.endswith(text[-100:])
    clipped = clip(text, 600)
    assert len(clipped) == 600 and clipped.endswith(text[-CLIP_TAIL:]) and clipped.startswith(text[:400])


def test_rewritten_and_overwritten_lines():
    # ingest rewrote the message: the log's own line
    assert as_written(None, "torch._dynamo.exc.UserError: c", "<class 'torch._dynamo.exc.UserError'>: c", 500) \
        == "<class 'torch._dynamo.exc.UserError'>: c"
    # a carriage return overwrote a progress bar: the decoration and the message, not the overwritten text
    assert as_written("[rank1]:", "RuntimeError: x", "[rank1]: 10%|#   \rRuntimeError: x", 500) \
        == "[rank1]:RuntimeError: x"


def test_message_lines_below_an_exception_are_cited_as_written(tmp_path: Path):
    # pytorch/torchtune#2392 (fixtures/public/blind18/torchtune_2392_flex_attention_bwd_novalidchoices)
    log = tmp_path / "stderr.txt"
    log.write_text(
        "[rank0]: torch._inductor.exc.LoweringException: NoValidChoicesError: No choices to select, please consider "
        "adding ATEN into max_autotune_gemm_backends config (defined in torch/_inductor/config.py) to allow at least "
        "one choice. \n[rank0]:   target: flex_attention_backward\n")
    primary = analyze([log]).primary
    assert primary is not None
    assert "\n[rank0]:   target: flex_attention_backward" in primary.evidence[0].text


def test_an_indent_shared_by_the_whole_log_is_not_cited():
    # a log pasted indented as a block (fixtures/public/torchchat_840_host_pointer): the glog header is the decoration
    raw = "  [E520 19:20:12.156885067 shim_common.cpp:311] Exception in aoti_torch: x"
    assert as_written("[E520 19:20:12.156885067 shim_common.cpp:311] ", "Exception in aoti_torch: x", raw, 500) \
        == raw.lstrip()


def _primary_evidence(tmp_path: Path, text: str) -> list[str]:
    log = tmp_path / "stderr.txt"
    log.write_text(text)
    primary = analyze([log]).primary
    assert primary is not None
    return [e.text for e in primary.evidence]


def test_a_logged_record_continues_on_lines_with_its_own_header(tmp_path: Path):
    # pytorch/pytorch#127693 (fixtures/public/blind19/pytorch_pr127693_constraint_violation_dx): torch's log formatter
    # writes the record's header on every line; the next record (another header) is not part of the message
    head = "E0607 06:26:14.084000 140011261854720 torch/_guards.py:261] [0/0] "
    evidence = _primary_evidence(tmp_path, (
        f"{head}torch.fx.experimental.symbolic_shapes.ConstraintViolationError: Constraints violated (dx)! For more "
        "information, run with TORCH_LOGS=\"+dynamic\".\n"
        f"{head}  - Not all values of dx = L['x'].size()[0] in the specified range dx <= 9223372036854775806 satisfy "
        "the generated guard Ne(Mod(L['x'].size()[0], L['x'].size()[0] - 1), 0).\n"
        "E0607 06:26:14.086000 140011261854720 torch/_guards.py:263] [0/0] Created at:\n"))
    assert "satisfy the generated guard Ne(Mod(L['x'].size()[0], L['x'].size()[0] - 1), 0)." in evidence[0]
    assert "Created at:" not in evidence[0]


def test_a_message_that_starts_below_its_exception_line_is_cited(tmp_path: Path):
    # pytorch/pytorch#158113 (fixtures/public/blind19/pytorch_158113_executorch_core_aten_uniform)
    evidence = _primary_evidence(tmp_path, (
        "torch._export.verifier.SpecViolationError:\n"
        "Operator torch._ops.aten.uniform.default is not in Core ATen opset "
        "(https://pytorch.org/docs/stable/torch.compiler_ir.html#core-aten-ir).\"\n"))
    assert evidence[0].startswith("torch._export.verifier.SpecViolationError:\nOperator torch._ops.aten.uniform")


def test_an_exception_cited_from_the_exceptions_frame_is_the_line_as_written(tmp_path: Path):
    # ChaoningZhang/MobileSAM#176 (fixtures/public/blind19/MobileSAM_176_export_data_dependent_slice): the ONNX
    # exporter's summary writes the type as '<class ...>', which ingest rewrites to the qualified name
    evidence = _primary_evidence(tmp_path, (
        "<class 'torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode'>: Could not extract specialized "
        "integer from data-dependent expression u0 (unhinted: u0).  (Size-like symbols: none)\n\n"
        "The error above occurred when calling torch.export.export. If you would like to view some more information "
        "about this error, and get a list of all other errors that may occur in your export call, you can replace "
        "your `export()` call with `draft_export()`.\n"))
    assert any(e.startswith("<class 'torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode'>: Could not")
               for e in evidence)


def test_the_compilers_first_error_is_cited(tmp_path: Path):
    # pytorch/pytorch#186369 (fixtures/public/blind19/pytorch_186369_mps_metal_selfref_auto): the finding is the
    # wrapping InductorError; the Metal compiler's error above it is cited too
    evidence = _primary_evidence(tmp_path, (
        "error: variable 'tmp_scoped_0' declared with deduced type 'auto' cannot appear in its own initializer\n"
        "            auto tmp_scoped_0 = static_cast<int>(tmp_scoped_0);\n"
        "                                                 ^\n"
        "torch._inductor.exc.InductorError: SyntaxError: failed to compile ...\n"))
    assert "error: variable 'tmp_scoped_0' declared with deduced type 'auto' cannot appear in its own initializer" \
        in evidence
    # pytorch/pytorch#93196 (fixtures/public/blind19/pytorch_93196_macos_clang_fopenmp): anchored at a later error of
    # the block, the block's first error is cited too
    evidence = _primary_evidence(tmp_path, (
        "Output:\n"
        "clang: error: the clang compiler does not support '-march=native'\n"
        "clang: error: unsupported option '-fopenmp'\n"
        "clang: error: unsupported option '-fopenmp'\n"))
    assert evidence[0] == "clang: error: unsupported option '-fopenmp'"
    assert "clang: error: the clang compiler does not support '-march=native'" in evidence


def test_lines_near_a_cited_line_are_of_its_rank_only():
    # an interleaved two-rank log, built for this test from torchrun's '[rankN]:' form (not a real log)
    from aoti_trace.engine.cited import near
    from aoti_trace.ingest.text.reader import read_text_bytes
    from aoti_trace.model.findings import Evidence

    log = ("[rank0]: RuntimeError: a\n[rank1]: While executing %x : [num_users=1] = call_function[target=f]\n"
           "[rank0]: While executing %y : [num_users=1] = call_function[target=g]\n").encode()
    lines = read_text_bytes(log, "stderr", "r")["lines"]
    run_id, path = lines.item(0, "run_id"), lines.item(0, "path")
    rows = near(lines, run_id, Evidence(source="lines", path=path, line=1, text="RuntimeError: a"), 0, 5)
    assert rows.get_column("lineno").to_list() == [1, 3]
