"""What the misses of blind rounds 20 to 23 taught, kept as behaviour: lines a finding cites besides its anchor (the
statement that raised, the kernel line Triton points at, the op whose meta kernel needed a guard, the wrapper line,
the graph node), phases from wrapper lines and backends, and failure signals that read "No problem found." before.
Real public logs of fixtures/public/blind20 to blind23."""

from __future__ import annotations

from pathlib import Path

import pytest

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
    assert "`%einsum_1`, a call of `torch.ops.tensorrt.einsum`" in f.remedy


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


BLIND23 = BLIND20.parent / "blind23"


@pytest.mark.parametrize("case,signal_line", [
    ("llm-scaler_333_seedvr2_xpu_data_dependent_branching", "❌ [ERROR] Error in Phase 1 (Encoding): Data-dependent branching"),
    ("pytorch_180845_item_capture_scalar_fullgraph", "Original exception:"),
])
def test_an_application_error_report_is_a_failure_and_a_graph_break_in_it_the_cause(case, signal_line):
    analysis, f = _primary_in(BLIND23, case)
    assert analysis.frames["failures"].row(0, named=True)["what"] == signal_line
    assert f.rule_id == "AOTI-X011" and f.fields["graph_break"]  # the report's headline is named and cited
    assert f.fields["graph_break"] in f.remedy


def test_a_graph_break_report_in_a_run_that_did_not_fail_is_no_finding():
    analysis = analyze([BLIND23 / "flash-attention_1386_fwd_kvcache_graph_break_warning"])
    assert analysis.frames["failures"].height == 0 and analysis.primary is None


def test_an_aot_eager_backend_failure_is_tracing_not_a_compile():
    analysis, f = _primary_in(BLIND23, "pytorch_159435_custom_op_alias_annotation_functionalize")
    row = analysis.frames["failures"].row(0, named=True)
    assert (row["phase"], f.family) == ("export", "export_error") and "aot_eager" in row["phase_source"]


def test_an_import_mismatch_outranks_the_lowering_exception_that_wraps_it():
    _, f = _primary_in(BLIND23, "pytorch_127271_triton_key_import")
    assert (f.rule_id, f.fields["mod"]) == ("AOTI-V018", "triton.compiler.compiler")


BLIND24 = BLIND20.parent / "blind24"


def test_a_frame_line_whose_start_was_cut_is_still_a_frame():
    # the paste begins inside the frame line: 'torch/_inductor/select_algorithm.py", line 2022, in wait_on_futures'
    analysis, f = _primary_in(BLIND24, "pytorch_153417_wait_on_futures_keyerror")
    exc = analysis.frames["exceptions"].row(0, named=True)
    assert (exc["torch_file"], exc["torch_function"], exc["phase"]) == (
        "torch/_inductor/select_algorithm.py", "wait_on_futures", "autotune")
    assert f.family == "autotune_error"


def test_a_cut_traceback_ending_in_user_code_above_dynamos_footer_is_a_tracing_failure():
    case = BLIND20.parent / "blind2" / "diffusers_10290_flux_controlnet_np_ceil"
    row = analyze([case]).frames["failures"].row(0, named=True)
    assert (row["phase"], row["family"]) == ("export", "export_error")


BLIND25 = BLIND20.parent / "blind25"


def test_a_wrapper_exception_printed_near_the_cause_is_cited_beside_it():
    # ONNX's TorchExportError (line 3) and, in its summary, the GuardOnDataDependentSymNode that caused it (line 10)
    _, f = _primary_in(BLIND25, "piper1-gpl_99_export_onnx_data_dependent")
    assert f.rule_id == "AOTI-X001"
    assert [e.line for e in f.evidence][:2] == [10, 3]


def test_another_ranks_exception_is_not_cited_as_a_neighbour():
    # a rank's shape error and, a line away, another rank's NCCL timeout: each finding keeps its own rank
    case = BLIND20.parents[1] / "distributed" / "nccl_after_crash"
    analysis = analyze([case])
    assert analysis.primary is not None and analysis.primary.family == "shape_mismatch"


