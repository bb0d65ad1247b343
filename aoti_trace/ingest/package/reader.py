"""``.pt2`` package post-mortem: what a package holds and what it needs, read without loading anything.

Only :mod:`zipfile` is used: nothing is extracted to disk, no ``.so`` is opened with ``dlopen``, nothing is
unpickled, torch is never imported. Reading is bounded (see :mod:`aoti_trace.ingest.package.archive`).

API
---
``inspect_package(path) -> PackageInfo``
    Raises :class:`aoti_trace.model.errors.PackageError` (one line, exit 2 in the CLI) when ``path`` is missing, is a
    Git LFS pointer, not a zip, a truncated zip, a hostile zip, a ``torch.export.save`` archive or a zip without
    an AOTI model. Problems *inside* a readable package (missing or truncated weights, a truncated ``.so``) are
    not errors: they are listed in ``PackageInfo.models[].issues`` and become facts.
``package_frames(path, run_id, host=None, host_source='manifest') -> Frames``
    The same as ``package`` frame rows (long form), plus, when a host is given, the facts of comparing with it and
    its host rows; when ``inspect_package`` would raise, a ``damage`` row and a ``package_error`` fact instead
    (never raises for a bad package).

The ``package`` frame (columns run_id, path, lineno, model, item, key, value, entry)
----------------------------------------------------------------------------------
``model`` is the model name inside the package (``model`` for a default package), null for archive-level facts,
and ``"<host>"`` for facts about the machine the package was compared with (:mod:`aoti_trace.run.host`: the one the
capture ran on, from its manifest, or this machine with ``analyze --this-host``). ``item`` is what
the fact is about inside the model (input index, constant name, kernel name, ...), null for model-level facts.
``lineno`` is the line in ``entry`` (the archive entry name) where the fact was read, when it comes from text.

Archive level (model null):
    archive_format        content of <prefix>/archive_format ('pt2')
    archive_version       content of <prefix>/archive_version ('0')
    archive_prefix        top-level folder of all entries ('' for a legacy archive without one)
    archive_entries       number of zip entries
    archive_bytes         size of the package file
    model_name            one row per AOTI model in the package (value = model name)
    archive_format_unsupported   value = the format, when it is not 'pt2' (the loader: 'Invalid archive format')
    archive_version_unsupported  value = the version, when it is not '0' (the loader: 'Saved archive version ...')
    archive_version_missing      the archive_version entry is absent
    archive_prefix_missing       no common top-level folder (the loader warns 'outdated version of the pt2 archive')
    package_error         item = error kind (missing_file, lfs_pointer, not_a_zip, truncated_archive,
                          hostile_archive, bad_crc, exported_program, no_aoti_model, ...), value = the message.
                          Emitted only by package_frames, together with a damage row of the same kind.

Per model, compile-side facts:
    AOTI_DEVICE_KEY, AOTI_PLATFORM, AOTI_MACHINE, AOTI_CPU_ISA, AOTI_COMPUTE_CAPABILITY
                          verbatim from *wrapper_metadata.json (compute capability '' on CPU, '90' for sm_90)
    user_metadata         item = key, value = value: any other key of the metadata (aot_inductor.metadata)
    metadata_missing      no *wrapper_metadata.json (the loader fails: 'Failed to find wrapper metadata')
    device_key_empty      AOTI_DEVICE_KEY absent or '' (the loader: 'No device information found.')
    extern_op             item = node (buf2), value = op target from *.wrapper.json, e.g. 'aoti_fixture::scale'
    custom_op             value = op target of an extern node created with torch.library.custom_op
                          (metadata torch_library_custom_op=1): needs Python registration at load time
    num_inputs, num_outputs, num_constants   from the AOTInductorModelBase(...) constructor call
    input_name            item = input index ('0'), value = graph input name (arg2_1)
    input_dtype           item = index, value = at::kFloat / at::kLong ... (as in 'unmatched dtype' messages)
    input_device          item = index, value = cpu | cuda (compiled device of that input)
    input_sizes           item = index, value = e.g. '[s, 8]': static sizes, 's' for a dynamic or unchecked dim
    input_strides         item = index, value = e.g. '[8, 1]', 's' for dynamic strides
    input_dim_range       item = index, value = '<dim>:[<min>, <max>]' e.g. '0:[2, 64]' ('inf' if unbounded)
    output_name           item = output index, value = output name
    constant              item = constant name (lin_weight), value = original FQN (lin.weight)
    constant_dtype        item = constant name, value = float32 ...
    constant_device       item = constant name, value = cpu | cuda ... (constants_info_[i].device_type)
    constant_shape        item = constant name, value = '[4, 8]'
    constant_bytes        item = constant name, value = data_size in bytes
    constant_folded       item = constant name, value 'true' for constants produced by constant folding
    constants_in_so       'true' | 'false': the weights are (not) packaged inside the .so
    weights_format        'so' (inside the .so) | 'blob' (<h>_weights.blob, mmapped) | 'pickle' (data/weights/*
                          + weights_config.json: only torch._inductor.aoti_load_package in Python loads it, not the
                          C++ AOTIModelPackageLoader) | 'none' (no constants) | 'unknown'
    weights_file          item = archive entry, value = its size in bytes (one row per weight file)
    weights_missing       item = missing entry (or constant name), value = what is missing and why it is needed
    weights_truncated     item = archive entry, value = 'declared <N> bytes, found <M>'
    so_entry              value = the model .so entry name; so_bytes: its size
    so_missing            no *.so for the model (and not a package_cpp_only package)
    so_not_elf            the .so does not start with the ELF magic (the loader: 'invalid ELF header')
    so_machine            ELF machine of the .so: x86_64 | aarch64 | ...
    so_truncated          value = 'ELF needs <N> bytes, entry has <M>' (the loader dies with SIGBUS, no message)
    kernel                value = kernel name (cpp_fused_*, triton_*, call_triton_*), item = kernel kind
    oob_assert            item = kernel name, value = the literal 'index out of bounds: 0 <= tmp7 < ks0'
                          (lineno/entry: where the literal sits; used for Triton index-out-of-bounds reasoning)
    cxx                   compiler of the wrapper, from the '// Compile cmd' comment
    package_cpp_only      'true' when the package ships C++ sources and *_compile_flags.json instead of a .so

Per model, derived by comparing with the host (only when there is one: the capture's manifest, or ``--this-host``;
facts the host does not record are not compared):
    cpu_isa_missing       value = a word of AOTI_CPU_ISA whose CPU flags this host lacks (e.g. AMX_TILE)
    machine_mismatch      value = '<packaged> vs <host>' for AOTI_MACHINE
    device_unsupported    value = why this host cannot run the package's device (CUDA package on a torch built
                          without CUDA, or on a host without an NVIDIA GPU)
    compute_capability_mismatch  value = '<packaged> vs <host capabilities>' when the GPUs here differ

Host facts (model '<host>', item null unless noted; path = the package they were compared with):
    host_source ('manifest' or 'this machine'), torch_version (2.13.0+cpu), torch_cuda ('true'|'false'), torch_cuda_version, torch_hip_version,
    gpu_count, gpu_name (item = index), gpu_compute_capability (item = index, '90' form), machine, platform,
    cpu_flags (space-separated subset of avx2 fma avx512f ... amx_tile asimd sve), cpu_isa (the AOTI_CPU_ISA
    words this host supports). Unknown values are omitted.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path
from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, Field

from aoti_trace.run import host as host_mod
from aoti_trace.model.errors import PackageError
from aoti_trace.model.frames import Frames
from aoti_trace.ingest.package import archive as pa
from aoti_trace.ingest import safe_json
from aoti_trace.ingest.package.wrapper import (
    ITEMSIZE,
    ConstantSpec,
    InputSpec,
    OobAssert,
    blob_bytes,
    kernels_and_asserts,
    parse_wrapper,
    tensor_bytes,
)

AOTI_DIR = "data/aotinductor/"
METADATA_KEYS = ("AOTI_DEVICE_KEY", "AOTI_PLATFORM", "AOTI_MACHINE", "AOTI_CPU_ISA", "AOTI_COMPUTE_CAPABILITY")
ELF_MACHINES = {3: "x86", 62: "x86_64", 183: "aarch64", 40: "arm", 21: "ppc64", 22: "s390x", 243: "riscv"}


class Issue(BaseModel):
    """A problem inside a readable package; ``kind`` is the fact key it becomes."""

    kind: str
    item: str | None = None
    detail: str
    entry: str | None = None


class ExternOp(BaseModel):
    node: str | None = None
    target: str
    custom_op: bool = False  # created with torch.library.custom_op


class WeightFile(BaseModel):
    entry: str
    bytes: int


class Kernel(BaseModel):
    name: str
    kind: str  # cpp | triton | call_triton
    entry: str
    line: int


class ModelInfo(BaseModel):
    name: str
    entries: list[str] = Field(default_factory=list)
    metadata: dict[str, str] = Field(default_factory=dict)
    metadata_entry: str | None = None
    wrapper_entry: str | None = None
    kernel_entries: list[str] = Field(default_factory=list)
    so_entry: str | None = None
    so_bytes: int | None = None
    so_machine: str | None = None
    num_inputs: int | None = None
    num_outputs: int | None = None
    num_constants: int | None = None
    constants_in_so: bool | None = None
    weights_format: str = "unknown"
    weight_files: list[WeightFile] = Field(default_factory=list)
    inputs: list[InputSpec] = Field(default_factory=list)
    outputs: list[dict[str, Any]] = Field(default_factory=list)
    constants: list[ConstantSpec] = Field(default_factory=list)
    extern_ops: list[ExternOp] = Field(default_factory=list)
    kernels: list[Kernel] = Field(default_factory=list)
    oob_asserts: list[dict[str, Any]] = Field(default_factory=list)  # kernel, text, entry, line
    in_spec: str | None = None
    out_spec: str | None = None
    cxx: str | None = None
    package_cpp_only: bool = False
    issues: list[Issue] = Field(default_factory=list)
    # (key, item, value, entry, line) facts, in the order they were read; the source of package frame rows
    facts: list[tuple[str, str | None, str, str | None, int | None]] = Field(default_factory=list, exclude=True)


class PackageInfo(BaseModel):
    """Everything read from one ``.pt2``. JSON: ``info.model_dump_json()`` / :meth:`to_json`."""

    schema_: str = Field(default="aoti-trace.package/v1", alias="schema")
    path: str
    bytes: int
    prefix: str
    archive_format: str | None = None
    archive_version: str | None = None
    data_version: str | None = None
    entries: int
    models: list[ModelInfo] = Field(default_factory=list)
    issues: list[Issue] = Field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


# ---------------------------------------------------------------------------------------------- reading


def _fmt_dims(vals: list[int | None]) -> str:
    return "[" + ", ".join("s" if v is None else str(v) for v in vals) + "]"


def _read_json(ar: pa.Archive, name: str, model: ModelInfo) -> Any:
    try:
        return safe_json.loads(ar.read_text(name))
    except ValueError as exc:  # bad JSON, nested too deeply, an integer too long to convert
        model.issues.append(Issue(kind="bad_json", item=name, detail=f"{name}: {exc}", entry=name))
        return None


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _ints(v: Any) -> bool:
    return isinstance(v, list) and all(_int(x) for x in v)


def _elf_check(ar: pa.Archive, name: str, model: ModelInfo) -> None:
    head = ar.read_head(name, 64)
    size = ar.size(name)
    if not head.startswith(b"\x7fELF"):
        model.issues.append(Issue(kind="so_not_elf", detail=f"{name} does not start with the ELF magic "
                                  "(the loader reports 'invalid ELF header')", entry=name))
        return
    if len(head) < 64 or head[4] != 2:  # only 64-bit ELF is produced by AOTI
        return
    order: Literal["little", "big"] = "little" if head[5] == 1 else "big"
    machine = int.from_bytes(head[18:20], order)
    model.so_machine = ELF_MACHINES.get(machine, f"elf-machine-{machine}")
    shoff = int.from_bytes(head[40:48], order)
    shentsize = int.from_bytes(head[58:60], order)
    shnum = int.from_bytes(head[60:62], order)
    need = shoff + shentsize * shnum
    if need > size:
        model.issues.append(Issue(kind="so_truncated", detail=f"ELF needs {need} bytes, entry has {size}",
                                  entry=name))


def _pickle_weights(ar: pa.Archive, model: ModelInfo, config_entry: str, weights_dir: str) -> None:
    """Check data/weights/* against weights_config.json: {fqn: [file, shape, stride, offset]}."""
    config = _read_json(ar, config_entry, model)
    if not isinstance(config, dict):
        return
    by_fqn = {c.original_fqn: c for c in model.constants}
    needed: dict[str, int | None] = {}
    for fqn, spec in config.items():
        try:
            fname, shape, stride, offset = spec
            if not (_ints(shape) and _ints(stride) and _int(offset) and len(shape) == len(stride)):
                raise TypeError
        except (TypeError, ValueError):
            model.issues.append(Issue(kind="bad_json", item=fqn, detail=f"{config_entry}: bad entry for {fqn}",
                                      entry=config_entry))
            continue
        entry = weights_dir + str(fname)
        if entry not in ar.infos:
            model.issues.append(Issue(kind="weights_missing", item=entry,
                                      detail=f"{entry} (weight {fqn}) is listed in {config_entry} but absent",
                                      entry=config_entry))
            continue
        const = by_fqn.get(fqn)
        size = ITEMSIZE.get(const.dtype or "") if const else None
        req = tensor_bytes(shape, stride, offset, size) if size else None
        prev = needed.get(entry, 0)
        needed[entry] = None if req is None or prev is None else max(prev, req)
    for entry, req in needed.items():
        if req is None:
            continue
        # a torch.save zip: its storages are the */data/<n> entries; read the directory only, never data.pkl
        try:
            raw = ar.read_bytes(entry)
            with zipfile.ZipFile(io.BytesIO(raw)) as inner:
                found = max((i.file_size for i in inner.infolist() if re.search(r"/data/\d+$", i.filename)),
                            default=0)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError):
            model.issues.append(Issue(kind="weights_truncated", item=entry,
                                      detail=f"declared {req} bytes, found an unreadable torch.save archive "
                                      f"({ar.size(entry)} bytes)", entry=entry))
            continue
        if found < req:
            model.issues.append(Issue(kind="weights_truncated", item=entry, detail=f"declared {req} bytes, found {found}",
                                      entry=entry))


