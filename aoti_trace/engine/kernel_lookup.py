"""Map an index-out-of-bounds assertion back to its kernel, launch site, model inputs and constants, from the
generated code.

This automates steps 2, 4 and 5 of the index-out-of-bounds procedure (docs/design/aoti-signatures.md §6). In AOT mode
the C++ wrapper (``inductor_aot_wrapper_code`` in the trace, ``*.wrapper.cpp`` in a package) embeds every Triton
kernel's source as an ``async_compile.triton('<name>', '''...''')`` comment, followed by the launch sites
``call_<name>(arg, ...)`` with their ``// Topologically Sorted Source Nodes: [...], Original ATen: [...]`` comment,
the size symbols ``int64_t s70 = arg2_1_size[0];``, the input names ``inputs_info_[0].name = "arg2_1";`` and the
constants ``constants_info_[0].name = "emb_weight"; ... .shape = {50, 8}; ... .original_fqn = "emb.weight";``.
CPU kernels are C++ functions (``extern "C" void cpp_fused_...(const int64_t* in_ptr0, ...)``, in
``inductor_aot_kernel_code`` / ``*.kernel.cpp``) that check ``AOTI_TORCH_CHECK(..., "index out of bounds: ...")`` and
are launched as ``cpp_fused_...((const int64_t*)(arg3_1.data_ptr()), ...)``.

Given the assertion text (``index out of bounds: 0 <= tmp4 < ks0`` or ``... < 50L``) and optionally the kernel-file
line, it finds: the kernel name, the kernel argument that holds the bound (``ks0``), the wrapper symbol passed for it
(``s70``), the model input and dimension that symbol is read from, for a literal bound the constant whose size it is
(``emb.weight``, 50 rows), the input that feeds the out-of-range index, and the source nodes / ATen ops of the
launch. Pure text functions on generated code: no Polars, no torch.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

KERNEL_BLOCK = re.compile(r"async_compile\.triton\('(?P<name>\w+)', '''\n(?P<src>.*?)'''", re.S)
CPP_KERNEL = re.compile(r'extern "C"\s+void\s+(?P<name>\w+)\((?P<params>[^)]*)\)')
CONST_NAME = re.compile(r'constants_info_\[(?P<idx>\d+)\]\.name = "(?P<name>\w+)";')
CONST_SHAPE = re.compile(r"constants_info_\[(?P<idx>\d+)\]\.shape = \{(?P<shape>[^}]*)\};")
CONST_FQN = re.compile(r'constants_info_\[(?P<idx>\d+)\]\.original_fqn = "(?P<fqn>[^"]*)";')
DATA_PTR = re.compile(r"^\((?:const )?[\w:]+\s*\*\)\((?P<name>\w+)\.data_ptr\(\)\)$")
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
    index_input_names: list[str] = field(default_factory=list)
    bound_value: int | None = None  # a literal bound (``< 50L``)
    bound_constant: str | None = None  # the constant (original fqn) whose size the literal bound is
    bound_constant_shape: str | None = None
    bound_constant_dim: int | None = None
    language: str = "triton"  # triton | cpp
    source_nodes: str | None = None
    aten_ops: str | None = None
    launch: str | None = None  # the call_<kernel>(...) line


def _split_args(text: str) -> list[str]:
    """Top-level comma split of a call's argument text."""
    out: list[str] = []
    depth = 0
    cur: list[str] = []
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
    """Kernel pointer parameters (in_ptrN) that the index variable is computed from, following tmp assignments
    (Triton ``tmp3 = tl.load(in_ptr0 + x0)``, C++ ``auto tmp3 = in_ptr0[x0];``)."""
    assigns = dict(re.findall(r"^\s*(?:auto\s+)?(tmp\d+) = (.+?);?$", src, re.M))
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


def _cpp_kernels(code: str) -> Iterator[tuple[str, list[str], str]]:
    """``(name, params, source)`` of every C++ kernel function in ``code``."""
    heads = list(CPP_KERNEL.finditer(code))
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(code)
        params = [p.strip().rsplit(" ", 1)[-1].lstrip("*") for p in m["params"].split(",") if p.strip()]
        yield m["name"], params, code[m.start():end]


def find_kernel(wrapper: str, assertion: str, line: int | None = None) -> KernelMatch | None:
    """The kernel whose source raises ``assertion`` (closest to ``line`` when several do). ``wrapper`` is the generated
    code: the wrapper, with the C++ kernel code appended for CPU models."""
    literal = f'"{assertion}"'
    candidates = []
    for m in KERNEL_BLOCK.finditer(wrapper):
        src = m["src"]
        at = src.find(literal)
        if at < 0:
            continue
        src_line = src.count("\n", 0, at) + 1
        d = KERNEL_DEF.search(src)
        params = [p.split(":")[0].strip() for p in d["params"].split(",") if p.strip()] if d else []
        candidates.append((abs(src_line - line) if line else 0, m["name"], src, src_line, params, "triton"))
    if not candidates and literal in wrapper:
        for name, params, src in _cpp_kernels(wrapper):
            at = src.find(literal)
            if at >= 0:
                candidates.append((0, name, src, src.count("\n", 0, at) + 1, params, "cpp"))
    if not candidates:
        return None
    _, name, src, src_line, params, language = min(candidates, key=lambda c: c[:2])
    match = KernelMatch(kernel=name, kernel_line=src_line, params=params, language=language)
    bound = re.search(r"< (\w+)$", assertion)
    if bound and bound[1] in match.params:
        match.bound_param = bound[1]
    elif bound and re.fullmatch(r"\d+L?", bound[1]):
        match.bound_value = int(bound[1].rstrip("L"))
    var = re.search(r"\b(tmp\d+)\b", assertion)
    _resolve_launch(wrapper, match, src, var[1] if var else None)
    return match


