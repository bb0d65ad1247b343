"""aoti-trace inspect / package_frames on real torch 2.13.0 packages (fixtures/packages, see its README)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from aoti_trace.model.errors import PackageError
from aoti_trace.run.host import HostInfo, compute_capability, cpu_flags, isa_missing
from aoti_trace.ingest.package.reader import inspect_package, package_frames

PKG = Path(__file__).resolve().parents[3] / "fixtures" / "packages"
DMG = PKG / "damaged"
REAL = ["linear", "custom_op", "dynamic", "blob_weights", "pickle_weights"]
# a fixed host, so derived facts do not depend on the machine running the tests
CPU_HOST = HostInfo(platform="linux", machine="x86_64", torch_version="2.13.0+cpu", torch_cuda=False, gpu_count=0,
                    cpu_flags=["avx2", "fma", "avx512f", "avx512dq", "avx512vl", "avx512bw", "avx512_vnni"])
GPU_HOST = HostInfo(platform="linux", machine="x86_64", torch_version="2.13.0+cu130", torch_cuda_version="13.0",
                    torch_cuda=True, gpu_count=1, gpu_names=["NVIDIA H200"], gpu_compute_capability=["80"],
                    cpu_flags=CPU_HOST.cpu_flags)
PROBLEM_KEYS = ["weights_missing", "weights_truncated", "so_truncated", "so_not_elf", "so_missing",
                "metadata_missing", "device_key_empty", "cpu_isa_missing", "machine_mismatch", "device_unsupported",
                "compute_capability_mismatch", "package_error", "archive_version_missing",
                "archive_version_unsupported", "archive_format_unsupported", "archive_prefix_missing"]


def facts(path: Path, host: HostInfo = CPU_HOST) -> pl.DataFrame:
    return package_frames(path, "r1", host=host)["package"]


def values(df: pl.DataFrame, key: str, model: str | None = "model") -> list[str]:
    sel = df.filter(pl.col("key") == key)
    if model is not None:
        sel = sel.filter(pl.col("model") == model)
    return sel["value"].to_list()


def problems(df: pl.DataFrame) -> dict[str, list[str]]:
    sel = df.filter(pl.col("key").is_in(PROBLEM_KEYS))
    return {k: sel.filter(pl.col("key") == k)["value"].to_list() for k in sel["key"].unique().sort()}


def test_fixture_sizes_and_origin():
    for name in REAL + ["exported_program"]:
        p = PKG / f"{name}.pt2"
        assert p.stat().st_size < 1_500_000, p
        assert zipfile.is_zipfile(p)


# ------------------------------------------------------------------ real packages


def test_linear_metadata_and_archive():
    info = inspect_package(PKG / "linear.pt2")
    assert (info.archive_format, info.archive_version, info.prefix) == ("pt2", "0", "linear")
    [m] = info.models
    assert m.name == "model"
    assert m.metadata["AOTI_DEVICE_KEY"] == "cpu"
    assert m.metadata["AOTI_PLATFORM"] == "linux"
    assert m.metadata["AOTI_MACHINE"] == "x86_64"
    assert m.metadata["AOTI_COMPUTE_CAPABILITY"] == ""
    # torch picked this build machine's ISA; it is the same string the .so was compiled for
    assert m.metadata["AOTI_CPU_ISA"] == "AVX512 AVX512_VNNI"
    assert m.metadata["fixture"] == "linear"  # user metadata (aot_inductor.metadata)
    assert (m.num_inputs, m.num_outputs, m.num_constants) == (1, 1, 1)
    assert m.so_machine == "x86_64" and m.so_entry.endswith(".wrapper.so")
    assert m.weights_format == "so" and m.constants_in_so is True
    assert m.extern_ops == [] and m.issues == []
    [inp] = m.inputs
    assert (inp.name, inp.dtype, inp.device, inp.sizes, inp.strides, inp.ranges) == (
        "arg2_1", "at::kFloat", "cpu", [3, 8], [8, 1], [])
    [c] = m.constants
    assert (c.name, c.original_fqn, c.dtype, c.device, c.shape, c.stride, c.data_size) == (
        "lin_weight", "lin.weight", "float32", "cpu", [4, 8], [8, 1], 128)
    assert m.outputs[0]["name"] == "output0"
    assert {k.name for k in m.kernels} == {"cpp_fused_0", "cpp_fused_relu_1"}
    assert m.oob_asserts == []
    assert m.cxx == "g++"


def test_linear_frame_rows():
    df = facts(PKG / "linear.pt2")
    assert df.columns[:8] == ["run_id", "path", "lineno", "model", "item", "key", "value", "entry"]
    assert values(df, "AOTI_DEVICE_KEY") == ["cpu"]
    assert values(df, "user_metadata") == ["linear"]
    assert values(df, "model_name", model=None) == ["model"]
    assert values(df, "archive_format", model=None) == ["pt2"]
    assert values(df, "weights_format") == ["so"]
    assert values(df, "input_sizes") == ["[3, 8]"]
    assert values(df, "input_dtype") == ["at::kFloat"]
    row = df.filter(pl.col("key") == "constant").row(0, named=True)
    assert (row["item"], row["value"]) == ("lin_weight", "lin.weight")
    # the line points at the constants_info_ assignment inside the wrapper entry
    src = zipfile.ZipFile(PKG / "linear.pt2").read(row["entry"]).decode().splitlines()
    assert 'constants_info_[0].name = "lin_weight";' in src[row["lineno"] - 1]
    assert problems(df) == {}
    host = df.filter(pl.col("model") == "<host>")
    assert dict(zip(host["key"], host["value"]))["torch_cuda"] == "false"
    assert dict(zip(host["key"], host["value"]))["torch_version"] == "2.13.0+cpu"


def test_dynamic_input_contract_and_oob_asserts():
    info = inspect_package(PKG / "dynamic.pt2")
    [m] = info.models
    x, idx = m.inputs
    assert (x.name, x.dtype, x.sizes, x.strides) == ("arg2_1", "at::kFloat", [None, 8], [8, 1])
    assert [(r.dim, r.min, r.max) for r in x.ranges] == [(0, 2, 64)]  # Dim("batch", min=2, max=64)
    assert (idx.name, idx.dtype, idx.sizes, idx.ranges) == ("arg3_1", "at::kLong", [5], [])
    assert m.oob_asserts == [{"kernel": "cpp_fused_index_0", "text": "index out of bounds: 0 <= tmp7 < ks0",
                              "entry": m.kernel_entries[0], "line": m.oob_asserts[0]["line"]}]
    df = facts(PKG / "dynamic.pt2")
    assert df.filter(pl.col("key") == "input_dim_range").select("item", "value").rows() == [("0", "0:[2, 64]")]
    assert values(df, "input_sizes") == ["[s, 8]", "[5]"]
    oob = df.filter(pl.col("key") == "oob_assert").row(0, named=True)
    text = zipfile.ZipFile(PKG / "dynamic.pt2").read(oob["entry"]).decode().splitlines()[oob["lineno"] - 1]
    assert '"index out of bounds: 0 <= tmp7 < ks0"' in text
    assert problems(df) == {}


def test_custom_op():
    [m] = inspect_package(PKG / "custom_op.pt2").models
    assert [(o.target, o.custom_op) for o in m.extern_ops] == [("aoti_fixture::scale", True)]
    df = facts(PKG / "custom_op.pt2")
    assert values(df, "extern_op") == ["aoti_fixture::scale"]
    assert values(df, "custom_op") == ["aoti_fixture::scale"]
    assert values(facts(PKG / "linear.pt2"), "extern_op") == []


def test_weight_formats():
    [b] = inspect_package(PKG / "blob_weights.pt2").models
    assert (b.weights_format, b.constants_in_so) == ("blob", False)
    assert [(w.entry.endswith("_weights.blob"), w.bytes) for w in b.weight_files] == [(True, 128)]
    [p] = inspect_package(PKG / "pickle_weights.pt2").models
    assert (p.weights_format, p.constants_in_so) == ("pickle", False)
    assert [w.entry for w in p.weight_files] == ["pickle_weights/data/weights/weight_0"]
    for name in ("blob_weights", "pickle_weights"):
        assert problems(facts(PKG / f"{name}.pt2")) == {}


def test_json_serialisable():
    info = inspect_package(PKG / "dynamic.pt2")
    data = json.loads(json.dumps(info.to_json()))
    assert data["schema"] == "aoti-trace.package/v1"
    assert data["models"][0]["inputs"][0]["ranges"] == [{"dim": 0, "min": 2, "max": 64}]


# ------------------------------------------------------------------ derived damage: facts fire where they should


@pytest.mark.parametrize("name, key, expect", [
    ("missing_blob", "weights_missing", "_weights.blob is absent"),
    ("truncated_blob", "weights_truncated", "declared 128 bytes, found 64"),
    ("missing_pickle_weight", "weights_missing", "data/weights/weight_0 (weight lin.weight) is listed"),
    ("truncated_pickle_weight", "weights_truncated", "declared 128 bytes, found an unreadable torch.save archive"),
    ("truncated_so", "so_truncated", "ELF needs"),
])
def test_damaged_inside(name, key, expect):
    df = facts(DMG / f"{name}.pt2")
    found = problems(df)
    assert list(found) == [key]
    [value] = found[key]
    assert expect in value
    assert package_frames(DMG / f"{name}.pt2", "r1", host=CPU_HOST)["damage"].height == 0


def test_host_comparison():
    # the device key edited to cuda: this CPU-only torch cannot run it
    df = facts(DMG / "cuda_key.pt2")
    assert values(df, "AOTI_DEVICE_KEY") == ["cuda"]
    assert problems(df) == {"device_unsupported": [
        "package compiled for cuda; this torch (2.13.0+cpu) is built without CUDA"]}
    # on a CUDA host with an sm_80 GPU: the package says 90
    df = facts(DMG / "cuda_key.pt2", host=GPU_HOST)
    assert problems(df) == {"compute_capability_mismatch": ["90 vs 80"]}
    # ISA words this host lacks
    assert problems(facts(DMG / "foreign_isa.pt2")) == {"cpu_isa_missing": ["AMX_TILE", "SVE256"]}
    # a host with only AVX2 lacks the AVX512 words the real package was compiled for
    avx2 = HostInfo(machine="x86_64", torch_cuda=False, gpu_count=0, cpu_flags=["avx2", "fma"])
    assert problems(facts(PKG / "linear.pt2", host=avx2)) == {"cpu_isa_missing": ["AVX512", "AVX512_VNNI"]}
    arm = HostInfo(machine="aarch64", torch_cuda=False, gpu_count=0, cpu_flags=["asimd"])
    assert problems(facts(PKG / "linear.pt2", host=arm)) == {"machine_mismatch": ["x86_64 vs aarch64"]}


# ------------------------------------------------------------------ not packages, hostile packages


@pytest.mark.parametrize("path, kind, text", [
    (DMG / "lfs_pointer.pt2", "lfs_pointer", "Git LFS pointer file"),
    (DMG / "not_a_zip.pt2", "not_a_zip", "not a .pt2 package"),
    (DMG / "truncated.pt2", "truncated_archive", "cut short"),
    (PKG / "exported_program.pt2", "exported_program", "torch.export.load"),
    (DMG / "path_escape.pt2", "hostile_archive", "'../evil.sh' escapes the extraction folder"),
    (DMG / "symlink.pt2", "hostile_archive", "is a symbolic link"),
    (DMG / "zip_bomb.pt2", "hostile_archive", "zip bomb"),
    (PKG / "missing.pt2", "missing_file", "no such package"),
    (PKG, "not_a_file", "is not a file"),
])
def test_refused(path, kind, text):
    with pytest.raises(PackageError) as exc:
        inspect_package(path)
    assert text in str(exc.value)
    assert "\n" not in str(exc.value)
    assert exc.value.kind == kind
    fr = package_frames(path, "r1", host=CPU_HOST)  # never raises
    assert fr["damage"].select("kind", "count").rows() == [(kind, 1)]
    err = fr["package"].filter(pl.col("key") == "package_error")
    assert err["item"].to_list() == [kind]
    assert fr["package"].filter(pl.col("model") == "model").height == 0


def test_zip_bomb_not_inflated(tmp_path):
    # the refusal comes from the central directory: nothing is decompressed
    import tracemalloc

    tracemalloc.start()
    with pytest.raises(PackageError):
        inspect_package(DMG / "zip_bomb.pt2")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 32 << 20


def test_no_aoti_model(tmp_path):
    p = tmp_path / "plain.pt2"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("plain/archive_format", "pt2")
        z.writestr("plain/readme.txt", "hello")
    with pytest.raises(PackageError, match="no AOTInductor model"):
        inspect_package(p)


# ------------------------------------------------------------------ host probing helpers


def test_host_helpers():
    assert cpu_flags("processor: 0\nflags\t\t: fpu avx2 fma avx512f amx_tile\n") == ["avx2", "fma", "avx512f", "amx_tile"]
    assert cpu_flags("Features\t: fp asimd sve\n") == ["asimd", "sve"]
    assert isa_missing("AVX512 AVX512_VNNI AMX_TILE", ["avx2", "fma", "avx512f", "avx512dq", "avx512vl",
                                                      "avx512bw", "avx512_vnni"]) == ["AMX_TILE"]
    assert compute_capability("9.0\n") == "90"


def test_host_info_this_machine():
    from aoti_trace.run.host import host_info

    h = host_info()
    import importlib.metadata

    assert h.torch_version == importlib.metadata.version("torch")
    if h.torch_version.endswith("+cpu"):
        assert h.torch_cuda is False


# ------------------------------------------------------------------ CLI


def _cli(args):
    from aoti_trace.cli import _register, cli

    _register()
    return CliRunner().invoke(cli, args)


def test_cli_text_and_json():
    res = _cli(["inspect", str(PKG / "dynamic.pt2")])
    assert res.exit_code == 0, res.output
    assert "dim 0: [2, 64]" in res.output and "[s, 8]" in res.output
    assert "index out of bounds: 0 <= tmp7 < ks0" in res.output
    res = _cli(["inspect", str(PKG / "custom_op.pt2"), "--format", "json"])
    assert res.exit_code == 0
    data = json.loads(res.output)
    assert data["models"][0]["extern_ops"][0]["target"] == "aoti_fixture::scale"
    res = _cli(["inspect", str(DMG / "truncated_blob.pt2")])
    assert res.exit_code == 0 and "weights_truncated: declared 128 bytes, found 64" in res.output


@pytest.mark.parametrize("path", [DMG / "lfs_pointer.pt2", PKG / "nope.pt2", PKG / "exported_program.pt2",
                                  DMG / "zip_bomb.pt2"])
def test_cli_errors_exit_2(path):
    res = subprocess.run([sys.executable, "-m", "aoti_trace", "inspect", str(path)], capture_output=True, text=True,
                         cwd=PKG.parent.parent, timeout=120)
    assert res.returncode == 2
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aoti-trace: error: ")


def test_every_emitted_key_is_documented():
    import aoti_trace.ingest.package.reader as mod

    doc = (PKG.parent.parent / "docs" / "package-facts.md").read_text()
    keys: set[str] = set()
    for p in sorted(PKG.glob("*.pt2")) + sorted(DMG.glob("*.pt2")):
        for host in (CPU_HOST, GPU_HOST):
            keys |= set(package_frames(p, "r1", host=host)["package"]["key"].to_list())
    assert len(keys) > 40
    for key in sorted(keys):
        assert key in mod.__doc__, key
        assert key in doc, key


@pytest.mark.skipif(not (PKG / "cuda_linear.pt2").exists(), reason="cuda_linear.pt2 not committed yet (GPU fixtures)")
def test_cuda_package():
    [m] = inspect_package(PKG / "cuda_linear.pt2").models
    assert m.metadata["AOTI_DEVICE_KEY"] == "cuda"
    assert m.metadata["AOTI_COMPUTE_CAPABILITY"].isdigit()
    assert {i.device for i in m.inputs} == {"cuda"}
    assert {c.device for c in m.constants if not c.from_folded} == {"cuda"}
    assert any(k.kind == "triton" for k in m.kernels)
    df = facts(PKG / "cuda_linear.pt2")
    assert values(df, "device_unsupported") == ["package compiled for cuda; this torch (2.13.0+cpu) is built without CUDA"]