def _read_model(ar: pa.Archive, prefix: str, name: str, files: list[str]) -> ModelInfo:
    model = ModelInfo(name=name, entries=files)
    base = f"{prefix}{AOTI_DIR}{name}/"
    meta = [f for f in files if f.endswith("wrapper_metadata.json")]
    wrappers = [f for f in files if f.endswith(".wrapper.cpp")] or [f for f in files if f.endswith(".cpp")
                                                                    and not f.endswith(".kernel.cpp")]
    model.kernel_entries = [f for f in files if f.endswith(".kernel.cpp")]
    sos = [f for f in files if f.endswith(".so")]
    model.package_cpp_only = any(f.endswith("_compile_flags.json") for f in files)
    if meta:
        model.metadata_entry = meta[0]
        data = _read_json(ar, meta[0], model)
        if isinstance(data, dict):
            model.metadata = {str(k): str(v) for k, v in data.items()}
    else:
        model.issues.append(Issue(kind="metadata_missing", detail=f"no *wrapper_metadata.json under {base}"))
    if (meta and not model.metadata.get("AOTI_DEVICE_KEY")) and not any(i.kind == "bad_json" for i in model.issues):
        model.issues.append(Issue(kind="device_key_empty", detail="AOTI_DEVICE_KEY is absent or empty",
                                  entry=model.metadata_entry))

    for f in files:
        if f.endswith(".wrapper.json"):
            data = _read_json(ar, f, model)
            for node in (data or {}).get("nodes", []) if isinstance(data, dict) else []:
                n = node.get("node") if isinstance(node, dict) else None
                target = n.get("target") if isinstance(n, dict) else None
                if isinstance(target, str):
                    meta = n.get("metadata")  # type: ignore[union-attr]
                    custom = isinstance(meta, dict) and str(meta.get("torch_library_custom_op", "")) == "1"
                    name = node.get("name")
                    model.extern_ops.append(ExternOp(node=name if isinstance(name, str) else None, target=target,
                                                     custom_op=custom))

    if sos:
        model.so_entry = next((s for s in sos if s.endswith(".wrapper.so")), sos[0])
        model.so_bytes = ar.size(model.so_entry)
        _elf_check(ar, model.so_entry, model)
    elif not model.package_cpp_only:
        model.issues.append(Issue(kind="so_missing", detail=f"no .so for model {name!r} under {base}"))

    for k in model.kernel_entries:
        kernels, asserts = kernels_and_asserts(ar.read_text(k))
        _add_kernels(model, k, kernels, asserts)
    if wrappers:
        model.wrapper_entry = wrappers[0]
        wf = parse_wrapper(ar.read_text(wrappers[0]))
        model.num_inputs, model.num_outputs, model.num_constants = wf.num_inputs, wf.num_outputs, wf.num_constants
        model.constants_in_so = wf.constants_in_so
        model.inputs, model.constants = wf.inputs, wf.constants
        model.outputs = [{"index": i, "name": n, "line": ln} for i, n, ln in wf.outputs]
        model.in_spec, model.out_spec, model.cxx = wf.in_spec, wf.out_spec, wf.cxx
        _add_kernels(model, wrappers[0], wf.kernels, wf.oob_asserts)
        _weights(ar, prefix, model, wf.mmap_external)
    return model