def test_aoti_runner_call_is_cited_and_named_in_the_remedy():
    _, f = _primary_in(BLIND25, "pair_nequip_allegro_82_aoti_multirank_ima")
    assert f.fields["aoti_api_line"] == "145" and "model_container_runner.cpp:145" in f.remedy
    assert any("API call failed at" in e.text for e in f.evidence)


BLIND26 = BLIND20.parent / "blind26"


def test_dynamos_from_user_code_block_marks_a_tracing_failure():
    analysis, f = _primary_in(BLIND26, "xformers_720_attentionmask_torchvariable_no_type")
    row = analysis.frames["failures"].row(0, named=True)
    assert "torch_error_footer" in row["signals"] and (row["phase"], f.family) == ("export", "export_error")


@pytest.mark.parametrize("case,expected", [
    ("blind26/flash-attention_1435_fa3_pybind_graph_break", "AOTI-J015"),  # raised: the failure
    ("blind8/sageattention_73_graph_break_pycapsule_warning", None),  # a UserWarning: torch.compile went on
])
def test_an_unregistered_extension_function_is_a_missing_custom_op_only_when_raised(case, expected):
    analysis = analyze([BLIND20.parent / case])
    assert (analysis.primary.rule_id if analysis.primary else None) == expected


BLIND27 = BLIND20.parent / "blind27"


def test_torch_export_save_is_the_package_phase():
    analysis, f = _primary_in(BLIND27, "pytorch_110169_export_save_bytes")
    assert analysis.frames["failures"].row(0, named=True)["phase"] == "package" and f.family == "package_error"


BLIND28 = BLIND20.parent / "blind28"


def test_lowering_target_names_the_op_without_a_kernel():
    # LoweringException's '  target: flex_attention_backward' below NoValidChoicesError: cited, named in the remedy
    _, f = _primary_in(BLIND28, "prime-diloco_209_flex_attention_bw_novalidchoices")
    assert f.rule_id == "AOTI-T001" and f.fields["lowering_target"] == "flex_attention_backward"
    assert any(e.line == 3 for e in f.evidence)
    assert f.remedy.startswith("The op without a usable kernel is `flex_attention_backward`")
    assert "kernel_options" in f.remedy  # FlexAttention: no ATen fallback, smaller blocks instead


def test_a_rewrapped_triton_error_cites_the_kernel_it_points_at():
    # vLLM re-raises Triton's 'at 1:0:' / 'def _w8a8_triton_block_scaled_mm(' / '^' / ValueError(...) in a
    # RuntimeError; the finding cites the error, and the kernel's def above the caret
    _, f = _primary_in(BLIND28, "vllm_39610_fp8e4nv_ampere_block_scaled_mm")
    assert f.family == "cuda_version_mismatch"
    assert [e.line for e in f.evidence] == [6, 3, 4]
    assert "`_w8a8_triton_block_scaled_mm`" in f.remedy.split("\n")[0]


@pytest.mark.parametrize("case,rule_id", [
    ("blind28/pytorch_124926_aoti_eager_dlopen_undefined_symbol", "AOTI-K019"),  # aoti_torch_* shim symbol
    ("blind5/pytorch_123745_aoti_so_from_2_3_undefined_symbol_in_2_4", "AOTI-K019"),  # torch::aot_inductor
    ("blind3/pytorch_122313_libtorch_cxx11_abi_undefined_symbol", "AOTI-V005"),  # c10:: symbol: the build's ABI
])
def test_a_missing_aoti_runtime_symbol_is_a_package_from_another_torch(case, rule_id):
    analysis = analyze([BLIND20.parent / case])
    assert analysis.primary is not None and analysis.primary.rule_id == rule_id


BLIND29 = BLIND20.parent / "blind29"


def test_an_ignored_autotune_choice_says_the_autotuner_went_on():
    # 'No valid triton configs ... out of resource' then 'Ignoring this choice.': the finding says so
    _, f = _primary_in(BLIND29, "lerobot_2471_pi0_autotune_choices_ignored_nonfatal")
    assert f.family == "autotune_error" and f.fields["choice_ignored"] == "true"
    assert f.remedy.startswith("The autotuner dropped this candidate")


