"""Reasoners: computed, cross-source enrichment of findings that a YAML match tree cannot express.

After a rule has matched and its finding is built, :func:`enrich` runs every reasoner registered for the
finding's family. A reasoner takes ``(finding, frames)`` and returns a (possibly) updated finding: extra
``fields``, ``evidence`` items, ``env_flags`` or a sentence appended to the ``message``. Reasoners never create
or drop findings and never change the fingerprint (computed before enrichment from the rule's own captures).
They are pure functions of the frames (read through :mod:`aoti_trace.engine.query` helpers); what they need from
files that the frames point at (generated code, the user's source) comes from the derived frames ``code`` and
``sources``, which ingest reads on first use.

Registered:

* ``illegal_memory_access`` -> :func:`launch_blocking`: without ``CUDA_LAUNCH_BLOCKING=1`` (ROCm rules:
  ``HIP_LAUNCH_BLOCKING=1``) in the run's environment (``process.env``) the reported location is possibly misplaced.
* ``segfault`` -> :func:`crash_phase`: where did it happen (``faults.phase``, else the compile status).

* ``triton_index_oob`` -> :func:`oob_kernel`: maps the device assert (``device_asserts``) to its kernel, launch
  site, source nodes / ATen ops, and the model inputs that define the bound and feed the index, by reading the
  generated wrapper code of the ``code`` frame (the trace's wrapper dumps or, failing that, the package's
  kernel entries); see :mod:`aoti_trace.engine.kernel_lookup`.
* ``illegal_memory_access``, ``triton_index_oob``, ``nan_assert`` -> :func:`printer_kernel`: when the run printed
  the AOTI intermediate value printer's output, names the last kernel launched without an ``after_launch`` (the
  crash site) and the inputs whose statistics are suspicious (NaN/Inf, or a max far above the others).
* ``device_mismatch`` -> :func:`device_names`: names a numeric device type (``but got: 14`` is meta) and states
  the compile device (``compiles.device_key`` from the trace, else the package's ``AOTI_DEVICE_KEY``).
* ``dtype_mismatch`` -> :func:`dtype_names`: names a numeric ScalarType (``but got: 7`` is float64).
* ``cpp_compile_error``, ``environment`` -> :func:`aoti_trace.engine.compiler_errors.first_compiler_error`: the
  compiler's first error line, cited with a build failure reported at its wrapping exception or a later error;
  for ``cpp_compile_error`` also :func:`~aoti_trace.engine.compiler_errors.triton_pointed_statement`: the kernel
  statement that Triton's ``CompilationError: at L:C:`` points at.
* ``missing_custom_op``, ``lowering_error``, ``export_error``, ``dtype_mismatch``, ``shape_mismatch``,
  ``device_mismatch`` -> :func:`fx_node`: the graph node that raised (FX's 'While executing %node : ... target=op').
* run-time families -> :func:`aoti_runner_call`: the AOTI runner call that reported the failure ('API call failed
  at ... model_container_runner.cpp, line 145').
* ``export_error`` -> :func:`graph_break_headline`: the headline of Dynamo's graph-break report (the line above its
  'Explanation:') for a finding anchored at its 'Developer debug context:' line.
* ``export_error``, ``dynamic_shape_violation`` -> :func:`meta_kernel_op`: the op whose meta kernel needed a guard
  that could not be decided (fake tensor's 'failed while attempting to run meta for OP' below the anchor).
* ``deprecated_api`` -> :func:`deprecated_call_site`: the user line that called ``torch._export.aot_compile``
  (``compiles.user_frame`` + the ``stacks`` source text) and the ``aoti_compile_and_package`` rewrite of that line.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Callable

import polars as pl

from aoti_trace.engine import query
from aoti_trace.engine.compiler_errors import first_compiler_error, triton_pointed_statement
from aoti_trace.engine.cited import cite_line, near
from aoti_trace.model.findings import Evidence, Finding
from aoti_trace.model.frames import Frames
from aoti_trace.ingest.code import CODE_ARTIFACTS, MAX_CODE_ARTIFACTS

Reasoner = Callable[[Finding, Frames], Finding]
REASONERS: dict[str, list[Reasoner]] = {
    "cpp_compile_error": [first_compiler_error, triton_pointed_statement], "environment": [first_compiler_error],
    # a dtype or instruction the GPU lacks is often reported by Triton's compiler, pointing at the kernel
    "cuda_version_mismatch": [triton_pointed_statement],
}


def reasoner(*families: str) -> Callable[[Reasoner], Reasoner]:
    """Register a reasoner for findings of ``families``."""

    def deco(fn: Reasoner) -> Reasoner:
        for fam in families:
            REASONERS.setdefault(fam, []).append(fn)
        return fn

    return deco


def enrich(finding: Finding, frames: Frames) -> Finding:
    for fn in REASONERS.get(finding.family, []):
        finding = fn(finding, frames)
    return finding


def parse_env(text: str | None) -> dict[str, str]:
    """``process.env`` ('K=V' space-separated) as a dict."""
    out: dict[str, str] = {}
    for item in (text or "").split():
        key, sep, value = item.partition("=")
        if sep:
            out[key] = value
    return out


def _add(finding: Finding, *, fields: dict[str, str] | None = None, env: dict[str, str] | None = None,
         note: str | None = None, evidence: list[Evidence] | None = None, advice: str | None = None) -> Finding:
    """Add what a reasoner found: fields, rerun variables, a note on the message, evidence, and ``advice``: a first
    paragraph of the remedy that uses the specifics (the rule's generic steps follow it)."""
    update: dict[str, Any] = {}
    if advice:
        update["remedy"] = f"{advice}\n\n{finding.remedy}"
    if fields:
        update["fields"] = {**finding.fields, **fields}
    if env:
        update["env_flags"] = {**finding.env_flags, **env}
    if note:
        update["message"] = f"{finding.message} ({note})"
    if evidence:
        update["evidence"] = (list(finding.evidence) + evidence)[:4]
    return replace(finding, **update)


@reasoner("illegal_memory_access")
def launch_blocking(finding: Finding, frames: Frames) -> Finding:
    """CUDA errors are reported asynchronously: unless the run set CUDA_LAUNCH_BLOCKING=1, the location is unsure.
    A ROCm rule (its rerun variables name HIP_LAUNCH_BLOCKING) gets the HIP runtime's variable instead."""
    runtime, var = ("the HIP runtime", "HIP_LAUNCH_BLOCKING") if "HIP_LAUNCH_BLOCKING" in finding.env_flags else (
        "CUDA", "CUDA_LAUNCH_BLOCKING")
    procs = query.run_rows(frames, "process", finding.run_id, ["env"])
    known = [p["env"] for p in procs if p.get("env") is not None]
    value = parse_env(known[0]).get(var) if known else None
    if value == "1":
        return _add(finding, fields={"launch_blocking": "1"})
    state = "unknown" if not known else ("unset" if value is None else value)
    return _add(
        finding,
        fields={"launch_blocking": state},
        env={var: "1"},
        note=f"location possibly misplaced: {runtime} reports errors asynchronously; rerun with {var}=1",
    )


def _line_near(finding: Finding, frames: Frames, before: int, after: int, pattern: str
               ) -> tuple[dict[str, Any], list[str], list[Evidence]] | None:
    """The first line within ``before``/``after`` lines of the finding's first cited line (its rank only) that
    matches ``pattern`` (Rust regex, on at most 2,000 characters): the row, the pattern's groups, and the evidence
    to add for it (nothing when the finding cites that line already)."""
    anchor = finding.evidence[0] if finding.evidence else None
    lines = frames["lines"]
    if anchor is None or anchor.line is None or anchor.path is None or lines.height == 0:
        return None
    hit = (near(lines, finding.run_id, anchor, before, after)
           .with_columns(pl.col("text").str.slice(0, 2000).str.extract_groups(pattern).alias("_m"))
           .filter(pl.col("_m").struct.field("1").is_not_null()).head(1).to_dicts())
    if not hit:
        return None
    row = hit[0]
    groups = [row["_m"][k] for k in sorted(row["_m"], key=int)]
    cited = any(e.line == row["lineno"] and e.path == anchor.path for e in finding.evidence)
    return row, groups, [] if cited else [cite_line(row, anchor.path)]


# FX's note on an exception raised while it ran a node ('While executing %einsum_1 : [num_users=1] =
# call_function[target=torch.ops.tensorrt.einsum](args = ...)'): the graph node, and the op, that raised
_FX_NODE = r"^While executing %(\w+) : .*?target=([\w.:]+)"
FX_WINDOW = 12  # lines below the finding's anchor where that note is looked for


@reasoner("missing_custom_op", "lowering_error", "export_error", "dtype_mismatch", "shape_mismatch",
          "device_mismatch")
def fx_node(finding: Finding, frames: Frames) -> Finding:
    """The graph node that raised, from FX's 'While executing %node : ... target=op' note below the error: cited,
    and named (fields ``fx_node``, ``fx_target``)."""
    found = _line_near(finding, frames, 0, FX_WINDOW, _FX_NODE)
    if found is None:
        return finding
    _, (node, target), evidence = found
    return _add(finding, fields={"fx_node": node, "fx_target": target}, evidence=evidence,
                note=f"graph node %{node} ({target})",
                advice=f"It was raised while running graph node `%{node}`, a call of `{target}`: that op (and its "
                       f"registration: kernels, fake/meta, autograd) is where to look first.")


# AOTI's runner wrapping an error of the compiled model's run: 'API call failed at .../model_container_runner.cpp,
# line 145' (the run_func_(...) call that failed)
_AOTI_API = r"API call failed at (\S+), line (\d+)"
API_WINDOW = 12


@reasoner("illegal_memory_access", "triton_index_oob", "shape_mismatch", "dtype_mismatch", "device_mismatch",
          "out_of_memory", "nan_assert", "constant_loading", "cuda_version_mismatch")
def aoti_runner_call(finding: Finding, frames: Frames) -> Finding:
    """The AOTI runner call that reported the failure ('API call failed at ... model_container_runner.cpp, line
    145', below the run_func_(...) call): cited, and named (fields ``aoti_api_file``, ``aoti_api_line``) - the
    error came out of the compiled package's run, through AOTI's C++ runner."""
    found = _line_near(finding, frames, API_WINDOW, API_WINDOW, _AOTI_API)
    if found is None:
        return finding
    _, (file, line), evidence = found
    where = f"{file.rsplit('/', 1)[-1]}:{line}"
    return _add(finding, fields={"aoti_api_file": file, "aoti_api_line": line}, evidence=evidence,
                advice=f"It surfaced through AOTI's C++ runner ({where}): the compiled model's run failed, so rerun "
                       "the same inputs with the checks of the ladder to place it.")


GB_WINDOW = 12  # lines above a graph-break report's debug context where its headline is looked for


@reasoner("export_error")
def graph_break_headline(finding: Finding, frames: Frames) -> Finding:
    """The headline of Dynamo's graph-break report ('Unsupported Tensor.item() call with capture_scalar_outputs=
    False', 'Data-dependent branching': the line above its 'Explanation:'), for a finding anchored at the report's
    'Developer debug context:' line: cited, and named (field ``graph_break``)."""
    anchor = finding.evidence[0] if finding.evidence else None
    lines = frames["lines"]
    if anchor is None or anchor.line is None or "Developer debug context:" not in anchor.text or lines.height == 0:
        return finding
    above = (near(lines, finding.run_id, anchor, GB_WINDOW, 0).filter(pl.col("lineno") < anchor.line)
             .select("lineno", "prefix", "text", "raw").to_dicts())
    explanation = next((i for i in range(len(above) - 1, -1, -1)
                        if (above[i]["text"] or "").strip().startswith("Explanation:")), None)
    head = next((r for r in reversed(above[:explanation]) if (r["text"] or "").strip()), None) \
        if explanation is not None else None
    if head is None:
        return finding
    headline = head["text"].strip()
    evidence = [] if any(e.line == head["lineno"] and e.path == anchor.path for e in finding.evidence) else [
        cite_line(head, anchor.path)]
    return _add(finding, fields={"graph_break": headline[:200]}, evidence=evidence, note=headline[:120],
                advice=f"Dynamo's report names it: \"{headline[:200]}\"; its `Hint:` lines say what to change.")


# Inductor's LoweringException lists the node it was lowering below its message ('  target: aten.mm.default',
# then '  args[0]: TensorBox(...)'): the op that failed to lower, or that autotuning found no kernel for
_LOWERING_TARGET = r"^\s*target: ([\w.:]+)\s*$"
TARGET_WINDOW = 8  # lines below the finding's anchor where that line is looked for


@reasoner("lowering_error", "autotune_error")
def lowering_target(finding: Finding, frames: Frames) -> Finding:
    """The op Inductor was lowering when it failed: the ``target: op`` line of a LoweringException, just below its
    message. Names the op (field ``lowering_target``), cites that line, and says where to look."""
    found = _line_near(finding, frames, 0, TARGET_WINDOW, _LOWERING_TARGET)
    if found is None:
        return finding
    _, (op,), evidence = found
    if finding.family == "autotune_error":
        advice = (f"The op without a usable kernel is `{op}` (the `args[...]` lines below it give its inputs' "
                  "dtypes, sizes and strides): those are what the candidates could not handle.")
        if "flex_attention" in op:  # its templates have no ATen fallback
            advice += (" FlexAttention has no ATen fallback: smaller blocks (`kernel_options={\"BLOCK_M\": 32, "
                       "\"BLOCK_N\": 32, \"num_stages\": 1}`) fit GPUs with less shared memory.")
    else:
        advice = (f"Inductor failed while lowering `{op}` (the `args[...]` lines below it give its inputs' "
                  "layouts): a call of that op in your model is the place to change or to reduce to a repro.")
    return _add(finding, fields={"lowering_target": op}, evidence=evidence, note=f"while lowering {op}",
                advice=advice)


# select_algorithm's line after a failed candidate: it dropped that choice and benchmarked the others
_IGNORED_CHOICE = r"^(Ignoring this choice)\.?\s*$"
IGNORED_WINDOW = 3  # lines below the finding's anchor where that line is looked for


@reasoner("autotune_error")
def ignored_choice(finding: Finding, frames: Frames) -> Finding:
    """Whether the autotuner went on without the failed candidate ('Ignoring this choice.' just below it): then the
    error cost a choice (speed), and only a later failure of the run is a failure of the compile. Says so (field
    ``choice_ignored``) and cites nothing new."""
    found = _line_near(finding, frames, 0, IGNORED_WINDOW, _IGNORED_CHOICE)
    if found is None:
        return finding
    return _add(finding, fields={"choice_ignored": "true"}, note="the autotuner ignored this choice and went on",
                advice="The autotuner dropped this candidate and benchmarked the others (\"Ignoring this choice\"): "
                       "if the run went on, this only narrowed the choices (speed, not correctness); if it failed "
                       "later, that later error is the cause to read.")


# clang on Windows without Visual Studio: it then has no C runtime or Windows SDK headers (stdio.h) to include
_NO_MSVC = r"(unable to find a Visual Studio installation)"
MSVC_WINDOW = 20  # lines above the finding's anchor where clang's warning is looked for


@reasoner("environment")
def visual_studio_missing(finding: Finding, frames: Frames) -> Finding:
    """Clang's ``warning: unable to find a Visual Studio installation`` above a Windows build failure: the reason the
    standard headers are missing. Cited, and said first (field ``visual_studio``)."""
    found = _line_near(finding, frames, MSVC_WINDOW, 0, _NO_MSVC)
    if found is None:
        return finding
    _, _, evidence = found
    return _add(finding, fields={"visual_studio": "not found"}, evidence=evidence,
                advice="Clang found no Visual Studio installation, so the C runtime and Windows SDK headers are not on "
                       "its include path: install the Visual Studio Build Tools (\"Desktop development with C++\"), or "
                       "start from the \"x64 Native Tools Command Prompt for VS\".")


# fake tensor's log line when an op's meta kernel raised while tracing (a guard on an unbacked size, mostly)
_META_OP = r"failed while attempting to run meta for ([\w.:]+)"
META_WINDOW = 20  # lines below the finding's anchor where that line is looked for


@reasoner("export_error", "dynamic_shape_violation")
def meta_kernel_op(finding: Finding, frames: Frames) -> Finding:
    """The op whose meta kernel needed the failing guard: fake tensor logs 'failed while attempting to run meta for
    aten.slice_copy.Tensor' just below the shape engine's 'failed during evaluate_expr(...)'. Names the op (field
    ``meta_op``), cites that line, and says where to look."""
    if not finding.evidence or finding.evidence[0].source != "lines":
        return finding
    found = _line_near(finding, frames, 0, META_WINDOW, _META_OP)
    if found is None:
        return finding
    _, (op,), evidence = found
    return _add(finding, fields={"meta_op": op}, evidence=evidence,
                advice=f"The guard was needed inside the meta (fake tensor) kernel of `{op}`: the call of "
                       f"that op in your model (`TORCH_LOGS=\"+dynamic\"` prints its stack) is where the size must be "
                       "known or checked.")


@reasoner("segfault")
def crash_phase(finding: Finding, frames: Frames) -> Finding:
    """Where the process died: the fault's inferred phase, else the compile status of the run."""
    faults = query.run_rows(frames, "faults", finding.run_id, ["path", "lineno", "phase", "user_file", "user_line"])
    phase = next((f["phase"] for f in faults if f.get("phase") not in (None, "unknown")), None)
    source = "faults.phase" if phase else None
    if phase is None:
        statuses = [c["status"] for c in query.run_rows(frames, "compiles", finding.run_id, ["status"])]
        if "incomplete" in statuses:
            phase, source = "compile", "compiles.status=incomplete"
        elif statuses and all(s == "ok" for s in statuses):
            phase, source = "load or run", "all compiles ok"
    evidence = []
    user = next((f for f in faults if f.get("user_file")), None)
    if user is not None:
        evidence.append(Evidence(source="faults", path=user.get("path"), line=user.get("lineno"),
                                 text=f"in user code {user['user_file']}:{user.get('user_line')}"))
    advice = None
    if user is not None:
        advice = (f"It crashed {'during ' + phase + ' ' if phase else ''}under your call at "
                  f"`{user['user_file']}:{user.get('user_line')}`.")
    elif phase:
        advice = f"It crashed during {phase} ({source})."
    return _add(
        finding,
        fields={"phase": phase or "unknown", "phase_source": source or "none"},
        note=f"during {phase}" if phase else None,
        evidence=evidence,
        advice=advice,
    )


# ------------------------------------------------------------------------------------------- kernel lookup


def wrapper_sources(frames: Frames, run_id: str) -> list[tuple[str, str, str]]:
    """Generated wrapper code of a run as ``(text, path, source)``, from the ``code`` frame: the trace's wrapper dumps
    (each followed by the run's C++ kernel code, which CPU models keep apart), else its packages' kernel entries."""
    code = frames["code"].filter(pl.col("run_id") == run_id)
    dumps = code.filter((pl.col("source") == "trace") & pl.col("name").is_in(CODE_ARTIFACTS)).tail(MAX_CODE_ARTIFACTS)
    kernels = dumps.filter(pl.col("name") == "inductor_aot_kernel_code")["text"].to_list()
    wrappers = dumps.filter(pl.col("name") == "inductor_aot_wrapper_code")
    if wrappers.height:
        return [(text + "\n" + "\n".join(kernels), path, "artifacts")
                for text, path in wrappers.select("text", "path").iter_rows()]
    return [(text, f"{path}:{entry}", "package")
            for text, path, entry in code.filter(pl.col("source") == "package").select("text", "path", "name").iter_rows()]


@reasoner("triton_index_oob", "dynamic_shape_violation")
def oob_kernel(finding: Finding, frames: Frames) -> Finding:
    """Kernel, launch site, model inputs and constants behind an index-out-of-bounds assertion: a Triton device
    assert, or a CPU kernel's bound check (the finding's ``cond`` field); the remedy is rewritten from them."""
    from aoti_trace.engine.kernel_lookup import describe, find_kernel, remedy, remedy_from_assert

    rows = [a for a in query.run_rows(frames, "device_asserts", finding.run_id,
                                      ["assertion", "kernel_line", "kernel_file", "upper"]) if a.get("assertion")]
    asserts = [(a["assertion"], a.get("kernel_line")) for a in rows]
    cond = finding.fields.get("cond")
    if not asserts and cond and re.search(r"\btmp\d+\b", cond):
        asserts = [(f"index out of bounds: {cond}", None)]
    if not asserts:
        return finding
    sources = wrapper_sources(frames, finding.run_id)
    for text, where, source in sources:
        match = find_kernel(text, asserts[0][0], asserts[0][1])
        if match is None:
            continue
        fields = {"kernel": match.kernel, "kernel_source": source}
        optional = {
            "bound_param": match.bound_param, "bound_symbol": match.bound_symbol,
            "bound_input": match.bound_input, "bound_dim": match.bound_dim, "source_nodes": match.source_nodes,
            "aten_ops": match.aten_ops, "index_inputs": ",".join(map(str, match.index_inputs)) or None,
            "bound_value": match.bound_value, "bound_constant": match.bound_constant,
            "bound_constant_shape": match.bound_constant_shape,
        }
        fields.update({k: str(v) for k, v in optional.items() if v is not None})
        evidence = [Evidence(source=source, path=where, line=None, text=match.launch)] if match.launch else []
        finding = _add(finding, fields=fields, note=describe(match), evidence=evidence)
        return replace(finding, remedy=remedy(match, finding.env_flags))
    if finding.rule_id in ("AOTI-A001", "AOTI-A002"):  # a log alone: the bound says what kind of index failed
        first = rows[0] if rows else {}
        kernel = first.get("kernel_file")
        # CUDA prints 'unknown:0: unknown:' without -lineinfo, and the loader's frame for a module loaded by importlib
        kernel = None if kernel is None or kernel == "unknown" or kernel.startswith("<") else kernel
        line = first.get("kernel_line")
        name = f"{kernel.replace(chr(92), '/').rsplit('/', 1)[-1]}:{line}" if kernel and line else kernel
        # a CPU kernel's check has no device_asserts row: its bound is the end of the finding's condition
        upper = first.get("upper") or (cond.rpartition(" < ")[2] if cond and " < " in cond else None)
        written = remedy_from_assert(upper, name, finding.env_flags)
        if written is not None:
            return replace(finding, remedy=written)
    return finding


# ------------------------------------------------------------------------------------------- printer


@reasoner("illegal_memory_access", "triton_index_oob", "nan_assert")
def printer_kernel(finding: Finding, frames: Frames) -> Finding:
    """The crash site and suspicious inputs from the intermediate value printer, when the run printed it."""
    rows = query.run_rows(frames, "printer", finding.run_id,
                      ["path", "lineno", "event", "kernel", "arg", "min", "max", "mean", "suspicious", "launched_last"])
    if not rows:
        return finding
    last = [r for r in rows if r.get("launched_last")]
    stats = [r for r in rows if r.get("arg") and r.get("max") is not None]
    fields: dict[str, str] = {}
    evidence: list[Evidence] = []
    notes = []
    if last:
        k = last[-1]
        fields["crash_kernel"] = k["kernel"]
        notes.append(f"last kernel launched: {k['kernel']}")
        evidence.append(Evidence(source="printer", path=k["path"], line=k["lineno"],
                                 text=f"{k['event']}: {k['kernel']} (no after_launch)"))
    # Suspicious inputs: NaN/Inf, or a max at least 1e6 times the median max of the printed tensors.
    maxima = sorted(abs(r["max"]) for r in stats)
    median = maxima[len(maxima) // 2] if maxima else 0.0
    odd = [r for r in stats if r.get("suspicious") or (median and abs(r["max"]) >= 1e6 * max(median, 1.0))]
    if odd:
        r = odd[0]
        owner = f"input {r['arg']} of {r['kernel']}" if r.get("kernel") else f"model input {r['arg']}"
        fields["suspicious_input"] = f"{r['kernel']}:{r['arg']}" if r.get("kernel") else r["arg"]
        notes.append(f"suspicious {owner} (min {r['min']:g}, max {r['max']:g})")
        evidence.append(Evidence(source="printer", path=r["path"], line=r["lineno"],
                                 text=f"{owner}: min {r['min']:g} max {r['max']:g} mean {r['mean']:g}"))
    if not fields:
        return finding
    advice = []
    if "crash_kernel" in fields:
        advice.append(f"The intermediate value printer names the kernel that was running when it failed: "
                      f"`{fields['crash_kernel']}` (launched, never finished). Read its source in the generated code "
                      f"and check the inputs it indexes.")
    if "suspicious_input" in fields:
        r = odd[0]
        advice.append(f"Its input `{r['arg']}` holds suspicious values (min {r['min']:g}, max {r['max']:g}): an index "
                      f"or size far outside the tensors it addresses, or NaN/Inf. Trace where that value comes from "
                      f"(`AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT={r.get('kernel') or fields.get('crash_kernel', '')}` "
                      f"prints only that kernel).")
    return _add(finding, fields=fields, note="; ".join(notes), evidence=evidence, advice=" ".join(advice))


# ------------------------------------------------------------------------------------------- devices

# c10::DeviceType values (c10/core/DeviceType.h), as printed by the generated input checks ("but got: 14").
DEVICE_TYPES = {
    0: "cpu", 1: "cuda", 2: "mkldnn", 3: "opengl", 4: "opencl", 5: "ideep", 6: "hip", 7: "fpga", 8: "maia",
    9: "xla", 10: "vulkan", 11: "metal", 12: "xpu", 13: "mps", 14: "meta", 15: "hpu", 16: "ve", 17: "lazy",
    18: "ipu", 19: "mtia", 20: "privateuseone",
}


@reasoner("device_mismatch")
def device_names(finding: Finding, frames: Frames) -> Finding:
    """Name numeric device types, and state the compile device from the trace or the package."""
    fields: dict[str, str] = {}
    notes = []
    got = finding.fields.get("got")
    if got is not None and got.isdigit() and int(got) in DEVICE_TYPES:
        fields["got_name"] = DEVICE_TYPES[int(got)]
        notes.append(f"device type {got} is {DEVICE_TYPES[int(got)]}")
    compiled = {c["device_key"] for c in query.run_rows(frames, "compiles", finding.run_id, ["device_key"]) if c["device_key"]}
    source = "trace"
    if not compiled:
        compiled = {r["value"] for r in query.run_rows(frames, "package", finding.run_id, ["model", "key", "value"])
                    if r["key"] == "AOTI_DEVICE_KEY" and r["model"] != "<host>" and r["value"]}
        source = "package"
    if compiled:
        fields["compile_device"] = ",".join(sorted(compiled))
        notes.append(f"compiled for {fields['compile_device']} ({source})")
    if not fields:
        return finding
    advice = None
    idx, target = finding.fields.get("idx"), fields.get("compile_device")
    if idx is not None and target and "," not in target:
        now = fields.get("got_name", "another device")
        other = ("a meta tensor has no data: pass a real one" if now == "meta"
                 else f"or compile a package for {now}")
        advice = (f"Input {idx} is on {now} but the model was compiled for {target}: move it before the call "
                  f"(`inputs[{idx}] = inputs[{idx}].to(\"{target}\")`); {other}.")
    return _add(finding, fields=fields, note="; ".join(notes), advice=advice)


# ------------------------------------------------------------------------------------------- deprecated API

MAX_CALL_CHARS = 2000
# lhs: blank-separated tokens (a lazy `[\w.\[\], ]+?\s*=` backtracks quadratically through a run of blanks)
AOT_COMPILE_CALL = re.compile(
    r"^(?P<lhs>[\w.\[\],]+(?:[ \t]+[\w.\[\],]+)*)\s*=\s*torch\._export\.aot_compile\((?P<args>.*)\)\s*$")


def migration_for(code: str) -> str | None:
    """The aoti_compile_and_package rewrite of one ``x = torch._export.aot_compile(...)`` source line."""
    code = code.strip()
    if len(code) > MAX_CALL_CHARS:  # the lazy lhs backtracks on long lines: only a bounded line is matched
        return None
    m = AOT_COMPILE_CALL.match(code)
    if not m:
        return None
    args = [a.strip() for a in _split_top(m["args"])]
    positional = [a for a in args if "=" not in a.split("(")[0]]
    kwargs = {a.split("=", 1)[0].strip(): a.split("=", 1)[1].strip() for a in args if a not in positional}
    if len(positional) < 2:
        return None
    export_args = ", ".join(positional[:3] + [f"{k}={v}" for k, v in kwargs.items() if k in ("kwargs", "dynamic_shapes")])
    options = kwargs.get("options")
    # package_path replaces aot_inductor.output_path; other options carry over as inductor_configs
    compile_kw = f", inductor_configs={options}" if options and "output_path" not in options else ""
    return (f"ep = torch.export.export({export_args})\n"
            f"{m['lhs']} = torch._inductor.aoti_compile_and_package(ep, package_path=\"model.pt2\"{compile_kw})\n"
            f"# and load it with torch._inductor.aoti_load_package({m['lhs']}) instead of torch._export.aot_load")


def _split_top(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [*out, cur] if cur.strip() else out


@reasoner("deprecated_api")
def deprecated_call_site(finding: Finding, frames: Frames) -> Finding:
    """The user line that called torch._export.aot_compile (from the trace's stacks), with its migration."""
    compiles = [c for c in query.run_rows(frames, "compiles", finding.run_id, ["session", "api", "user_frame"])
                if c["api"] == "aot_compile" and c["user_frame"]]
    if not compiles:
        return finding
    site = compiles[0]["user_frame"]
    file, _, line = site.rpartition(":")
    if not line.isdigit():
        return finding
    at_site = (frames["stacks"]
               .filter((pl.col("run_id") == finding.run_id) & (pl.col("filename") == file)
                       & (pl.col("line") == int(line)) & pl.col("code").is_not_null() & (pl.col("code") != ""))
               .select("path", "lineno", "filename", "line", "code").head(1))
    row = at_site.row(0, named=True) if at_site.height else None
    fields = {"call_site": site}
    evidence = []
    if row is not None:
        # the whole statement from the source file (``sources``), else the stack's one line
        statement = (frames["sources"]
                     .filter((pl.col("run_id") == finding.run_id) & (pl.col("file") == file)
                             & (pl.col("line") == int(line)))["statement"].head(1).to_list())
        fields["call_code"] = statement[0] if statement else row["code"].strip()
        evidence.append(Evidence(source="stacks", path=row["path"], line=row["lineno"],
                                 text=f"{site}: {fields['call_code']}"))
        rewrite = migration_for(fields["call_code"])
        if rewrite:
            fields["migration"] = rewrite
    finding = _add(finding, fields=fields, note=f"called at {site}", evidence=evidence)
    if "migration" in fields:
        finding = replace(finding, remedy=f"At `{site}` replace\n\n```python\n{fields['call_code']}\n```\n\nwith\n\n"
                                           f"```python\n{fields['migration']}\n```\n\n{finding.remedy}")
    return finding


# ------------------------------------------------------------------------------------------- dtypes

# c10::ScalarType values (c10/core/ScalarType.h), as printed by the generated input checks ("but got: 7").
SCALAR_TYPES = {
    0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64",
    8: "complex32", 9: "complex64", 10: "complex128", 11: "bool", 12: "qint8", 13: "quint8", 14: "qint32",
    15: "bfloat16", 16: "quint4x2", 17: "quint2x4", 23: "float8_e5m2", 24: "float8_e4m3fn",
}


@reasoner("dtype_mismatch")
def dtype_names(finding: Finding, frames: Frames) -> Finding:
    """Name a numeric ScalarType (``but got: 7`` is float64)."""
    got = finding.fields.get("got")
    if got is None or not got.isdigit() or int(got) not in SCALAR_TYPES:
        return finding
    name = SCALAR_TYPES[int(got)]
    idx, expected = finding.fields.get("idx"), finding.fields.get("expected")
    want = {"Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16", "Long": "int64",
            "Int": "int32", "Bool": "bool", "Byte": "uint8", "Char": "int8", "Short": "int16"}.get(
        (expected or "").replace("at::k", ""), None)
    advice = None
    if idx is not None and want:
        advice = (f"Input {idx} is torch.{name} but the model was compiled for torch.{want}: cast it before the call "
                  f"(`inputs[{idx}] = inputs[{idx}].to(torch.{want})`), or export with example inputs of the dtype you "
                  f"serve.")
    return _add(finding, fields={"got_name": name}, note=f"ScalarType {got} is torch.{name}", advice=advice)
