"""Facts read from generated AOTI source text (``*.wrapper.cpp``, ``*.kernel.cpp``): pure text functions.

The input checks (``check_input_N``) are generated whether or not ``AOTI_RUNTIME_CHECK_INPUTS`` is set at run
time, so the wrapper always spells out the compiled input contract (reference §7.1). Every regex here is valid in
both Python ``re`` and the Rust ``regex`` dialect.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

RE_INPUT_NAME = re.compile(r'inputs_info_\[(?P<i>\d{1,18})\]\.name = "(?P<name>[^"]*)";')
RE_OUTPUT_NAME = re.compile(r'outputs_info_\[(?P<i>\d{1,18})\]\.name = "(?P<name>[^"]*)";')
RE_DTYPE = re.compile(
    r'input_handles\[(?P<i>\d{1,18})\]: unmatched dtype, "\s*<< "expected: " << \w+ << "\((?P<dtype>at::k\w+)\)')
RE_RANGE = re.compile(
    r'input_handles\[(?P<i>\d{1,18})\]: dim value is too (?P<side>small|large) at (?P<dim>\d{1,18}), "\s*'
    r'<< "expected (?:it )?to be (?:>=|<=) (?P<bound>-?\d{1,18})')
RE_DIM = re.compile(
    r'input_handles\[(?P<i>\d{1,18})\]: unmatched dim value at (?P<dim>\d{1,18}), "\s*<< "expected: (?P<v>-?\d{1,18}),')
RE_STRIDE = re.compile(
    r'input_handles\[(?P<i>\d{1,18})\]: unmatched stride value at (?P<dim>\d{1,18}), "\s*<< "expected: (?P<v>-?\d{1,18}),')
RE_DEVICE = re.compile(
    r'input_handles\[(?P<i>\d{1,18})\]: unmatched device type, "\s*<< "expected: " << \w+ << "(?P<n>\d{1,18})\((?P<dev>\w+)\)')
RE_CONSTANT = re.compile(r'constants_info_\[(?P<i>\d{1,18})\]\.(?P<field>\w+) = (?P<v>[^;\n]*);')
RE_MODEL_BASE = re.compile(
    r'AOTInductorModelBase\((?P<inputs>\d{1,18}),\s*(?P<outputs>\d{1,18}),\s*(?P<constants>\d{1,18}),\s*device_str,'
    r'\s*std::move\(cubin_dir\),\s*(?P<in_so>true|false)\)')
RE_IN_SPEC = re.compile(r'in_spec_ = R"\((?P<spec>[^\n]*)\)";')
RE_OUT_SPEC = re.compile(r'out_spec_ = R"\((?P<spec>[^\n]*)\)";')
RE_COMPILE_CMD = re.compile(r'(?m)^// Compile cmd\n// (?P<cmd>[^\n]+)$')
# kernel definitions: CPU kernels in *.kernel.cpp, Triton sources embedded in the CUDA wrapper, launch helpers
RE_KERNEL_DEF = re.compile(
    r'(?m)(?:^extern "C"[ \t]+(?:void|\w+)[ \t]+(?P<cpp>cpp_fused_\w+)\s*\()'
    r'|(?:^[ \t]*def (?P<triton>triton_\w+)\()'
    r'|(?:^[ \t]*(?:static[ \t]+)?(?:inline[ \t]+)?void[ \t]+(?P<call>call_triton_\w+)\s*\()')
RE_OOB = re.compile(r'"(?P<text>index out of bounds: [^"]+)"')
# a CUDA wrapper also embeds the Triton asserts as Python source (single quotes)
RE_OOB_TRITON = re.compile(r"'(?P<text>index out of bounds: [^'\n]+)'")
RE_DTYPE_NAME = re.compile(r'cached_torch_dtype_(?P<d>\w+)')
RE_DEVICE_NAME = re.compile(r'cached_torch_device_type_(?P<d>\w+)')
RE_CONST_TYPE = re.compile(r'ConstantType::(?P<t>\w+)')

ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
            "int8": 1, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16, "float8_e4m3fn": 1,
            "float8_e5m2": 1, "uint16": 2, "uint32": 4, "uint64": 8}
ALIGN_BYTES = 64  # torch/_inductor/codecache.py: CPU blob entries are padded to 64 bytes


class LineIndex:
    """Offset -> 1-based line number."""

    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)


@dataclass
class DimRange:
    dim: int
    min: int | None = None
    max: int | None = None


@dataclass
class InputSpec:
    index: int
    name: str | None = None
    dtype: str | None = None  # at::kFloat, as the wrapper and its error messages spell it
    device: str | None = None  # cpu | cuda
    sizes: list[int | None] = field(default_factory=list)  # None: dynamic (see ranges) or not checked
    strides: list[int | None] = field(default_factory=list)
    ranges: list[DimRange] = field(default_factory=list)
    line: int | None = None  # line of check_input_N (or of the name assignment)


@dataclass
class ConstantSpec:
    index: int
    name: str | None = None
    original_fqn: str | None = None
    dtype: str | None = None  # float32, ...
    device: str | None = None  # cpu | cuda | ...
    shape: list[int] | None = None
    stride: list[int] | None = None
    data_size: int | None = None  # bytes
    offset: int | None = None
    from_folded: bool | None = None
    kind: str | None = None  # Parameter | Buffer | TensorConstant | FoldedConstant
    line: int | None = None


@dataclass
class OobAssert:
    kernel: str | None
    text: str
    line: int


@dataclass
class WrapperFacts:
    num_inputs: int | None = None
    num_outputs: int | None = None
    num_constants: int | None = None
    constants_in_so: bool | None = None  # last AOTInductorModelBase argument: weights inside the .so
    mmap_external: bool = False  # compiled with -D USE_MMAP_EXTERNAL: weights read from <h>_weights.blob
    inputs: list[InputSpec] = field(default_factory=list)
    outputs: list[tuple[int, str, int]] = field(default_factory=list)  # (index, name, line)
    constants: list[ConstantSpec] = field(default_factory=list)
    in_spec: str | None = None
    out_spec: str | None = None
    cxx: str | None = None
    kernels: list[tuple[str, int]] = field(default_factory=list)  # (name, line)
    oob_asserts: list[OobAssert] = field(default_factory=list)
    model_base_line: int | None = None


def _int_list(text: str) -> list[int] | None:
    m = re.fullmatch(r"\{\s*(?P<body>[-\d,\s]*)\}", text.strip())
    if not m:
        return None
    items = [x.strip() for x in m["body"].split(",") if x.strip()]
    if not all(re.fullmatch(r"-?\d{1,18}", x) for x in items):
        return None
    return [int(x) for x in items]


def kernels_and_asserts(text: str) -> tuple[list[tuple[str, int]], list[OobAssert]]:
    """Kernel definitions (name, line) and the 'index out of bounds' literals, each tied to the kernel above it."""
    idx = LineIndex(text)
    defs = []
    for m in RE_KERNEL_DEF.finditer(text):
        name = m["cpp"] or m["triton"] or m["call"]
        defs.append((m.start(), name, idx.line(m.start())))
    starts = [d[0] for d in defs]
    asserts = []
    seen: set[tuple[int, str]] = set()
    for rx in (RE_OOB, RE_OOB_TRITON):
        for m in rx.finditer(text):
            line = idx.line(m.start())
            if (line, m["text"]) in seen:
                continue
            seen.add((line, m["text"]))
            k = bisect.bisect_right(starts, m.start()) - 1
            asserts.append(OobAssert(kernel=defs[k][1] if k >= 0 else None, text=m["text"], line=line))
    asserts.sort(key=lambda a: a.line)
    kernels: list[tuple[str, int]] = []
    names: set[str] = set()
    for _, name, line in defs:
        if name not in names:
            names.add(name)
            kernels.append((name, line))
    return kernels, asserts


def parse_wrapper(text: str) -> WrapperFacts:
    """Everything :class:`WrapperFacts` describes, from the text of a ``*.wrapper.cpp``."""
    idx = LineIndex(text)
    facts = WrapperFacts()
    m = RE_MODEL_BASE.search(text)
    if m:
        facts.num_inputs, facts.num_outputs, facts.num_constants = (int(m["inputs"]), int(m["outputs"]),
                                                                    int(m["constants"]))
        facts.constants_in_so = m["in_so"] == "true"
        facts.model_base_line = idx.line(m.start())
    facts.mmap_external = "USE_MMAP_EXTERNAL" in text

    inputs: dict[int, InputSpec] = {}

    def inp(i: str, pos: int) -> InputSpec:
        spec = inputs.setdefault(int(i), InputSpec(index=int(i)))
        if spec.line is None:
            spec.line = idx.line(pos)
        return spec

    sizes: dict[int, dict[int, int]] = {}
    strides: dict[int, dict[int, int]] = {}
    ranges: dict[int, dict[int, DimRange]] = {}
    name_lines: dict[int, int] = {}
    for m in RE_INPUT_NAME.finditer(text):
        inputs.setdefault(int(m["i"]), InputSpec(index=int(m["i"]))).name = m["name"]
        name_lines[int(m["i"])] = idx.line(m.start())
    for m in RE_DTYPE.finditer(text):
        inp(m["i"], m.start()).dtype = m["dtype"]
    for m in RE_DEVICE.finditer(text):
        inp(m["i"], m.start()).device = m["dev"]
    for m in RE_DIM.finditer(text):
        inp(m["i"], m.start())
        sizes.setdefault(int(m["i"]), {})[int(m["dim"])] = int(m["v"])
    for m in RE_STRIDE.finditer(text):
        inp(m["i"], m.start())
        strides.setdefault(int(m["i"]), {})[int(m["dim"])] = int(m["v"])
    for m in RE_RANGE.finditer(text):
        inp(m["i"], m.start())
        r = ranges.setdefault(int(m["i"]), {}).setdefault(int(m["dim"]), DimRange(dim=int(m["dim"])))
        if m["side"] == "small":
            r.min = int(m["bound"])
        else:
            r.max = int(m["bound"])
    for i, spec in inputs.items():
        if spec.line is None:  # no check_input_N code: point at the name assignment
            spec.line = name_lines.get(i)
        dims = set(sizes.get(i, {})) | set(ranges.get(i, {})) | set(strides.get(i, {}))
        rank = max(dims) + 1 if dims else 0
        spec.sizes = [sizes.get(i, {}).get(d) for d in range(rank)]
        spec.strides = [strides.get(i, {}).get(d) for d in range(rank)]
        spec.ranges = [ranges[i][d] for d in sorted(ranges.get(i, {}))]
    facts.inputs = [inputs[i] for i in sorted(inputs)]
    facts.outputs = sorted((int(m["i"]), m["name"], idx.line(m.start())) for m in RE_OUTPUT_NAME.finditer(text))

    consts: dict[int, ConstantSpec] = {}
    for m in RE_CONSTANT.finditer(text):
        i = int(m["i"])
        c = consts.setdefault(i, ConstantSpec(index=i, line=idx.line(m.start())))
        f, v = m["field"], m["v"].strip()
        if f == "name":
            c.name = v.strip('"')
        elif f == "original_fqn":
            c.original_fqn = v.strip('"')
        elif f == "dtype":
            d = RE_DTYPE_NAME.search(v)
            c.dtype = d["d"] if d else v
        elif f == "device_type":
            d = RE_DEVICE_NAME.search(v)
            c.device = d["d"] if d else v
        elif f == "shape":
            c.shape = _int_list(v)
        elif f == "stride":
            c.stride = _int_list(v)
        elif f in ("data_size", "offset") and re.fullmatch(r"-?\d{1,18}", v):
            setattr(c, f, int(v))
        elif f == "from_folded":
            c.from_folded = v == "true"
        elif f == "type":
            t = RE_CONST_TYPE.search(v)
            c.kind = t["t"] if t else v
    facts.constants = [consts[i] for i in sorted(consts)]

    m = RE_IN_SPEC.search(text)
    facts.in_spec = m["spec"] if m else None
    m = RE_OUT_SPEC.search(text)
    facts.out_spec = m["spec"] if m else None
    m = RE_COMPILE_CMD.search(text)
    if m:
        facts.cxx = m["cmd"].split()[0]
    facts.kernels, facts.oob_asserts = kernels_and_asserts(text)
    return facts


def blob_bytes(constants: list[ConstantSpec]) -> int | None:
    """Bytes an external ``_weights.blob`` must hold for these constants (None if a size is unknown).

    Mirrors ``torch/_inductor/codecache.py``: constants not from folding, each padded to 64 bytes unless every
    constant lives on CUDA.
    """
    live = [c for c in constants if not c.from_folded]
    sizes = [c.data_size for c in live if c.data_size is not None]
    if len(sizes) < len(live):
        return None
    all_cuda = bool(live) and all(c.device == "cuda" for c in live)
    return sum(size if all_cuda else -(-size // ALIGN_BYTES) * ALIGN_BYTES for size in sizes)


def tensor_bytes(shape: list[int], stride: list[int], offset: int, itemsize: int) -> int:
    """Storage bytes a strided view needs: (offset + last reachable element + 1) * itemsize."""
    if any(s == 0 for s in shape):
        return offset * itemsize
    extent = sum((s - 1) * st for s, st in zip(shape, stride))
    return (offset + extent + 1) * itemsize