def test_clangs_missing_visual_studio_is_cited_with_the_missing_header():
    _, f = _primary_in(BLIND29, "ComfyUI-Zluda_140_triton_hip_utils_stdio_h")
    assert f.rule_id == "AOTI-V009" and f.fields["header"] == "stdio.h" and f.fields["visual_studio"] == "not found"
    assert any("unable to find a Visual Studio installation" in e.text for e in f.evidence)
    assert f.remedy.startswith("Clang found no Visual Studio installation")


def test_a_triton_helper_build_cut_before_its_exception_is_the_environment():
    # the traceback ends at subprocess's 'raise CalledProcessError(retcode, cmd)'; compile_module_from_src names the
    # helper; Windows' conda standard library (envs\X\Lib\subprocess.py) is not the user's code
    from aoti_trace.report.text import render_text

    analysis, f = _primary_in(BLIND29, "Comfyui_Object_Detect_QWen_VL_8_triton_cuda_utils_build_windows")
    assert f.rule_id == "AOTI-V054" and f.family == "environment"
    assert "subprocess.py:413  (your code)" not in render_text(analysis)


BLIND30 = BLIND20.parent / "blind30"


def test_an_error_level_line_that_says_a_step_failed_is_a_failure():
    # QNN's '[ERROR] [Qnn ExecuTorch]: ... Failed to add node ...' lines were 'No problem found.'
    from aoti_trace.ingest.text.failure import failures_frame
    from aoti_trace.ingest.text.reader import read_text_bytes

    log = (BLIND30 / "executorch_19908_qnn_dequantize_per_channel" / "stderr.txt").read_bytes()
    rows = failures_frame(read_text_bytes(log, "stderr", "r"))  # failure detection alone, no rule
    assert rows.height == 1 and "Failed to construct common node" in rows.row(0, named=True)["what"]
    _, f = _primary_in(BLIND30, "executorch_19908_qnn_dequantize_per_channel")
    assert f.rule_id == "AOTI-X012" and f.fields["op"] == "Dequantize"


def test_a_compilation_error_quoted_by_its_error_line_cites_triton_header_and_statement():
    _, f = _primary_in(BLIND30, "flash-linear-attention_201_gsa_inference_compilationerror")
    texts = [e.text for e in f.evidence]
    assert "triton.compiler.errors.CompilationError: at 31:16:" in texts
    assert any(t.strip().startswith("p_hk0 = hk0") for t in texts)


def test_ptxas_errors_on_a_ptx_line_are_the_compilers_first_error():
    _, f = _primary_in(BLIND30, "vllm_27542_sm120a_ptxas_tile_gather4")
    assert f.rule_id == "AOTI-I004" and "not supported on .target 'sm_120a'" in f.remedy.split("\n")[0]


def test_executorch_lowering_frames_are_the_export_phase():
    analysis, f = _primary_in(BLIND30, "executorch_21607_qnn_partitioner_keyerror")
    assert analysis.frames["failures"].row(0, named=True)["phase"] == "export" and f.family == "export_error"


BLIND31 = BLIND20.parent / "blind31"


def test_the_tail_of_a_data_dependent_guard_error_is_a_failure_and_names_the_frame():
    # pasted from the middle of GuardOnDataDependentSymNode's message: its hint, 'Caused by: (...)', its variables
    from aoti_trace.ingest.text.failure import failures_frame
    from aoti_trace.ingest.text.reader import read_text_bytes

    log = (BLIND31 / "pytorch_146152_fasterrcnn_export_nms_datadep" / "stderr.txt").read_bytes()
    assert failures_frame(read_text_bytes(log, "stderr", "r")).height == 1  # was "No problem found."
    _, f = _primary_in(BLIND31, "pytorch_146152_fasterrcnn_export_nms_datadep")
    assert f.rule_id == "AOTI-X013"
    assert f.fields["where"] == "torchvision/ops/boxes.py:89 in _batched_nms_coordinate_trick"


BLIND32 = BLIND20.parent / "blind32"


