"""Map a device-side assertion back to its kernel, launch site and model input, from the generated wrapper code.

This automates steps 2, 4 and 5 of the Triton index-out-of-bounds procedure (aoti-signatures.md §6). In AOT mode
the C++ wrapper (``inductor_aot_wrapper_code`` in the trace, ``*.wrapper.cpp`` in a package) embeds every Triton
kernel's source as an ``async_compile.triton('<name>', '''...''')`` comment, followed by the launch sites
``call_<name>(arg, ...)`` with their ``// Topologically Sorted Source Nodes: [...], Original ATen: [...]`` comment,
the size symbols ``int64_t s70 = arg2_1_size[0];`` and the input names ``inputs_info_[0].name = "arg2_1";``.

Given the assertion text (``index out of bounds: 0 <= tmp4 < ks0``) and optionally the kernel-file line, it finds:
the kernel name, the kernel argument that holds the bound (``ks0``), the wrapper symbol passed for it (``s70``), the
model input and dimension that symbol is read from, the input that feeds the out-of-range index, and the source
nodes / ATen ops of the launch. Pure text functions: no Polars, no torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

KERNEL_BLOCK = re.compile(r"async_compile\.triton\('(?P<name>\w+)', '''\n(?P<src>.*?)'''", re.S)
KERNEL_DEF = re.compile(r"def (?P<name>\w+)\((?P<params>[^)]*)\)")
SIZE_SYMBOL = re.compile(r"int64_t (?P<sym>\w+) = (?P<arg>\w+)_size\[(?P<dim>\d+)\];")
INPUT_NAME = re.compile(r'inputs_info_\[(?P<idx>\d+)\]\.name = "(?P<name>\w+)";')
SOURCE_NODES = re.compile(r"// (?:Topologically Sorted|Unsorted) Source Nodes: \[(?P<nodes>[^\]]*)\], Original ATen: \[(?P<aten>[^\]]*)\]")


@dataclass
class KernelMatch:
    """What the wrapper says about the kernel that raised an assertion."""

    kernel: str
    kernel_line: int  # line of the assert inside the embedded kernel source (1-based)
    params: list[str] = field(default_factory=list)
    bound_param: str | None = None  # kernel parameter named in the assertion's bound, e.g. ks0
    bound_symbol: str | None = None  # wrapper symbol passed for it, e.g. s70
    bound_input: int | None = None  # model input index whose size defines the bound
    bound_input_name: str | None = None  # its wrapper name, e.g. arg2_1
    bound_dim: int | None = None
    index_inputs: list[int] = field(default_factory=list)  # model inputs that feed the index variable
    source_nodes: str | None = None
    aten_ops: str | None = None
    launch: str | None = None  # the call_<kernel>(...) line


def _split_args(text: str) -> list[str]:
    """Top-level comma split of a call's argument text."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _index_pointers(src: str, var: str) -> set[str]:
    """Kernel pointer parameters (in_ptrN) that the index variable is computed from, following tmp assignments."""
    assigns = dict(re.findall(r"^\s*(tmp\d+) = (.+)$", src, re.M))
    seen, todo, ptrs = set(), [var], set()
    while todo:
        v = todo.pop()
        if v in seen or v not in assigns:
            continue
        seen.add(v)
        rhs = assigns[v]
        ptrs.update(re.findall(r"\bin_ptr\d+\b", rhs))
        todo += re.findall(r"\btmp\d+\b", rhs)
    return ptrs


def find_kernel(wrapper: str, assertion: str, line: int | None = None) -> KernelMatch | None:
    """The kernel whose embedded source raises ``assertion`` (closest to ``line`` when several do)."""
    literal = f'"{assertion}"'
    candidates = []
    for m in KERNEL_BLOCK.finditer(wrapper):
        src = m["src"]
        at = src.find(literal)
        if at < 0:
            continue
        src_line = src.count("\n", 0, at) + 1
        candidates.append((abs(src_line - line) if line else 0, m["name"], src, src_line))
    if not candidates:
        return None
    _, name, src, src_line = min(candidates)
    match = KernelMatch(kernel=name, kernel_line=src_line)
    d = KERNEL_DEF.search(src)
    if d:
        match.params = [p.split(":")[0].strip() for p in d["params"].split(",") if p.strip()]
    bound = re.search(r"< (\w+)$", assertion)
    if bound and bound[1] in match.params:
        match.bound_param = bound[1]
    var = re.search(r"\b(tmp\d+)\b", assertion)
    _resolve_launch(wrapper, match, src, var[1] if var else None)
    return match


def _resolve_launch(wrapper: str, match: KernelMatch, src: str, index_var: str | None) -> None:
    call = re.search(rf"^(?P<indent>\s*)call_{match.kernel}\((?P<args>.*)\);\s*$", wrapper, re.M)
    if not call:
        return
    match.launch = call.group(0).strip()
    before = wrapper[: call.start()].rstrip().rsplit("\n", 1)[-1]
    nodes = SOURCE_NODES.search(before)
    if nodes:
        match.source_nodes, match.aten_ops = nodes["nodes"], nodes["aten"]
    args = _split_args(call["args"])
    arg_of = dict(zip(match.params, args))
    inputs = {m["name"]: int(m["idx"]) for m in INPUT_NAME.finditer(wrapper)}
    sizes = {m["sym"]: (m["arg"], int(m["dim"])) for m in SIZE_SYMBOL.finditer(wrapper)}
    if match.bound_param:
        sym = arg_of.get(match.bound_param)
        match.bound_symbol = sym
        if sym in sizes:
            arg, dim = sizes[sym]
            match.bound_input_name, match.bound_dim = arg, dim
            match.bound_input = inputs.get(arg)
    if index_var:
        for ptr in sorted(_index_pointers(src, index_var)):
            arg = arg_of.get(ptr)
            if arg in inputs:
                match.index_inputs.append(inputs[arg])


def describe(m: KernelMatch) -> str:
    """One sentence for the finding's message."""
    parts = [f"kernel {m.kernel}"]
    if m.source_nodes or m.aten_ops:
        parts.append(f"(source nodes [{m.source_nodes}], ATen [{m.aten_ops}])")
    if m.bound_input is not None:
        parts.append(f"; the bound {m.bound_param} is {m.bound_symbol} = size({m.bound_dim}) of input {m.bound_input}")
    if m.index_inputs:
        parts.append(f"; the index comes from input {', '.join(map(str, m.index_inputs))}")
    return " ".join(parts).replace(" ;", ";")
