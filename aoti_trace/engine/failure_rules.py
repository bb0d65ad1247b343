"""The built-in failure rules: a failed run always gets an error finding, whatever rule library is loaded.

Failure detection is not a rule: :mod:`aoti_trace.ingest.text.failure` decides from every source whether a run failed
and writes the ``failures`` frame. These rules report that row when nothing more specific explains the run. They are
defined here, not in a rules folder, and :func:`aoti_trace.engine.evaluate` always adds them, so ``--rules DIR``
cannot switch them off. Their finding is dropped again when any other error finding exists for the run
(:func:`is_failure_rule`). Each phase has its own rule so that the family and the rule id say where it failed; the
message is what failed, and :func:`describe` writes a remedy from what was found (the phase, the user's line, the
command) with the debugging ladder as the next step.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import polars as pl

from aoti_trace.engine import query
from aoti_trace.engine.cited import cite_line, is_caret_line, near
from aoti_trace.engine.schema import ColumnRef, Leaf, Rule
from aoti_trace.model.findings import Evidence, Finding
from aoti_trace.model.frames import Frames
from aoti_trace.model.vocabulary import FAMILIES, PHASE_TEXT

GUIDE = "guides/unexplained/failure.md"

# rule id, name, family (failures.family), title
_TABLE: list[tuple[str, str, str, str]] = [
    ("AOTI-U001", "failure-unexplained", "unexplained", "The run failed and no rule explains why"),
    ("AOTI-U002", "failure-in-export", "export_error",
     "Tracing or exporting the model failed with an error no specific rule explains"),
    ("AOTI-U003", "failure-in-compile", "lowering_error",
     "The Inductor compile failed with an error no specific rule explains"),
    ("AOTI-U004", "failure-in-autotune", "autotune_error", "Autotuning failed with an error no specific rule explains"),
    ("AOTI-U005", "failure-in-build", "cpp_compile_error",
     "Building the generated C++/CUDA code failed with an error no specific rule explains"),
    ("AOTI-U006", "failure-in-load", "package_error",
     "Packaging or loading the compiled model failed with an error no specific rule explains"),
    ("AOTI-U007", "failure-in-dynamic-shapes", "dynamic_shape_violation",
     "The symbolic-shape engine raised an error no specific rule explains"),
    ("AOTI-U008", "failure-in-extern-op", "missing_custom_op",
     "Running an extern/custom op through the proxy executor failed with an error no specific rule explains"),
]
# the variables a rerun of a failure in each phase should set (describe() adds them)
_PHASE_ENV: dict[str, dict[str, str]] = {
    "export": {"TORCH_LOGS": "+dynamo,export"},
    "compile": {"TORCH_LOGS": "+inductor"},
    "lowering": {"TORCH_LOGS": "+inductor"},
    "autotune": {"TORCH_LOGS": "+inductor"},
    "build": {"TORCH_LOGS": "+inductor"},
    "run": {"AOTI_RUNTIME_CHECK_INPUTS": "1"},
}

_FIELDS = ("what", "exc_type", "phase", "phase_source", "user_file", "user_line", "user_code", "signals", "family")


def _rule(rule_id: str, name: str, family: str, title: str) -> Rule:
    # built as it is, not validated (that would import pydantic on every run); a test validates them
    return Rule(
        id=rule_id, name=name, title=title,
        description="Built in (aoti_trace.engine.failure_rules): the run failed (the failures frame) and no other "
                    "error finding explains it; reports what failed, in which phase, and the next step.",
        family=family, severity="error", role="carrier", precision="medium", priority=-100,  # type: ignore[arg-type]
        status="stable", version=1,
        match=Leaf(frame="failures", column="family", equals=family, anchor=True),
        occurrence="last",
        extract={f: ColumnRef(column=f) for f in _FIELDS},
        message="{{what}}",
        remedy="See the debugging ladder.",
        guide=GUIDE,
    )


FAILURE_RULES: list[Rule] = [_rule(*row) for row in _TABLE]
assert {r.family for r in FAILURE_RULES} <= set(FAMILIES)
FAILURE_RULE_IDS: frozenset[str] = frozenset(r.id for r in FAILURE_RULES)


def is_failure_rule(rule_id: str) -> bool:
    return rule_id in FAILURE_RULE_IDS


# ---------------------------------------------------------------------------------------------- remedy

_NEXT: dict[str, str] = {
    "export": (
        "`torch.export` could not trace the model. Read the traceback from the bottom: the last frame in your model "
        "is the construct to change (data-dependent Python control flow -> `torch.cond`; NumPy or Python side effects "
        "on tensors -> tensor ops; an unsupported op). `torch.export.draft_export(model, args)` lists every problem "
        "at once; non-strict export (`strict=False`) avoids TorchDynamo's limits."
    ),
    # a failure raised inside torch/onnx: the ONNX exporter (its legacy TorchScript path does not go through
    # torch.export, so the export advice above does not apply)
    "export_onnx": (
        "The ONNX exporter (`torch.onnx.export`) could not convert the model. An `UnsupportedOperatorError` names the "
        "op and the opset: raise `opset_version` if a newer opset has the op, register a symbolic function for it "
        "(`torch.onnx.register_custom_op_symbolic`), or export with `dynamo=True` (torch >= 2.5), which traces with "
        "torch.export and covers more ops. Otherwise the last frame in your model in the traceback is the construct "
        "to change."
    ),
    "compile": (
        "Inductor raised while compiling the exported program. Check the `inductor_configs` you pass, rerun with "
        "`TORCH_LOGS=\"+inductor\"` to see the pass that failed, and reduce the model to a small repro "
        "(`aoti-trace minify -- <your command>`, or `DUMP_AOTI_MINIFIER=1`) to file with the traceback."
    ),
    "lowering": (
        "Inductor failed while lowering the graph or generating code for it. The traceback's last Inductor frame "
        "names the pass; an op it cannot lower can often be kept out of the graph (`torch._inductor.config."
        "implicit_fallbacks = True`) or replaced. Reduce it to a small repro (`aoti-trace minify -- <your command>`) "
        "for a bug report."
    ),
    "autotune": (
        "Benchmarking kernel choices failed. Rerun without max-autotune (`inductor_configs={\"max_autotune\": False}`) "
        "to confirm; a choice that fails only under autotuning is an Inductor bug worth a report with the trace."
    ),
    "build": (
        "The C++/CUDA compiler rejected the generated code or could not run. The first `error:` line of the compiler "
        "output is the cause: a missing header or library is the environment (`CXX`, `CUDA_HOME`, the compiler "
        "version), an error inside the generated code is an Inductor bug (report it with the TORCH_TRACE)."
    ),
    "package": (
        "Writing or reading the .pt2 package failed. Check the path and that the file is a complete package "
        "(`aoti-trace inspect model.pt2` reads it without loading it); a package built by another torch version may "
        "need a rebuild."
    ),
    "load": (
        "Loading the compiled model failed. Check the path, the model name inside the package and the device "
        "(`aoti-trace inspect model.pt2` shows what the package was built for); load it with the torch version and "
        "device it was compiled for."
    ),
    "run": (
        "The compiled model failed at run time without naming a cause. Most such failures are inputs that do not "
        "match what the package was compiled for: rerun with `AOTI_RUNTIME_CHECK_INPUTS=1` to check devices, dtypes "
        "and shapes; on CUDA add `CUDA_LAUNCH_BLOCKING=1` to place the error."
    ),
    "user": (
        "The exception was raised in your own code (or a library outside torch), not inside AOTI: fix it where the "
        "traceback ends."
    ),
    "unknown": (
        "The process failed without saying where. Capture it with `aoti-trace run -- <your command>` (TORCH_TRACE, "
        "full stderr and the exit status) so the phase can be found."
    ),
}


def _command(frames: Frames, run_id: str) -> str | None:
    procs = query.run_rows(frames, "process", run_id, ["command"])
    return next((p["command"] for p in procs if p.get("command")), None)


# how far above its exception line the raising statement of a traceback is looked for
RAISE_WINDOW = 8
WRAPPED = 2  # the cited line may be the message of an exception a line or two above ('X: backend raised:' + 'Y: m')
RAISE_BELOW = 200  # how far below it the cut traceback of an exception printed without frames is looked for


def raising_statement(finding: Finding, frames: Frames) -> Evidence | None:
    """The statement that raised the failure's exception (the innermost traceback frame's source line, as the log
    wrote it), when the failure is an exception whose traceback shows it: the line a reader looks at next."""
    cited = next((ev for ev in finding.evidence if ev.source == "failures" and ev.line is not None), None)
    if cited is None or cited.line is None or frames["exceptions"].height == 0:
        return None
    line = cited.line
    where = (pl.col("run_id") == finding.run_id) & (pl.col("path") == cited.path)
    # the exception itself, else (an exception printed without frames, whose message goes on with a cut traceback:
    # a subprocess's) the cut traceback below it
    excs = (frames["exceptions"].filter(where & (pl.col("lineno").is_between(line - WRAPPED, line) | (
        pl.col("lineno").is_between(line + 1, line + RAISE_BELOW) & ~pl.col("complete"))))
            .filter(pl.col("raise_code").is_not_null()).sort("lineno").head(1).to_dicts())
    if excs:
        statement, at = excs[0]["raise_code"].strip(), excs[0]["lineno"]
        rows = (frames["lines"].filter(where & pl.col("lineno").is_between(at - RAISE_WINDOW, at + 1)
                                       & (pl.col("text").str.strip_chars() == statement))
                .sort("lineno").tail(1).to_dicts())
    else:  # a traceback pasted from its last frame's code: the line above Python's caret line ('    ^^^^^^')
        above = (frames["lines"].filter(where & pl.col("lineno").is_between(line - WRAPPED - 2, line - 1))
                 .sort("lineno").select("path", "lineno", "prefix", "text", "raw").to_dicts())
        carets = [i for i, r in enumerate(above) if i and is_caret_line(r["text"])]
        rows = [above[carets[-1] - 1]] if carets else []
    # a bare 'raise X(' says no more than the exception's type does
    if not rows or (statement := (rows[0]["text"] or "").strip()).startswith("raise ") \
            or any(statement in ev.text for ev in finding.evidence):
        return None
    row = rows[0]
    return cite_line(row, row["path"])


def wrapper_line(finding: Finding, frames: Frames) -> Evidence | None:
    """The line that announces the failure's exception, when the cited line is its message's next line
    (``torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:`` above ``TypeError: ...``): which
    compiler raised it is part of what failed."""
    cited = next((ev for ev in finding.evidence if ev.source == "failures" and ev.line is not None), None)
    if cited is None or cited.line is None or cited.line < 2:
        return None
    rows = near(frames["lines"], finding.run_id, cited, 1, 0).filter(pl.col("lineno") == cited.line - 1).to_dicts()
    if not rows or not (rows[0]["text"] or "").rstrip().endswith(" raised:"):
        return None
    row = rows[0]
    return cite_line(row, row["path"])


def _onnx(fields: dict[str, Any]) -> bool:
    """Whether the failure was raised by the ONNX exporter: its raising frame is in torch/onnx/, or its exception is
    one of ``torch.onnx.errors``."""
    return "torch/onnx/" in (fields.get("phase_source") or "") or (fields.get("exc_type") or "").startswith(
        "torch.onnx.")


def describe(finding: Finding, frames: Frames) -> Finding:
    """The remedy of a built-in failure finding, written from what the ``failures`` row holds, and as further
    evidence the line that announced its exception (:func:`wrapper_line`) and the statement that raised it
    (:func:`raising_statement`)."""
    f: dict[str, Any] = finding.fields
    phase = f.get("phase", "unknown")
    parts = []
    where = PHASE_TEXT.get(phase, phase)
    source = f.get("phase_source")
    advice = _NEXT.get(phase, _NEXT["unknown"])
    if phase == "export" and _onnx(f):
        where, advice = "the ONNX exporter (torch.onnx)", _NEXT["export_onnx"]
    parts.append(f"Failed in {where}" + (f" ({source})." if source else "."))
    if f.get("user_file"):
        site = f"{f['user_file']}:{f['user_line']}" if f.get("user_line") else f["user_file"]
        code = f" — `{f['user_code'].strip()}`" if f.get("user_code") else ""
        parts.append(f"Your code: `{site}`{code}.")
    parts.append("")
    parts.append(advice)
    if phase != "user":
        command = _command(frames, finding.run_id)
        ladder = f"aoti-trace ladder -- {command}" if command else "aoti-trace ladder -- <your command>"
        parts.append("")
        parts.append(f"Next step: `{ladder}` reruns it with the AOTI debugging flags, one stage at a time, until a "
                     "stage names the cause.")
    signals = f.get("signals", "")
    if signals == "exit_code":
        parts.append("Only the exit status shows the failure: no error text was captured.")
    more = [ev for ev in (wrapper_line(finding, frames), raising_statement(finding, frames)) if ev is not None]
    return replace(finding, remedy="\n".join(parts).replace("\n\n\n", "\n\n"),
                   env_flags={**_PHASE_ENV.get(phase, {}), **finding.env_flags}, evidence=[*finding.evidence, *more])

