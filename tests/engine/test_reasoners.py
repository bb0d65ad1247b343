"""Cross-source reasoning on real CUDA captures: kernel lookup for a Triton device assert, printer crash site."""

from pathlib import Path

import polars as pl

from aoti_trace.pipeline import analyze
from aoti_trace.engine.kernel_lookup import find_kernel
from aoti_trace.ingest.trace.reader import read_payload, read_trace

CASES = Path(__file__).resolve().parents[2] / "fixtures" / "cases"


def wrapper_of(case: str) -> str:
    frames = read_trace(sorted((CASES / case / "trace").glob("*.log")), case)
    row = frames["artifacts"].filter(pl.col("name") == "inductor_aot_wrapper_code").row(0, named=True)
    return read_payload(row["path"], row["payload_offset"], row["payload_length"])


def test_kernel_lookup_maps_assert_to_kernel_launch_and_inputs():
    # repro: forward(table, idx) -> proj(table[idx] * 2.0), table rows dynamic; the assert is in the gather kernel
    m = find_kernel(wrapper_of("cuda_triton_index_oob"), "index out of bounds: 0 <= tmp4 < ks0", 33)
    assert m is not None and m.kernel == "triton_poi_fused_index_mul_0"
    assert (m.bound_param, m.bound_symbol) == ("ks0", "s70")
    assert (m.bound_input, m.bound_dim, m.bound_input_name) == (0, 0, "arg2_1")  # table.size(0)
    assert m.index_inputs == [1]  # idx
    assert (m.source_nodes, m.aten_ops) == ("index, mul", "aten.index, aten.mul")


def test_kernel_lookup_unknown_assertion():
    assert find_kernel(wrapper_of("cuda_triton_index_oob"), "index out of bounds: 0 <= tmp99 < ks7") is None


def test_triton_oob_finding_names_kernel_and_inputs():
    primary = analyze([CASES / "cuda_triton_index_oob"]).primary
    assert primary.family == "triton_index_oob"
    assert primary.fields["kernel"] == "triton_poi_fused_index_mul_0"
    assert primary.fields["bound_input"] == "0" and primary.fields["index_inputs"] == "1"
    assert "size(0) of input 0" in primary.message
    assert any(e.text.startswith("call_triton_poi_fused_index_mul_0(") for e in primary.evidence)


def test_triton_oob_kernel_from_package_when_trace_is_absent(tmp_path):
    case = CASES / "cuda_triton_index_oob"
    for name in ("stderr.txt", "stdout.txt", "manifest.json", "model.pt2"):
        (tmp_path / name).write_bytes((case / name).read_bytes())  # the same real capture, without its trace
    primary = analyze([tmp_path]).primary
    assert primary.fields["kernel"] == "triton_poi_fused_index_mul_0"
    assert primary.fields["kernel_source"] == "package"


def test_printer_names_crash_kernel_and_suspicious_input():
    primary = analyze([CASES / "cuda_printer_level2"]).primary
    assert primary.family == "illegal_memory_access"
    assert primary.fields["crash_kernel"] == "triton_poi_fused_index_mul_0"
    assert primary.fields["suspicious_input"] == "arg3_1"  # the index tensor holding 1e11
    assert any(e.source == "printer" for e in primary.evidence)


def test_ima_without_launch_blocking_is_flagged_misplaced():
    plain = analyze([CASES / "cuda_illegal_memory_access"]).primary
    blocking = analyze([CASES / "cuda_illegal_memory_access_blocking"]).primary
    assert plain.fields["launch_blocking"] == "unset" and "possibly misplaced" in plain.message
    assert "CUDA_LAUNCH_BLOCKING=1" in plain.rerun
    assert "possibly misplaced" not in blocking.message


def test_rocm_memory_fault_asks_for_the_hip_variable():
    # a ROCm rule (AOTI-H003) reruns with HIP_LAUNCH_BLOCKING, not CUDA's variable
    case = CASES.parent / "public" / "blind15" / "triton_829_rocm_unfold_memory_aperture_violation"
    primary = analyze([case]).primary
    assert primary.rule_id == "AOTI-H003" and "rerun with HIP_LAUNCH_BLOCKING=1" in primary.message
    assert "HIP_LAUNCH_BLOCKING=1" in primary.rerun and "CUDA_LAUNCH_BLOCKING" not in primary.rerun


def test_device_mismatch_names_devices_and_compile_device():
    meta = analyze([CASES / "input_device_meta_checked"]).primary  # CPU package fed a meta tensor, checks on
    assert meta.fields["got_name"] == "meta" and meta.fields["compile_device"] == "cpu"
    cuda = analyze([CASES / "cuda_device_mismatch"]).primary  # CUDA package fed a CPU tensor, checks on
    assert cuda.fields["got_name"] == "cpu" and cuda.fields["compile_device"] == "cuda"
    assert "device type 0 is cpu" in cuda.message
    pkg = analyze([CASES / "cuda_package_on_cpu_host"]).primary  # load-only run: the device comes from the .pt2
    assert pkg.fields["compile_device"] == "cuda" and "(package)" in pkg.message