def _add_kernels(model: ModelInfo, entry: str, kernels: list[tuple[str, int]], asserts: list[OobAssert]) -> None:
    known = {k.name for k in model.kernels}
    for name, line in kernels:
        if name not in known:
            kind = "call_triton" if name.startswith("call_triton_") else "triton" if name.startswith("triton_") else "cpp"
            model.kernels.append(Kernel(name=name, kind=kind, entry=entry, line=line))
            known.add(name)
    seen = {(a["kernel"], a["text"]) for a in model.oob_asserts}
    for a in asserts:
        if (a.kernel, a.text) not in seen:
            model.oob_asserts.append({"kernel": a.kernel, "text": a.text, "entry": entry, "line": a.line})
            seen.add((a.kernel, a.text))


def _weights(ar: pa.Archive, prefix: str, model: ModelInfo, mmap_external: bool) -> None:
    live = [c for c in model.constants if not c.from_folded]
    config = next((f for f in model.entries if f.endswith("/weights_config.json")), None)
    blobs = [f for f in model.entries if f.endswith("_weights.blob")]
    weights_dir = f"{prefix}data/weights/"
    for f in blobs:
        model.weight_files.append(WeightFile(entry=f, bytes=ar.size(f)))
    if config:
        model.weights_format = "pickle"
        peeked = _peek_config(ar, config)
        listed = {weights_dir + str(v[0]) for v in (peeked.values() if isinstance(peeked, dict) else ())
                  if isinstance(v, list) and v}
        for f in sorted(listed):
            if f in ar.infos:
                model.weight_files.append(WeightFile(entry=f, bytes=ar.size(f)))
        _pickle_weights(ar, model, config, weights_dir)
    elif model.constants_in_so is False and (mmap_external or blobs):
        model.weights_format = "blob"
        want = (model.so_entry or model.wrapper_entry or "").rsplit(".", 1)[0] + "_weights.blob"
        if not blobs:
            if live:
                model.issues.append(Issue(kind="weights_missing", item=want,
                                          detail=f"{want} is absent: the .so was built to mmap its "
                                          f"{len(live)} constant(s) from it", entry=model.wrapper_entry))
        else:
            need = blob_bytes(model.constants)
            have = ar.size(blobs[0])
            if need is not None and have < need:
                model.issues.append(Issue(kind="weights_truncated", item=blobs[0],
                                          detail=f"declared {need} bytes, found {have}", entry=blobs[0]))
    elif model.constants_in_so:
        model.weights_format = "so" if live else "none"
    elif model.constants_in_so is False:
        model.weights_format = "none" if not live else "unknown"
        if live:
            model.issues.append(Issue(kind="weights_missing", item=model.name,
                                      detail=f"{len(live)} constant(s) are neither in the .so nor in a weights file "
                                      "(expected <h>_weights.blob or data/weights/* with weights_config.json)",
                                      entry=model.wrapper_entry))


