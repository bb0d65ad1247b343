"""The compiler's first error line, cited with a build failure.

A C++/Metal/CUDA build failure is often reported at the exception that wraps it (``InductorError: SyntaxError:
failed to compile``) or at one of the compiler's errors (``clang: error: unsupported option '-fopenmp'``), while
the compiler's own first error is a few lines above (``error: variable 'tmp_scoped_0' declared with deduced type
'auto' cannot appear in its own initializer``; ``clang: error: the clang compiler does not support
'-march=native'``). The reasoner :func:`first_compiler_error` adds that line to the finding's evidence and quotes
it first in the remedy:

* a ``cpp_compile_error`` or ``environment`` finding (a build that failed on the toolchain: a header, a library)
  that cites no compiler error line: the first compiler error line of the ``WINDOW`` lines above its anchor (same
  run and file);
* a finding anchored at a compiler error line: the first line of the block of compiler error lines that ends at
  the anchor (consecutive lines, blank lines between them allowed), when it is another line.

A compiler error line is a ``compiler_diagnostic`` line that says ``error`` (``file:line:col: error: ...``,
``error: ...``), a compiler driver's own error among them (``clang: error: ...``, ``g++: fatal error: ...``: text
ingest classifies the drivers, :mod:`aoti_trace.ingest.text.lines`); matched in Polars (Rust regex).
"""

from __future__ import annotations

import re
from dataclasses import replace

import polars as pl

from aoti_trace.engine.cited import cite_line, is_caret_line, near
from aoti_trace.model.findings import Evidence, Finding, clip
from aoti_trace.model.frames import Frames

# how far above the anchor the compiler's output is looked for
WINDOW = 100
MAX_EVIDENCE = 4  # a finding's evidence items, reasoners' included (reasoners._add)
ADVICE_TEXT = 200  # characters of a cited line quoted in the remedy
_DIAGNOSTIC_ERROR = r"(?:^|: |; )(?:fatal |internal compiler )?error(?: [A-Z]*\d+)? *: "


def _is_error() -> pl.Expr:
    text = pl.col("text").fill_null("").str.slice(0, 2000)
    return (pl.col("kind") == "compiler_diagnostic") & text.str.contains(_DIAGNOSTIC_ERROR)


def first_compiler_error(finding: Finding, frames: Frames) -> Finding:
    """The finding with the compiler's first error line added to its evidence (see the module docstring)."""
    if not finding.evidence:
        return finding
    anchor = finding.evidence[0]
    if anchor.source not in ("lines", "failures") or anchor.line is None or anchor.path is None:
        return finding
    lines = frames["lines"]
    if lines.height == 0:
        return finding
    above = (near(lines, finding.run_id, anchor, WINDOW, 0)
             .with_columns(_is_error().alias("_err"),
                                          (pl.col("text").fill_null("").str.strip_chars() == "").alias("_blank")))
    if above.height == 0:
        return finding
    errors = above.filter("_err")
    cited = {e.line for e in finding.evidence if e.path == anchor.path}
    if anchor.line in set(errors.get_column("lineno").to_list()):
        # the first line of the block of error lines that ends at the anchor (blank lines inside it skipped)
        first = None
        for lineno, err in reversed(above.filter(~pl.col("_blank")).select("lineno", "_err").rows()):
            if not err:
                break
            first = lineno
        pick = errors.filter(pl.col("lineno") == first)
    elif finding.family in ("cpp_compile_error", "environment") \
            and not cited & set(errors.get_column("lineno").to_list()):
        pick = errors.head(1)
    else:
        return finding
    if pick.height == 0 or pick.item(0, "lineno") in cited:
        return finding
    row = pick.row(0, named=True)
    item = cite_line(row, anchor.path)
    first = clip((row["text"] or "").strip(), ADVICE_TEXT)
    return replace(finding, evidence=[*finding.evidence, item][:MAX_EVIDENCE],
                   remedy=f"The compiler's first error: `{first}`.\n\n{finding.remedy}")


# Triton's CompilationError: 'at L:C:', the kernel source up to the statement it rejects, a caret line under it
_TRITON_AT = "CompilationError: at "