def _arg_name(arg: str) -> str:
    """``(const float*)(emb_weight.data_ptr())`` -> ``emb_weight``; a plain name stays as it is."""
    m = DATA_PTR.match(arg.strip())
    return m["name"] if m else arg.strip()


def _constants(wrapper: str) -> dict[str, tuple[str, list[int]]]:
    """Wrapper constant name -> (original fqn, shape)."""
    names = {m["idx"]: m["name"] for m in CONST_NAME.finditer(wrapper)}
    shapes = {m["idx"]: [int(s) for s in re.findall(r"-?\d+", m["shape"])] for m in CONST_SHAPE.finditer(wrapper)}
    fqns = {m["idx"]: m["fqn"] for m in CONST_FQN.finditer(wrapper)}
    return {name: (fqns.get(idx) or name, shapes.get(idx, [])) for idx, name in names.items()}


def _resolve_launch(wrapper: str, match: KernelMatch, src: str, index_var: str | None) -> None:
    prefix = "call_" if match.language == "triton" else ""
    call = re.search(rf"^(?P<indent>\s*){prefix}{match.kernel}\((?P<args>.*)\);\s*$", wrapper, re.M)
    if not call:
        return
    match.launch = call.group(0).strip()
    before = wrapper[: call.start()].rstrip().rsplit("\n", 1)[-1]
    after = wrapper[call.end():].lstrip("\n").split("\n", 1)[0]
    nodes = SOURCE_NODES.search(before) or SOURCE_NODES.search(after)
    if nodes:
        match.source_nodes, match.aten_ops = nodes["nodes"], nodes["aten"]
    args = [_arg_name(a) for a in _split_args(call["args"])]
    arg_of = dict(zip(match.params, args))
    inputs = {m["name"]: int(m["idx"]) for m in INPUT_NAME.finditer(wrapper)}
    sizes = {m["sym"]: (m["arg"], int(m["dim"])) for m in SIZE_SYMBOL.finditer(wrapper)}
    if match.bound_value is not None:
        consts = _constants(wrapper)
        for ptr in match.params:
            fqn_shape = consts.get(arg_of.get(ptr, ""))
            if fqn_shape and match.bound_value in fqn_shape[1]:
                match.bound_constant, shape = fqn_shape
                match.bound_constant_shape = "x".join(map(str, shape))
                match.bound_constant_dim = shape.index(match.bound_value)
                break
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
            if arg is not None and arg in inputs:
                match.index_inputs.append(inputs[arg])
                match.index_input_names.append(arg)


def describe(m: KernelMatch) -> str:
    """One sentence for the finding's message."""
    parts = [f"kernel {m.kernel}"]
    if m.source_nodes or m.aten_ops:
        parts.append(f"(source nodes [{m.source_nodes}], ATen [{m.aten_ops}])")
    if m.bound_input is not None:
        parts.append(f"; the bound {m.bound_param} is {m.bound_symbol} = size({m.bound_dim}) of input {m.bound_input}")
    if m.bound_constant is not None:
        parts.append(f"; the bound {m.bound_value} is size({m.bound_constant_dim}) of the constant {m.bound_constant} "
                     f"({m.bound_constant_shape})")
    if m.index_inputs:
        parts.append(f"; the index comes from input {', '.join(map(str, m.index_inputs))}")
    return " ".join(parts).replace(" ;", ";")


def _inputs(indices: list[int], names: list[str]) -> str:
    if not indices:
        return ""
    parts = [f"input {i} (`{n}`)" if n else f"input {i}" for i, n in zip(indices, names + [""] * len(indices))]
    return " and ".join(parts)