def _peek_config(ar: pa.Archive, entry: str) -> Any:
    try:
        return safe_json.loads(ar.read_text(entry))
    except ValueError:
        return None


def inspect_package(path: str | Path) -> PackageInfo:
    """Read a ``.pt2`` without loading it. Raises :class:`PackageError` for anything that is not an AOTI package."""
    path = Path(path)
    with pa.open_archive(path) as ar:
        prefix = pa.archive_prefix(ar.names)
        info = PackageInfo(path=str(path), bytes=path.stat().st_size, prefix=prefix.rstrip("/"),
                           entries=len(ar.names))

        def small(name: str) -> str | None:
            full = prefix + name
            return ar.read_text(full).strip() if full in ar.infos else None

        info.archive_format = small("archive_format")
        info.archive_version = small("archive_version")
        info.data_version = small(".data/version")
        models: dict[str, list[str]] = {}
        for n in ar.names:
            if n.startswith(prefix + AOTI_DIR) and not n.endswith("/"):
                rest = n[len(prefix + AOTI_DIR):]
                if "/" in rest:
                    models.setdefault(rest.split("/", 1)[0], []).append(n)
        if not models:
            if any(n.startswith(prefix + "models/") and n.endswith(".json") for n in ar.names):
                raise pa.package_error(
                    "exported_program",
                    f"{path} is an ExportedProgram archive (torch.export.save), not an AOTInductor package: load it "
                    "with torch.export.load, or compile it with torch._inductor.aoti_compile_and_package")
            raise pa.package_error("no_aoti_model", f"{path} is a zip archive with no AOTInductor model "
                                   f"(no {prefix}{AOTI_DIR}<model>/ entries): not a .pt2 from aoti_compile_and_package")
        if not prefix:
            info.issues.append(Issue(kind="archive_prefix_missing", detail="entries have no common top-level folder"))
        if info.archive_format is not None and info.archive_format != "pt2":
            info.issues.append(Issue(kind="archive_format_unsupported", detail=info.archive_format,
                                     entry=prefix + "archive_format"))
        if info.archive_version is None:
            info.issues.append(Issue(kind="archive_version_missing", detail=f"no {prefix}archive_version entry"))
        elif info.archive_version != "0":
            info.issues.append(Issue(kind="archive_version_unsupported", detail=info.archive_version,
                                     entry=prefix + "archive_version"))
        info.models = [_read_model(ar, prefix, name, files) for name, files in models.items()]
    return info