def test_deprecated_api_names_the_call_site_and_rewrites_that_call(tmp_path):
    case = CASES / "deprecated_aot_compile"
    primary = analyze([case]).primary
    assert primary.family == "deprecated_api"
    assert primary.fields["call_site"].endswith("deprecated_aot_compile/repro.py:23")  # from the trace's stack
    assert primary.fields["call_code"].startswith("so_path = torch._export.aot_compile(m, (x,), options=")
    assert primary.fields["migration"].splitlines()[:2] == [
        "ep = torch.export.export(m, (x,))",
        'so_path = torch._inductor.aoti_compile_and_package(ep, package_path="model.pt2")',
    ]
    assert "At `" in primary.remedy and any(e.source == "stacks" for e in primary.evidence)


def test_migration_for_keeps_dynamic_shapes_and_options():
    from aoti_trace.engine.reasoners import migration_for

    line = 'so = torch._export.aot_compile(model, (x, y), dynamic_shapes=ds, options={"max_autotune": True})'
    assert migration_for(line).splitlines()[:2] == [
        "ep = torch.export.export(model, (x, y), dynamic_shapes=ds)",
        'so = torch._inductor.aoti_compile_and_package(ep, package_path="model.pt2", inductor_configs={"max_autotune": True})',
    ]
    assert migration_for("runner = torch._export.aot_load(path, 'cpu')") is None


def test_deprecated_call_site_found_beside_a_moved_capture(tmp_path, monkeypatch):
    import shutil

    from aoti_trace.ingest import sources

    moved = tmp_path / "deprecated_aot_compile"
    shutil.copytree(CASES / "deprecated_aot_compile", moved)
    original = sources.statement_at
    # the path recorded in the trace is not on this machine: only the copy beside the manifest is
    monkeypatch.setattr(sources, "statement_at",
                        lambda p, line: original(p, line) if str(p).startswith(str(tmp_path)) else None)
    primary = analyze([moved]).primary
    assert primary.fields["call_code"].endswith('os.path.join(out_dir, "model.so")})')
    assert "migration" in primary.fields


def test_dtype_mismatch_names_the_scalar_type():
    primary = analyze([CASES / "dtype_mismatch_checked"]).primary  # float32 package fed float64, checks on
    assert primary.fields["got_name"] == "float64" and "ScalarType 7 is torch.float64" in primary.message


# ---------------------------------------------------------------------------------------------- specific remedies
HOLDOUT = CASES.parent / "holdout"


def test_embedding_oob_remedy_names_the_table_and_the_input_not_shapes():
    # CPU kernel bound check `0 <= tmp19 < 50L`: 50 is the row count of the constant emb.weight (Embedding(50, 8))
    p = analyze([HOLDOUT / "round2_embedding_index_eq_size"]).primary
    assert (p.fields["kernel"], p.fields["bound_constant"], p.fields["bound_value"]) == (
        "cpp_fused_embedding_mean_0", "emb.weight", "50")
    assert p.fields["index_inputs"] == "0"
    assert "`emb.weight` (shape 50x8)" in p.remedy and "input 0 (`arg3_1`)" in p.remedy
    assert "ids.clamp(0, 49)" in p.remedy and "int(ids.max()) < 50" in p.remedy
    assert "unzip" not in p.remedy and "exported range" not in p.remedy


def test_triton_oob_remedy_uses_the_bound_input_and_the_index_input():
    p = analyze([CASES / "cuda_triton_index_oob"]).primary
    assert "`triton_poi_fused_index_mul_0`" in p.remedy
    assert "dim 0 of input 0 (`arg2_1`)" in p.remedy and "input 1 (`arg3_1`)" in p.remedy
    assert "unzip" not in p.remedy


def test_cpu_bound_check_with_an_internal_index_points_at_the_dim_range():
    p = analyze([CASES / "dynamic_dim_unchecked_oob"]).primary
    assert p.family == "dynamic_shape_violation" and p.fields["kernel"] == "cpp_fused_index_0"
    assert "no input feeds it" in p.remedy and "exported `Dim` range" in p.remedy


def test_printer_remedy_names_the_crash_kernel_and_the_suspicious_input():
    p = analyze([CASES / "cuda_printer_level2"]).primary
    first = p.remedy.split("\n\n")[0]
    assert "`triton_poi_fused_index_mul_0`" in first and "`arg3_1`" in first and "1e+11" in first


def test_device_and_dtype_remedies_give_the_exact_move_or_cast():
    assert 'inputs[0] = inputs[0].to("cuda")' in analyze([CASES / "cuda_device_mismatch"]).primary.remedy
    assert "inputs[0] = inputs[0].to(torch.float32)" in analyze([CASES / "dtype_mismatch_checked"]).primary.remedy


def test_segfault_remedy_names_the_phase_and_the_call_site():
    p = analyze([CASES / "corrupt_so_segfault"]).primary
    assert p.remedy.startswith("It crashed during load under your call at `") and "repro.py:" in p.remedy


def test_cuda_embedding_oob_names_the_table_constant_and_the_ids_input():
    # real H200 capture: Embedding(1000, 64) fed id 1037; the Triton assert's bound is the literal 1000
    p = analyze([CASES / "cuda_embedding_index_oob"]).primary
    assert p.fields["kernel"] == "triton_per_fused_embedding_mean_0"
    assert (p.fields["bound_constant"], p.fields["bound_value"], p.fields["index_inputs"]) == ("emb.weight", "1000", "0")
    assert "`emb.weight` (shape 1000x64)" in p.remedy and "ids.clamp(0, 999)" in p.remedy
    assert "numel() == 0" not in p.remedy and "unzip" not in p.remedy
