"""Lines a finding cites besides its anchor: the statement that raised, the kernel line Triton points at, the op
whose meta kernel needed a guard; and the phase of an error that torch.compile's backend raised. Real public logs
(fixtures/public/blind20, after blind round 20)."""

from __future__ import annotations

from pathlib import Path

from aoti_trace.pipeline import analyze

BLIND20 = Path(__file__).resolve().parents[2] / "fixtures" / "public" / "blind20"


def _primary(case: str):
    analysis = analyze([BLIND20 / case])
    assert analysis.primary is not None
    return analysis, analysis.primary


def test_unexplained_failure_cites_the_raising_statement():
    _, f = _primary("ComfyUI-TeaCache_26_mps_float64_keyerror")
    assert f.rule_id == "AOTI-U003"
    # (an exception line's evidence carries the next lines of its message: Dynamo's footer is part of it)
    assert [(e.line, e.text.split("\n")[0].strip()) for e in f.evidence] == [
        (5, "torch._inductor.exc.InductorError: KeyError: torch.float64"), (3, "return DTYPE_TO_METAL[dtype]")]


def test_backend_raised_line_puts_the_failure_in_the_compile():
    analysis, f = _primary("ComfyUI-HunyuanVideoWrapper_42_triton_max_block")
    row = analysis.frames["failures"].row(0, named=True)
    assert (row["phase"], f.family) == ("compile", "lowering_error")
    assert "backend='inductor' raised it" in row["phase_source"]


def test_triton_compilation_error_cites_the_statement_under_the_caret():
    _, f = _primary("triton-windows_28_fp8_cast_compilationerror")
    assert f.evidence[0].text.split("\n")[0] == "CompilationError: at 8:11:"
    assert (f.evidence[-1].line, f.evidence[-1].text) == (11, "tmp1 = tmp0.to(tl.float32)")


def test_data_dependent_guard_names_the_op_whose_meta_kernel_needed_it():
    _, f = _primary("executorch_4658_coreml_llama_dynamic_slice_guard")
    assert (f.rule_id, f.fields["expr"], f.fields["meta_op"]) == ("AOTI-X006", "s0 + u169 > 128",
                                                                  "aten.slice_copy.Tensor")
    assert f.evidence[1].line == 5 and "aten.slice_copy.Tensor" in f.remedy.split("\n")[0]


def test_long_command_line_keeps_its_exit_status_in_the_evidence():
    _, f = _primary("ComfyUI-OmniGen2_10_gcc_cuda_utils")
    assert f.rule_id == "AOTI-V014"
    assert "TDM-GCC-64" in f.evidence[0].text and f.evidence[0].text.endswith("returned non-zero exit status 1.")


BLIND21 = BLIND20.parent / "blind21"


def test_an_exception_without_frames_takes_the_phase_of_the_cut_traceback_below_it():
    analysis = analyze([BLIND21 / "Comfy-WaveSpeed_54_sdxl_rocm_triton_llir"])
    row = analysis.frames["failures"].row(0, named=True)
    assert (row["exc_type"], row["phase"]) == ("SubprocException", "build")
    assert row["phase_source"].startswith("the traceback below it")
    f = analysis.primary
    assert f is not None and f.family == "cpp_compile_error"
    assert f.evidence[-1].text.strip().startswith('stages["llir"] = lambda')  # the worker's raising statement
    assert "triton/backends" not in (row["user_file"] or "")  # Triton is not the user's code


def test_gcc_internal_compiler_error_is_a_build_failure():
    analysis = analyze([BLIND21 / "pytorch_137795_aarch64_sve_gcc10_ice"])
    assert analysis.frames["lines"].row(0, named=True)["kind"] == "compiler_diagnostic"
    assert analysis.primary is not None and analysis.primary.rule_id == "AOTI-I022"


def test_fx_node_that_raised_is_cited_and_named():
    _, f = _primary_in(BLIND21, "TensorRT_2328_einsum_custom_op_no_autograd")
    assert (f.rule_id, f.fields["fx_node"], f.fields["fx_target"]) == ("AOTI-J012", "einsum_1", "torch.ops.tensorrt.einsum")
    assert f.evidence[-1].text.startswith("While executing %einsum_1 :")


def _primary_in(root: Path, case: str):
    analysis = analyze([root / case])
    assert analysis.primary is not None
    return analysis, analysis.primary


BLIND22 = BLIND20.parent / "blind22"


def test_failure_cites_the_wrapper_line_and_the_statement_above_the_caret():
    # a traceback pasted from its last frame's code ('    self.wrapper_code = ...' and Python's caret line), then
    # Dynamo's wrapper line and the exception it announces
    _, f = _primary_in(BLIND22, "pytorch_111999_mps_inductor_nonetype_wrapper")
    assert [(e.line, e.text.split("\n")[0].strip()) for e in f.evidence] == [
        (5, "TypeError: 'NoneType' object is not callable"),
        (4, "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:"),
        (2, "self.wrapper_code = wrapper_code_gen_cls()")]


def test_a_bare_raise_statement_is_not_cited():
    analysis, f = _primary_in(BLIND22, "Model-Optimizer_262_onnx_legacy_rms_norm_opset20")
    assert analysis.frames["failures"].row(0, named=True)["phase"] == "export"  # torch/onnx is the exporter
    assert not any(e.text.strip().startswith("raise ") for e in f.evidence)