# ---------------------------------------------------------------------------------------------- host comparison


def host_isa(flags: list[str]) -> list[str]:
    """AOTI_CPU_ISA words this host's CPU flags support."""
    return [w for w, need in host_mod.ISA_FLAGS.items() if all(f in flags for f in need)]


def compare_with_host(model: ModelInfo, h: host_mod.HostInfo) -> list[Issue]:
    """Derived facts: what in the package's compile-side metadata this host cannot satisfy."""
    out: list[Issue] = []
    md = model.metadata
    isa = md.get("AOTI_CPU_ISA", "")
    if isa and h.cpu_flags is not None and h.machine is not None and md.get("AOTI_MACHINE", h.machine) == h.machine:
        for word in host_mod.isa_missing(isa, h.cpu_flags):
            out.append(Issue(kind="cpu_isa_missing", detail=word, entry=model.metadata_entry))
    if md.get("AOTI_MACHINE") and h.machine is not None and md["AOTI_MACHINE"] != h.machine:
        out.append(Issue(kind="machine_mismatch", detail=f"{md['AOTI_MACHINE']} vs {h.machine}",
                         entry=model.metadata_entry))
    key = md.get("AOTI_DEVICE_KEY", "")
    if key == "cuda":
        if h.torch_cuda is False:
            out.append(Issue(kind="device_unsupported", entry=model.metadata_entry,
                             detail=f"package compiled for cuda; this torch ({h.torch_version}) is built without CUDA"))
        elif h.gpu_count == 0:
            out.append(Issue(kind="device_unsupported", entry=model.metadata_entry,
                             detail="package compiled for cuda; this host has no NVIDIA GPU"))
        cc = md.get("AOTI_COMPUTE_CAPABILITY", "")
        if cc and h.gpu_compute_capability and cc not in h.gpu_compute_capability:
            out.append(Issue(kind="compute_capability_mismatch", entry=model.metadata_entry,
                             detail=f"{cc} vs {' '.join(h.gpu_compute_capability)}"))
    return out