def test_a_device_assert_wrapped_after_block_is_read_whole_and_keeps_its_line():
    # '/x/cbz...py:37: unknown: block:' then ' [7163,0,0], thread: [39,0,0] Assertion `index out of bounds: ...` failed.'
    analysis, f = _primary_in(BLIND32, "vllm_21899_internvl_compiled_embedding_index_oob")
    assert f.rule_id == "AOTI-A001" and f.fields["kernel_line"] == "37"
    assert f.fields["kernel_file"].endswith("cbzockb3tbfir4cbti7xfbjwcf6lltl66servpfui62mrj73i5u3.py")
    assert f.evidence[0].text.startswith(" [7163,0,0], thread: [39,0,0] Assertion")  # the line as written
    asserts = analysis.frames["device_asserts"]
    assert asserts.height == 1 and asserts.row(0, named=True)["count"] == 4


def test_what_torch_export_logged_before_a_cut_traceback_is_the_failure():
    # 'E0228 ... torch/export/_trace.py:1030] always_classified is unsupported.' above a traceback cut in user code
    analysis, f = _primary_in(BLIND32, "executorch_8591_export_llama_always_classified_unsupported")
    row = analysis.frames["failures"].row(0, named=True)
    assert (row["what"], row["phase"], f.family) == ("always_classified is unsupported.", "export", "export_error")


def test_a_shape_engine_error_under_inductors_lowering_is_a_lowering_error():
    analysis, f = _primary_in(BLIND32, "pytorch_123793_inductor_cat_unbacked_guard_equals")
    assert analysis.frames["failures"].row(0, named=True)["phase"] == "lowering"
    assert f.family == "lowering_error"


def test_exports_serializer_is_the_package_phase():
    analysis, f = _primary_in(BLIND32, "pytorch_179433_export_save_uint32_keyerror")
    assert analysis.frames["failures"].row(0, named=True)["phase"] == "package" and f.family == "package_error"


@pytest.mark.parametrize("case, rule", [
    ("ComfyUI-WanVideoWrapper_985_msvc_algorithm_header_missing", "AOTI-V009"),  # C1083, curly quotes, line cut
    ("pytorch_147377_rocm_triton_tot_gemm_llvm_cast_assert", "AOTI-I025"),  # an assert in Triton's bundled LLVM
    ("torchchat_1476_aot_load_libstdcxx_version", "AOTI-V003"),  # cut after "version `"
])
def test_round_32_messages_in_their_damaged_or_bundled_forms(case: str, rule: str):
    assert _primary_in(BLIND32, case)[1].rule_id == rule


def test_triton_llvm_lowering_cites_the_operation_it_could_not_translate():
    _, f = _primary_in(BLIND32, "rocm-pytorch_1294_inductor_bf16_gemm_llvm_translate_abort")
    assert f.rule_id == "AOTI-I021"
    assert any("LLVM Translation failed for operation: builtin.unrealized_conversion_cast" in e.text for e in f.evidence)


def test_an_index_assert_read_from_a_log_alone_gets_a_remedy_from_its_bound():
    # issue 11 §4: a literal bound is a table the index data exceeds; say so with the numbers, not the generic text
    _, f = _primary_in(BLIND32, "vllm_21899_internvl_compiled_embedding_index_oob")
    assert f.remedy.startswith("The generated kernel `cbzockb3tbfir4cbti7xfbjwcf6lltl66servpfui62mrj73i5u3.py:37` "
                               "read an index outside a fixed size of 65536")
    assert "int(ids.max()) < 65536" in f.remedy and "ids.clamp(0, 65535)" in f.remedy
    assert "x.numel() == 0" not in f.remedy  # the generic template's guess


def test_a_dynamic_bound_and_a_missing_bound_get_their_own_remedies():
    from aoti_trace.engine.kernel_lookup import remedy_from_assert

    dynamic = remedy_from_assert("ks0", "k.py:33", {"AOTI_RUNTIME_CHECK_INPUTS": "1"})
    assert dynamic is not None and "outside `ks0`, a size known only at run time" in dynamic
    assert "`AOTI_RUNTIME_CHECK_INPUTS=1`" in dynamic and "fixed size" not in dynamic
    assert remedy_from_assert("32000L", None).startswith("A generated kernel read an index outside a fixed size of 32000")
    assert remedy_from_assert(None, "k.py:1") is None