def triton_pointed_statement(finding: Finding, frames: Frames) -> Finding:
    """The finding with the kernel statement that Triton's ``CompilationError: at L:C:`` points at (the line above
    its caret line) added to its evidence: when the error below it was cut from the log, that statement is what
    is left to read (``tmp1 = tmp0.to(tl.float32)``: a cast this GPU's Triton cannot make)."""
    anchor = next((e for e in finding.evidence if _TRITON_AT in e.text and e.line is not None and e.path), None)
    lines = frames["lines"]
    if lines.height == 0:
        return finding
    header: list[Evidence] = []
    if anchor is None:
        # the evidence may quote the exception by its error line ('CompilationError: AttributeError(...)') while the
        # cited line itself is Triton's header ('...CompilationError: at 31:16:'): cite that header as written
        cited = next((e for e in finding.evidence if e.line is not None and e.path), None)
        rows = near(lines, finding.run_id, cited, 0, 0).rows(named=True) if cited is not None else []
        if cited is None or not rows or _TRITON_AT not in (rows[0]["text"] or ""):
            return _pointed_above(finding, frames)
        anchor = cite_line(rows[0], cited.path)
        header = [anchor]
    assert anchor.line is not None
    below = (near(lines, finding.run_id, anchor, 0, WINDOW).filter(pl.col("lineno") > anchor.line)
             .select("lineno", "prefix", "text", "raw").rows(named=True))
    for i, row in enumerate(below):
        if is_caret_line(row["text"]):
            above = next((r for r in reversed(below[:i]) if (r["text"] or "").strip()), None)
            if above is None or any(above["lineno"] == e.line and e.path == anchor.path for e in finding.evidence):
                return finding
            found = _with_statement(finding, cite_line(above, anchor.path), above["text"])
            return replace(found, evidence=[*finding.evidence, *header, found.evidence[-1]][:MAX_EVIDENCE])
    return finding


# the end of Triton's error header when an application re-wraps it ("RuntimeError: Worker failed with error 'at 1:0:")
_AT_END = re.compile(r"\bat \d+:\d+:\s*$")
_KERNEL_DEF = re.compile(r"^def (\w{1,200})\(")


def _pointed_above(finding: Finding, frames: Frames) -> Finding:
    """For a finding that cites the error under Triton's pointer (``ValueError("type fp8e4nv not supported ...")``
    below ``at 1:0:``, the statement and the caret line): the statement pointed at, from the three lines above."""
    cited = next((e for e in finding.evidence if e.line is not None and e.path), None)
    if cited is None or cited.line is None or cited.line < 4:
        return finding
    rows = {r["lineno"]: r for r in near(frames["lines"], finding.run_id, cited, 3, 0)
            .select("lineno", "prefix", "text", "raw").rows(named=True)}
    at, statement, caret = (rows.get(cited.line - k) for k in (3, 2, 1))
    if at is None or statement is None or caret is None or not is_caret_line(caret["text"]) \
            or not _AT_END.search((at["text"] or "")[-40:]) or not (statement["text"] or "").strip():
        return finding
    if any(statement["lineno"] == e.line and e.path == cited.path for e in finding.evidence):
        return finding
    return _with_statement(finding, cite_line(statement, cited.path), statement["text"])


def _with_statement(finding: Finding, item: Evidence, text: str | None) -> Finding:
    """The finding with the kernel statement Triton pointed at cited, and named first in the remedy."""
    statement = clip((text or "").strip(), ADVICE_TEXT)
    kernel = _KERNEL_DEF.match(statement)
    if kernel:
        lead = (f"Triton rejects the kernel `{kernel.group(1)}` as a whole (it points at its `def`): its argument "
                "dtypes or its configuration are what this Triton/GPU cannot compile.")
    else:
        lead = (f"Triton stops at `{statement}` in the kernel: the dtype or op of that statement is what this "
                "Triton/GPU cannot compile.")
    return replace(finding, evidence=[*finding.evidence, item][:MAX_EVIDENCE], remedy=f"{lead}\n\n{finding.remedy}")