# ---------------------------------------------------------------------------------------------- frames


def model_facts(model: ModelInfo) -> list[tuple[str, str | None, str, str | None, int | None]]:
    """(key, item, value, entry, line) facts of one model, as documented in the module docstring."""
    f: list[tuple[str, str | None, str, str | None, int | None]] = []
    me, we = model.metadata_entry, model.wrapper_entry
    for k in METADATA_KEYS:
        if k in model.metadata:
            f.append((k, None, model.metadata[k], me, None))
    for k, v in model.metadata.items():
        if k not in METADATA_KEYS:
            f.append(("user_metadata", k, v, me, None))
    for op in model.extern_ops:
        f.append(("extern_op", op.node, op.target, None, None))
        if op.custom_op:
            f.append(("custom_op", op.node, op.target, None, None))
    for key in ("num_inputs", "num_outputs", "num_constants"):
        if getattr(model, key) is not None:
            f.append((key, None, str(getattr(model, key)), we, None))
    for i in model.inputs:
        item = str(i.index)
        if i.name is not None:
            f.append(("input_name", item, i.name, we, i.line))
        if i.dtype is not None:
            f.append(("input_dtype", item, i.dtype, we, i.line))
        if i.device is not None:
            f.append(("input_device", item, i.device, we, i.line))
        if i.sizes:
            f.append(("input_sizes", item, _fmt_dims(i.sizes), we, i.line))
            f.append(("input_strides", item, _fmt_dims(i.strides), we, i.line))
        for r in i.ranges:
            lo = "-inf" if r.min is None else str(r.min)
            hi = "inf" if r.max is None else str(r.max)
            f.append(("input_dim_range", item, f"{r.dim}:[{lo}, {hi}]", we, i.line))
    for o in model.outputs:
        f.append(("output_name", str(o["index"]), o["name"], we, o["line"]))
    for c in model.constants:
        if c.name is None:
            continue
        f.append(("constant", c.name, c.original_fqn or "", we, c.line))
        if c.dtype:
            f.append(("constant_dtype", c.name, c.dtype, we, c.line))
        if c.device:
            f.append(("constant_device", c.name, c.device, we, c.line))
        if c.shape is not None:
            f.append(("constant_shape", c.name, _fmt_dims(c.shape), we, c.line))  # type: ignore[arg-type]
        if c.data_size is not None:
            f.append(("constant_bytes", c.name, str(c.data_size), we, c.line))
        if c.from_folded:
            f.append(("constant_folded", c.name, "true", we, c.line))
    if model.constants_in_so is not None:
        f.append(("constants_in_so", None, str(model.constants_in_so).lower(), we, None))
    f.append(("weights_format", None, model.weights_format, we, None))
    for w in model.weight_files:
        f.append(("weights_file", w.entry, str(w.bytes), w.entry, None))
    if model.so_entry:
        f.append(("so_entry", None, model.so_entry, model.so_entry, None))
        f.append(("so_bytes", None, str(model.so_bytes), model.so_entry, None))
    if model.so_machine:
        f.append(("so_machine", None, model.so_machine, model.so_entry, None))
    if model.package_cpp_only:
        f.append(("package_cpp_only", None, "true", None, None))
    for kern in model.kernels:
        f.append(("kernel", kern.kind, kern.name, kern.entry, kern.line))
    for a in model.oob_asserts:
        f.append(("oob_assert", a["kernel"], a["text"], a["entry"], a["line"]))
    if model.cxx:
        f.append(("cxx", None, model.cxx, we, None))
    for issue in model.issues:
        if issue.kind in ("bad_json",):
            continue  # reported as damage
        f.append((issue.kind, issue.item, issue.detail, issue.entry, None))
    return f