def remedy(m: KernelMatch, env_flags: dict[str, str] | None = None) -> str:
    """The remedy for an index-out-of-bounds finding, written from what the lookup found (replaces the rule's
    generic one: the kernel is named, so there is nothing left to search for in the package)."""
    site = f"`{m.kernel}`" + (f" (source nodes [{m.source_nodes}], ATen [{m.aten_ops}])" if m.source_nodes else "")
    index = _inputs(m.index_inputs, m.index_input_names) or "an input"
    check = " ".join(f"{k}={v}" for k, v in (env_flags or {}).items())
    if m.bound_constant is not None:
        n = m.bound_value
        assert n is not None  # bound_constant is only set from a literal bound (_resolve_launch)
        return (
            f"The index data is larger than the table it indexes. Kernel {site} reads the constant `{m.bound_constant}` "
            f"(shape {m.bound_constant_shape}), which has {n} entries along dim {m.bound_constant_dim}, and the index "
            f"comes from {index}: it holds a value below 0 or of {n} or more. This is not a shape problem; typical "
            f"causes are token or class ids from a tokenizer or label map with more entries than `{m.bound_constant}`.\n\n"
            f"1. Validate the ids before the call: `assert 0 <= int(ids.min()) and int(ids.max()) < {n}`.\n"
            f"2. If out-of-range ids can occur, map or clamp them (`ids.clamp(0, {n - 1})`); if they are right, the "
            f"model's table is too small: export it with one that covers them."
        )
    rerun = f"`{check}`" if check else "`AOTI_RUNTIME_CHECK_INPUTS=1`"
    if m.bound_input is not None and not m.index_inputs:
        name = f" (`{m.bound_input_name}`)" if m.bound_input_name else ""
        return (
            f"Kernel {site} indexes dim {m.bound_dim} of input {m.bound_input}{name}, whose size is the bound "
            f"`{m.bound_param}` ({m.bound_symbol}); the index is computed inside the model (no input feeds it), so "
            f"input {m.bound_input} was smaller along dim {m.bound_dim} than the model needs: a size outside the "
            f"exported `Dim` range, or an empty tensor.\n\n"
            f"1. Rerun with {rerun}: the input check then names the dimension and its allowed range.\n"
            f"2. Feed sizes inside the exported range, or re-export with a `Dim(min=...)` and example inputs that cover "
            f"the sizes you serve."
        )
    if m.bound_input is not None:
        name = f" (`{m.bound_input_name}`)" if m.bound_input_name else ""
        return (
            f"Kernel {site} indexes dim {m.bound_dim} of input {m.bound_input}{name}: its bound `{m.bound_param}` is "
            f"that size at run time ({m.bound_symbol}), and the index comes from {index}. Either the index holds a "
            f"value outside `0 .. size - 1`, or input {m.bound_input} is smaller than the index data expects (an empty "
            f"tensor makes the bound 0).\n\n"
            f"1. Check before the call: `assert int(index.max()) < x.size({m.bound_dim})` for these two inputs, and "
            f"guard empty inputs (`x.numel() == 0`).\n"
            f"2. If the sizes come from a dynamic dimension, rerun with {rerun} to check them against the exported "
            f"`Dim` range."
        )
    bound = f"the bound `{m.bound_param}`" if m.bound_param else (
        f"the literal bound {m.bound_value}" if m.bound_value is not None else "its bound")
    return (
        f"Kernel {site} indexed outside {bound}; the index comes from {index}. Check that input's values against the "
        f"size they index before the call, and rerun with `AOTI_RUNTIME_CHECK_INPUTS=1` to rule out inputs outside "
        f"the compiled shapes."
    )


def remedy_from_assert(upper: str | None, kernel: str | None, env_flags: dict[str, str] | None = None) -> str | None:
    """The remedy for an index-out-of-bounds assertion read from a log alone (no package or wrapper code to look the
    kernel up in), from its bound: a literal size is a table (the index data is too large for it), a size symbol
    (``ks0``, ``s1``) a dynamic dimension. None when the assertion shows no bound."""
    if not upper:
        return None
    upper = upper.strip()
    site = f"The generated kernel `{kernel}`" if kernel else "A generated kernel"
    check = " ".join(f"{k}={v}" for k, v in (env_flags or {}).items()) or "AOTI_RUNTIME_CHECK_INPUTS=1"
    literal = upper.rstrip("L")
    if literal.isdigit():
        n = int(literal)
        return (
            f"{site} read an index outside a fixed size of {n}: a size compiled into the kernel, usually a weight "
            f"or table with {n} rows (or an input dimension compiled as static), so the index data held a value "
            f"below 0 or of {n} or more. Typical causes are token, position or class ids from a tokenizer, processor "
            f"or label map with more entries than the model's table.\n\n"
            f"1. Validate the ids before the call: `assert 0 <= int(ids.min()) and int(ids.max()) < {n}`.\n"
            f"2. If out-of-range ids can occur, map or clamp them (`ids.clamp(0, {n - 1})`); if they are right, the "
            f"table is too small (a checkpoint or vocabulary size that does not match the tokenizer).\n"
            f"3. To name the table, analyse the run with its .pt2 package or TORCH_TRACE log (`aoti-trace analyze "
            f"LOG PACKAGE`): the kernel is then looked up and its constant named."
        )
    return (
        f"{site} read an index outside `{upper}`, a size known only at run time (a dynamic dimension): an input was "
        f"smaller along that dimension than the index data expects (an empty tensor makes the bound 0), or the index "
        f"held a value outside `0 .. {upper} - 1`.\n\n"
        f"1. Rerun with `{check}` to check the inputs against the compiled shapes.\n"
        f"2. Guard empty inputs (`x.numel() == 0`) and feed sizes inside the exported `Dim` range; to name the "
        f"input, analyse the run with its .pt2 package or TORCH_TRACE log."
    )