def host_rows(h: host_mod.HostInfo) -> list[tuple[str, str | None, str]]:
    """(key, item, value) facts about this host, for model '<host>'."""
    rows: list[tuple[str, str | None, str]] = []

    def add(key: str, value: Any, item: str | None = None) -> None:
        if value is not None:
            rows.append((key, item, str(value).lower() if isinstance(value, bool) else str(value)))

    add("torch_version", h.torch_version)
    add("torch_cuda", h.torch_cuda)
    add("torch_cuda_version", h.torch_cuda_version)
    add("torch_hip_version", h.torch_hip_version)
    add("gpu_count", h.gpu_count)
    for i, name in enumerate(h.gpu_names):
        add("gpu_name", name, str(i))
    for i, cc in enumerate(h.gpu_compute_capability):
        add("gpu_compute_capability", cc, str(i))
    add("machine", h.machine)
    add("platform", h.platform)
    if h.cpu_flags is not None:
        add("cpu_flags", " ".join(h.cpu_flags))
        add("cpu_isa", " ".join(host_isa(h.cpu_flags)))
    return rows


def _rows_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"run_id": pl.String, "path": pl.String, "lineno": pl.Int64, "model": pl.String,
                                      "item": pl.String, "key": pl.String, "value": pl.String, "entry": pl.String})


def package_frames(path: str | Path, run_id: str, host: host_mod.HostInfo | None = None,
                   host_source: str = "manifest") -> Frames:
    """``package`` rows (facts; with ``host``, the derived facts of comparing with it and its host facts) and
    ``damage`` rows for one package. ``host`` is the machine the run loaded the package on (its capture manifest,
    ``host_source='manifest'``) or this machine when asked (``'this machine'``); without one nothing is compared,
    so the frames do not depend on where the analysis runs. Never raises for a bad package: an unreadable one
    yields a ``package_error`` fact and a ``damage`` row."""
    path = Path(path)
    h = host
    frames = Frames()
    rows: list[dict[str, Any]] = []
    damage: list[dict[str, Any]] = []

    def row(model: str | None, key: str, item: str | None, value: str, entry: str | None = None,
            line: int | None = None) -> None:
        rows.append({"run_id": run_id, "path": str(path), "lineno": line, "model": model, "item": item,
                     "key": key, "value": value, "entry": entry})

    try:
        info = inspect_package(path)
    except PackageError as exc:
        kind = pa.error_kind(exc)
        row(None, "package_error", kind, str(exc))
        damage.append({"run_id": run_id, "path": str(path), "lineno": None, "kind": kind, "count": 1,
                       "detail": str(exc)})
        info = None
    if info is not None:
        p = info.prefix + "/" if info.prefix else ""
        for key, value, entry in (("archive_format", info.archive_format, p + "archive_format"),
                                  ("archive_version", info.archive_version, p + "archive_version"),
                                  ("archive_prefix", info.prefix, None),
                                  ("archive_entries", str(info.entries), None),
                                  ("archive_bytes", str(info.bytes), None)):
            if value is not None:
                row(None, key, None, value, entry)
        for issue in info.issues:
            row(None, issue.kind, issue.item, issue.detail, issue.entry)
        for model in info.models:
            row(None, "model_name", None, model.name)
            for key, item, value, entry, line in model_facts(model):
                row(model.name, key, item, value, entry, line)
            for issue in compare_with_host(model, h) if h is not None else []:
                row(model.name, issue.kind, issue.item, issue.detail, issue.entry)
            for issue in model.issues:
                if issue.kind == "bad_json":
                    damage.append({"run_id": run_id, "path": str(path), "lineno": None, "kind": "bad_json",
                                   "count": 1, "detail": issue.detail})
    if h is not None:
        row("<host>", "host_source", None, host_source)
        for key, item, value in host_rows(h):
            row("<host>", key, item, value)
    frames.add("package", _rows_frame(rows))
    if damage:
        frames.add("damage", pl.DataFrame(damage, schema={"run_id": pl.String, "path": pl.String,
                                                          "lineno": pl.Int64, "kind": pl.String,
                                                          "count": pl.Int64, "detail": pl.String}))
    return frames
