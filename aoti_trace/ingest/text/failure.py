"""Did the run fail? The ``failures`` frame, derived from the other frames independently of the rule library.

A run failed when any source says so: a non-zero exit, a signal, a timeout or an interrupt recorded in the manifest,
a final Python exception (also a traceback cut before its last line), a C++ ``Error:`` / ``terminate called`` /
``what():``, a compiler ``error:``, a fault, a device assert, a failed or unfinished compile session in the trace. A
known exit status of 0 (no timeout, no interrupt) overrides the text: the process survived what it printed.

For a failed run the row says *what* failed (the last exception, else the first error line, else how the process
ended), in which *phase* (from the exception's frames, the call the user's line makes, the trace's compile sessions,
the fault's stack, or the kind of error line) and where in the user's code. Rules read this frame like any other;
the engine's built-in failure rules (:mod:`aoti_trace.engine.failure_rules`) report it when no rule explains it.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from aoti_trace.model.frames import Frames, conform, empty
from aoti_trace.ingest.text.lines import PATTERNS, guard_of
from aoti_trace.ingest.text.known_messages import KnownMessage, error_lines, line_message, lookup
from aoti_trace.ingest.text.prematch import Haystack
from aoti_trace.model.vocabulary import (CPP_ORIGIN, FAMILIES, HANDLED_LEVELS, PHASE_FAMILY, module_family,
                                         route_cpp, route_phase)

Row = dict[str, Any]  # one row of a frame, as Polars' rows(named=True) gives it
MAX_WHAT = 300
# the line torch.compile prints above an error of its compiler backend, before and after the backend's name
BACKEND_RAISED = ("backend='", "' raised:")
# torch.compile backends that only trace (AOTAutograd, no code generation): their errors are tracing errors
TRACING_BACKENDS = ("eager", "aot_eager")
# the decoration of a line logged at error level by Python's logging or an application ('[ERROR] ', 'ERROR:root:',
# 'root - ERROR - '), not torch's glog header (whose E-level lines torch often handles and goes on)
ERROR_PREFIX = r"(?:^|\s)(?:\[(?:ERROR|CRITICAL|FATAL)\]|(?:ERROR|CRITICAL|FATAL):[\w.<>-]*:|- (?:ERROR|CRITICAL) - )"
# logged tracebacks at these glog levels were handled (torch logs and goes on): not failure evidence on their own
# C++/runtime lines that tell the phase when no traceback does (searched in the run's error lines, bounded)
TEXT_PHASES: list[tuple[str, str]] = [
    ("run", r"run_func_\(|AOTInductorModelContainerRun\b|AOTIModelContainerRunner\w*::run\b"),
    ("load", r"create_func_\(|AOTInductorModelContainerCreate|update_constant_buffer|AOTIModelPackageLoader"),
]
# exception types and message heads that tell the phase when the frames do not (bounded Python re on one line)
TYPE_PHASES: list[tuple[str, re.Pattern[str]]] = [
    ("lowering", re.compile(r"LoweringException|MissingOperatorWith(?:out)?Decomp")),
    ("autotune", re.compile(r"\b[Aa]utotuning\b|NoTritonConfigsError|benchmark_in_\w+_process")),
    ("build", re.compile(r"CppCompileError|InvalidCxxCompiler|CUDACompileError|CompilationError|PTXASError"
                         r"|\bnvcc\b|\bptxas\b|\bcl\.exe\b|\bg\+\+|\bclang")),
    ("export", re.compile(r"torch\._dynamo\.exc\.|\bUnsupported\b|\bUserError\b|GuardOnDataDependentSymNode"
                          r"|SpecViolationError|SerializeError|ExportError"
                          r"|ConstraintViolationError|torch\.export|TorchRuntimeError|\bdynamo\b"
                          r"|ProxyTorchDispatchMode|proxy_tensor")),
    ("compile", re.compile(r"BackendCompilerFailed|InductorError|torch\._inductor|AOTInductor|\bInductor\b")),
]
SPECIFIC_PHASES = ("lowering", "autotune", "build")
# Inductor's wrapper types: the compile, whatever word the wrapped message uses ('InductorError: Unsupported: ...')
COMPILE_WRAPPER = re.compile(r"(?:BackendCompilerFailed|InductorError)$")
TEXT_PHASES_RE = [(phase, re.compile(pattern)) for phase, pattern in TEXT_PHASES]
PATTERN_CI_EXIT = re.compile(PATTERNS["ci_exit"])  # applied to one matched line
ERROR_KINDS = ("cpp_error", "aoti_torch_exception", "compiler_diagnostic")
FATAL_LEVELS = ("F", "C")


def _first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:MAX_WHAT]
    return ""


def _by_run(df: pl.DataFrame) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in df.to_dicts():
        out.setdefault(row["run_id"], []).append(row)
    return out


def failures_frame(frames: Frames, catalogue: bool = True) -> pl.DataFrame:
    """One row per run that failed (see the module docstring). ``catalogue``: look a message that no frame places
    up in torch's message catalogue (off when the catalogue's own coverage is measured)."""
    runs = frames.run_ids(skip=("failures",))  # the frame being made
    if not runs:
        return empty("failures")
    process = _by_run(frames["process"])
    excs = _by_run(frames["exceptions"])
    faults = _by_run(frames["faults"])
    asserts = _by_run(frames["device_asserts"].select("run_id", "path", "lineno", "assertion"))
    compiles = _by_run(frames["compiles"].select("run_id", "path", "lineno", "status", "fail_type", "fail_reason",
                                                 "user_frame", "api"))
    lines = frames["lines"]
    hay = Haystack(lines.get_column("text"))  # on a small capture, patterns that cannot match are not compiled
    ci_exit = _first_match(lines, PATTERNS["ci_exit"], hay)
    aborts = _by_run(_first_match(lines, PATTERNS["gdb_abort"], hay))
    # a line logged at FATAL / CRITICAL level (glog F or C, ExecuTorch, Android logcat F/), ExecuTorch's failed
    # ET_CHECK, a build tool's error (CMake, LLVM), an application's 'Error ...: SomeError' report, a line torch
    # prints only when it raises, a program's own line that it cannot read a file it was given: the program reports
    # that it cannot go on
    fatal_logs = _by_run(
        lines.filter((pl.col("level").is_in(FATAL_LEVELS) & (pl.col("text").str.strip_chars() != ""))
                     | hay.contains("text", PATTERNS["et_check"])
                     | hay.contains("text", PATTERNS["tool_error"])
                     # (its guard compiles in ~5 ms, the pattern in ~30-40: '[\w ]{0,40}' is 40 Unicode classes)
                     | hay.contains("text", PATTERNS["error_report"], guard_of(PATTERNS["error_report"]))
                     | hay.contains("text", PATTERNS["raised_report"])
                     # an error-level line (its logging decoration says ERROR/CRITICAL) that says a step failed
                     | (pl.col("prefix").fill_null("").str.contains(ERROR_PREFIX)
                        & hay.contains("text", PATTERNS["error_level_failed"]))
                     | ((pl.col("kind") == "plain") & hay.contains("text", PATTERNS["file_unreadable"])))
        .group_by("run_id", maintain_order=True).agg(pl.col("path", "lineno", "text", "src").first())
    ) if lines.height else {}
    # an error-level line logged by a torch module (glog 'E'): torch.export logs the error it is about to raise, so
    # it says what failed when the traceback below is cut before its exception line
    torch_errors = _by_run(
        lines.filter((pl.col("level") == "E") & pl.col("src").fill_null("").str.contains(r"(?:^|/)torch/")
                     & (pl.col("text").str.strip_chars() != ""))
        .group_by("run_id", maintain_order=True).agg(pl.col("path", "lineno", "text", "src").last())
    ) if lines.height else {}
    worded = _by_run(_last_worded_before(lines, ci_exit))
    errors = _by_run(
        lines.filter(pl.col("kind").is_in(ERROR_KINDS) & ~hay.contains("text", PATTERNS["ci_exit"]))
        .group_by("run_id", "kind", maintain_order=True).agg(pl.all().first())
        .select("run_id", "kind", "path", "lineno", "text")
    )
    # a line whose message is a catalogued error (ExecuTorch's runtime, Triton, c10, torch), pasted without traceback
    known = _by_run(error_lines(lines)) if catalogue else {}
    footers = _by_run(_with_message(lines, _first_match(lines, PATTERNS["torch_footer"], hay)))
    tests = _by_run(_first_match(lines, PATTERNS["test_failed"], hay))
    hints: dict[str, str] = {}
    if lines.height:
        cand = lines.filter(pl.col("kind").is_in(("cpp_error", "terminate", "exception", "aoti_torch_exception"))
                            | hay.contains("text", PATTERNS["gdb_frame"]))
        for phase, pattern in TEXT_PHASES:
            hit = cand.filter(hay.contains("text", pattern)).get_column("run_id").unique().to_list()
            for rid in hit:
                hints.setdefault(rid, phase)
    rows = []
    for run in runs:
        row = _failure(run, process.get(run, []), excs.get(run, []), faults.get(run, []), asserts.get(run, []),
                       compiles.get(run, []), errors.get(run, []), hints.get(run),
                       footers.get(run, []) + tests.get(run, []), _by_run(ci_exit).get(run, []), worded.get(run, []),
                       aborts.get(run, []), fatal_logs.get(run, []), catalogue, known.get(run, []),
                       torch_errors.get(run, []))
        if row is not None:
            rows.append(row)
    if not rows:
        return empty("failures")
    found = pl.DataFrame(rows, infer_schema_length=None).with_columns(
        pl.col("path").cast(pl.String), pl.col("lineno").cast(pl.Int64))
    for name in ("text", "_what_line"):
        if name not in found.columns:
            found = found.with_columns(pl.lit(None, dtype=pl.String).alias(name))
    if lines.height:  # the log line as written, for evidence
        line = pl.col("_line")
        # the line as written: its decoration (with its own separator, without an indent the whole log shares, as
        # aoti_trace.engine.cited.as_written cites a line) and message, or the log's own line where ingest rewrote
        # the message ("<class 'T'>: m", IPython's traceback lines)
        written = (pl.col("prefix").is_not_null() & pl.col("raw").str.ends_with(pl.col("text")).fill_null(False)
                   & ~pl.col("raw").str.contains("\r", literal=True).fill_null(True))
        rewritten = (~pl.col("raw").str.contains(pl.col("text"), literal=True)).fill_null(False)
        raw = (pl.when(rewritten).then(pl.col("raw"))
               .when(written & pl.col("prefix").str.contains(r"^\s")).then(pl.col("raw"))
               .when(written).then(pl.col("raw").str.strip_chars_start())
               .otherwise(pl.concat_str([pl.col("prefix").fill_null(""), pl.col("text")])))
        found = (found.join(lines.select("run_id", "path", "lineno", raw.alias("_line")),
                            on=["run_id", "path", "lineno"], how="left", nulls_equal=False)
                 .with_columns(pl.coalesce(
                     "text",
                     # a terminate row's line holds its what() text (libc++), or the what() line follows it
                     pl.when(pl.col("_what_line").is_not_null()
                             & ~line.str.contains(pl.col("_what_line"), literal=True).fill_null(False))
                     .then(pl.lit("what():  ") + pl.col("_what_line")).otherwise(line)).alias("text")))
    return conform("failures", found)


def _last_worded_before(lines: pl.DataFrame, ci_exit: pl.DataFrame, window: int = 40) -> pl.DataFrame:
    """Per run, the last line within ``window`` lines above a CI exit line that says in words what went wrong."""
    if ci_exit.height == 0:
        return ci_exit
    out = (lines.join(ci_exit.select("run_id", "path", pl.col("lineno").alias("_exit")), on=["run_id", "path"])
           .filter(pl.col("lineno").is_between(pl.col("_exit") - window, pl.col("_exit") - 1)
                   & pl.col("kind").is_in(("plain", "exception", "cpp_error", "terminate"))
                   & pl.col("text").str.contains(PATTERNS["error_words"]))
           .group_by("run_id", maintain_order=True).agg(pl.col("path", "lineno", "text").last()))
    return out


def _cpp_origin(exc: dict[str, Any] | None) -> str | None:
    """The C++ source file of a c10 error ('Exception raised from <func> at <file>:<line>' in its message)."""
    message = (exc or {}).get("message") or ""
    i = message.find("Exception raised from ")
    if i < 0:
        return None
    m = CPP_ORIGIN.match(message, i, i + 2048)
    return m["file"] if m else None


def _first_match(lines: pl.DataFrame, pattern: str, hay: Haystack) -> pl.DataFrame:
    """The first line per run whose text matches ``pattern``, with the pattern name-free columns failures need
    (``hay``: the lines' text, to skip a pattern that cannot match)."""
    if lines.height == 0:
        return pl.DataFrame(schema={"run_id": pl.String, "path": pl.String, "lineno": pl.Int64, "text": pl.String})
    return (lines.filter(hay.contains("text", pattern) & (pl.col("kind") != "output_code"))
            .group_by("run_id", maintain_order=True).agg(pl.col("path", "lineno", "text").first()))


def _with_message(lines: pl.DataFrame, footers: pl.DataFrame, window: int = 80) -> pl.DataFrame:
    """Each footer row with ``message``: the first line of the paragraph above Dynamo's ``from user code:`` block (or
    above the footer), which is the error's message when its ``Type: message`` line was not posted, and ``backend``:
    the backend named by a ``backend='inductor' raised:`` line in that paragraph (the error is the compiler's)."""
    if footers.height == 0:
        return footers.with_columns(pl.lit(None, dtype=pl.String).alias("message"),
                                    pl.lit(None, dtype=pl.String).alias("backend"))
    out = []
    for row in footers.to_dicts():
        above = (lines.filter((pl.col("run_id") == row["run_id"]) & (pl.col("path") == row["path"])
                              & pl.col("lineno").is_between(row["lineno"] - window, row["lineno"] - 1))
                 .sort("lineno").get_column("text").to_list())
        cut = next((i for i in range(len(above) - 1, -1, -1) if above[i].strip() == "from user code:"), len(above))
        block = above[:cut]
        while block and not block[-1].strip():
            block.pop()
        start = len(block)
        while start > 0 and block[start - 1].strip():
            start -= 1
        row["message"] = block[start].strip()[:MAX_WHAT] if start < len(block) else None
        # "backend='inductor' raised:" above the message: the error came from the compiler backend, not from tracing
        row["backend"] = next((b for b in map(_backend_named, block) if b), None)
        out.append(row)
    return pl.DataFrame(out, schema={**footers.schema, "message": pl.String, "backend": pl.String})


def _backend_named(text: str | None) -> str | None:
    """The backend a ``backend='inductor' raised:`` line names, else None."""
    t = (text or "").strip()
    if t.startswith(BACKEND_RAISED[0]) and t.endswith(BACKEND_RAISED[1]):
        return t[len(BACKEND_RAISED[0]):-len(BACKEND_RAISED[1])]
    return None


def _typed_phase(head: str, exc_type: str, wrapper_type: str) -> str | None:
    """The phase that the type and first message line (``head``) name: a runtime call, then a specific stage
    (lowering, autotuning, the build) named anywhere, then Inductor's wrapper types, then the general patterns."""
    for phase, pattern in TEXT_PHASES_RE:
        if pattern.search(head):
            return phase
    for phase, pattern in TYPE_PHASES:
        if phase in SPECIFIC_PHASES and pattern.search(head):
            return phase
    if COMPILE_WRAPPER.search(exc_type) or COMPILE_WRAPPER.search(wrapper_type):
        return "compile"
    return next((phase for phase, pattern in TYPE_PHASES if pattern.search(head)), None)


def _failure(run: str, process: list[Row], excs: list[Row], faults: list[Row], asserts: list[Row],
             compiles: list[Row], errors: list[Row], hint: str | None, reported: list[Row],
             ci_exit: list[Row], worded: list[Row], aborts: list[Row], fatal_logs: list[Row],
             catalogue: bool = True, known: list[Row] | None = None,
             torch_errors: list[Row] | None = None) -> Row | None:
    proc = process[0] if process else {}
    code, sig = proc.get("exit_code"), proc.get("signal")
    if code is None and ci_exit:  # the CI runner's closing line gives the exit status the log itself does not
        ci_match = PATTERN_CI_EXIT.match(ci_exit[0]["text"])
        assert ci_match is not None  # the line was selected by this pattern
        code = int(ci_match[1])
    timed_out, interrupted = bool(proc.get("timed_out")), bool(proc.get("interrupted"))
    signals: list[str] = []
    if code not in (None, 0):
        signals.append("exit_code")
    if sig:
        signals.append("signal")
    if timed_out:
        signals.append("timed_out")
    if interrupted:
        signals.append("interrupted")
    if code == 0 and not signals:
        return None  # the process survived whatever it printed
    finals = [e for e in excs if e.get("is_final") and e.get("level") not in HANDLED_LEVELS]
    complete = [e for e in finals if e.get("complete")]
    cut = [e for e in finals if not e.get("complete")]
    if complete:
        signals.append("exception")
    if cut and (not complete or (cut[-1]["lineno"] or 0) > (complete[-1]["lineno"] or 0)):
        signals.append("cut_traceback")
    kinds = {e["kind"]: e for e in errors}
    if "cpp_error" in kinds or "aoti_torch_exception" in kinds:
        signals.append("cpp_error")
    terminate = [f for f in faults if f.get("kind") == "terminate"]
    fatal = [f for f in faults if f.get("kind") == "fatal_signal"]
    if terminate:
        signals.append("terminate")
    if "compiler_diagnostic" in kinds:
        signals.append("compiler_error")
    if fatal:
        signals.append("fatal_signal")
    if asserts:
        signals.append("device_assert")
    if aborts:
        signals.append("debugger_abort")
    if fatal_logs:
        signals.append("fatal_log")
    if known:
        signals.append("known_error_message")
    footer = next((r for r in reported if not r["text"].startswith(("FAILED", "ERROR"))), None)
    failed_test = next((r for r in reported if r["text"].startswith(("FAILED", "ERROR"))), None)
    if footer is not None:
        signals.append("torch_error_footer")
    if failed_test is not None:
        signals.append("test_failed")
    failed_compiles = [c for c in compiles if c.get("status") == "failed"]
    if failed_compiles:
        signals.append("failed_compile")
    if any(c.get("status") == "incomplete" for c in compiles) and (signals or not process):
        signals.append("incomplete_compile")
    if not signals:
        return None

    row: dict[str, Any] = {"run_id": run, "path": None, "lineno": None, "signals": ",".join(signals), "exc_type": None}
    logged_by = ""  # the source file of a fatal log line, when that line says what failed
    said_known: KnownMessage | None = None  # the catalogued error of a line that says what failed
    exc = complete[-1] if complete else (cut[-1] if cut else None)
    # what failed
    if complete:
        e = complete[-1]
        msg = _first_line(e.get("message"))
        if msg in ("", "from user code:") and e.get("raise_code"):  # a bare assert: the statement says what failed
            msg = e["raise_code"]
            row["text"] = f"{e['exc_type']}: {msg}"
        row.update(what=f"{e['exc_type']}: {msg}" if msg else e["exc_type"], exc_type=e["exc_type"],
                   path=e["path"], lineno=e["lineno"])
    elif terminate and terminate[0].get("what"):
        t = terminate[0]
        what = _first_line(t["what"])
        row.update(what=f"{t['exc_type']}: {what}" if t.get("exc_type") else what, exc_type=t.get("exc_type"),
                   path=t["path"], lineno=t["lineno"], _what_line=what)
    elif errors:
        first = min(errors, key=lambda e: e["lineno"] or 0)
        row.update(what=_first_line(first["text"]), path=first["path"], lineno=first["lineno"])
    elif fatal:
        f = fatal[0]
        row.update(what=f"killed by {f.get('signal') or 'a fatal signal'}", path=f["path"], lineno=f["lineno"])
    elif asserts:
        a = asserts[0]
        row.update(what=f"device-side assert: {_first_line(a['assertion'])}", path=a["path"], lineno=a["lineno"])
    elif failed_compiles:
        c = failed_compiles[0]
        reason = _first_line(c.get("fail_reason"))
        row.update(what=f"{c.get('fail_type')}: {reason}" if reason else str(c.get("fail_type") or "compile failed"),
                   exc_type=c.get("fail_type"), path=c["path"], lineno=c["lineno"])
    elif failed_test is not None:
        t = failed_test
        row.update(what=t["text"].split(" - ", 1)[-1] if " - " in t["text"] else t["text"], path=t["path"],
                   lineno=t["lineno"])
    elif fatal_logs:  # a line that reports the failure itself, before the footer's guess at the message above it
        f = fatal_logs[0]
        row.update(what=_first_line(f["text"]), path=f["path"], lineno=f["lineno"])
        logged_by = (f.get("src") or "").rpartition(":")[0]
    elif footer is not None:
        row.update(what=footer.get("message") or "a torch.compile / torch.export error (its message is above "
                        f"torch's footer: '{footer['text'][:60]}')", path=footer["path"], lineno=footer["lineno"],
                   text=footer.get("message"))  # the message line above the footer is the evidence
    elif cut and torch_errors and (torch_errors[-1]["lineno"] or 0) < (cut[-1]["lineno"] or 0):
        f = torch_errors[-1]  # what torch logged before raising: the cut traceback's message
        row.update(what=_first_line(f["text"]), path=f["path"], lineno=f["lineno"])
        logged_by = (f.get("src") or "").rpartition(":")[0]
    elif cut:
        e = cut[-1]
        row.update(what=(f"{e['exc_type']}, in a traceback cut before its message" if e.get("exc_type") else
                         "a traceback cut before its exception line") + (
            f" (last frame {e.get('torch_file') or e.get('user_file')} in {e.get('torch_function') or e.get('user_function')})"
            if e.get("torch_file") or e.get("user_file") else ""), path=e["path"], lineno=e["lineno"],
            exc_type=e.get("exc_type"))
    elif known:
        k = known[0]
        row.update(what=_first_line(k["text"]), path=k["path"], lineno=k["lineno"])
        said_known = lookup(line_message(k["text"]))
    elif aborts:
        a = aborts[0]
        row.update(what="the process aborted (SIGABRT): a debugger backtrace passes through abort()", path=a["path"],
                   lineno=a["lineno"])
    elif worded:
        w = worded[-1]
        row.update(what=_first_line(w["text"]), path=w["path"], lineno=w["lineno"])
    elif timed_out:
        row["what"] = f"timed out after {proc.get('duration_s') or '?'} s"
    elif interrupted:
        row["what"] = "interrupted"
    elif sig:
        row["what"] = f"killed by {sig}"
    else:
        row["what"] = f"exit code {code}, with no error printed"
    row["what"] = row["what"][:MAX_WHAT]
    if not logged_by and fatal_logs:  # a FATAL/CRITICAL log line of a torch module places the failure too
        logged_by = (fatal_logs[0].get("src") or "").rpartition(":")[0]

    # where: the phase
    phase, source = "unknown", None
    if exc is not None and exc.get("phase") not in (None, "unknown"):
        phase, source = exc["phase"], exc.get("phase_source")
    # an exception printed without frames whose message goes on with a traceback ('SubprocException: An exception
    # occurred in a subprocess:' and the worker's traceback, cut): that traceback's frames place it
    below = next((e for e in cut if exc is not None and exc.get("complete") and not exc.get("frames")
                  and e.get("path") == exc.get("path") and (e["lineno"] or 0) > (exc["lineno"] or 0)
                  and e.get("phase") not in (None, "unknown", "user")), None)
    if phase == "unknown" and below is not None:
        phase, source = below["phase"], f"the traceback below it ({below.get('phase_source')})"
    # a traceback cut before its exception line, ending in the user's code, above Dynamo's error footer: the frames
    # are the ones Dynamo was tracing ('from user code:'), not an exception of the user's own
    if phase == "user" and exc is not None and not exc.get("complete") and footer is not None:
        phase, source = "export", "Dynamo's error footer, below a cut traceback that ends in user code"
    head = f"{row.get('exc_type') or ''} {row['what']}"[:MAX_WHAT * 2]
    # a wrapper that announces the final exception ("BackendCompilerFailed: backend='inductor' raised:") names the phase
    wrappers = [c for c in complete[:-1] if (c.get("message") or "").rstrip().endswith("raised:")]
    wrapper_type = str(wrappers[-1].get("exc_type") or "") if wrappers else ""
    if wrapper_type:
        head = f"{head} {wrapper_type}"
    backend = (_backend_named(wrappers[-1].get("message")) if wrappers else None) or (footer or {}).get("backend") \
        or ""
    if phase in ("unknown", "user") and backend.startswith(TRACING_BACKENDS):
        # a backend with no compiler behind it: what failed is AOTAutograd's tracing (functionalization, fake tensors)
        phase, source, wrapper_type = "export", f"backend='{backend}' raised it (AOTAutograd tracing, no compiler)", ""
    cpp = _cpp_origin(exc)
    if phase in ("unknown", "user") and cpp is not None and (routed := route_cpp(cpp)) is not None:
        phase, source = routed, f"C++: {cpp}"
    if phase in ("unknown", "user"):
        typed = _typed_phase(head, str(row.get("exc_type") or ""), wrapper_type)
        if typed is not None:
            phase, source = typed, f"message: {row['what'][:80]}"
    if (phase == "unknown" or (phase == "user" and exc is not None and not exc.get("complete"))) and logged_by:
        routed, _ = route_phase([(logged_by, "")])
        if routed not in ("unknown", "user"):
            phase, source = routed, f"logged by {logged_by}"
    if phase == "unknown":
        if "compiler_diagnostic" in kinds:
            phase, source = "build", "compiler error line"
        elif hint is not None:
            phase, source = hint, "AOTI runtime error line"
        elif failed_compiles or (any(c.get("status") == "incomplete" for c in compiles) and signals != ["exit_code"]):
            phase, source = "compile", "trace: compile session " + ("failed" if failed_compiles else "unfinished")
        elif fatal and fatal[0].get("phase") not in (None, "unknown"):
            phase, source = fatal[0]["phase"], "fault stack"
        elif asserts:
            phase, source = "run", "device-side assert"
        elif footer is not None and footer.get("backend") and not footer["backend"].startswith(TRACING_BACKENDS):
            phase, source = "compile", f"Dynamo's error footer: backend='{footer['backend']}' raised it"
        elif footer is not None:
            phase, source = "export", "Dynamo's error footer"
    module = (exc.get("torch_file") if exc is not None else None) or cpp
    family = module_family(module, head) or PHASE_FAMILY[phase]
    if phase == "lowering" and module_family(module) == "dynamic_shape_violation":
        # a guard that Inductor's own code asked the shape engine for (sizevars.guard_equals, a Caused-by in
        # _inductor): not a constraint of the model's export (docs/families.md)
        family = "lowering_error"
    if phase == "unknown" and catalogue:  # no frame places it: is it a catalogued message, and where raised?
        said = (exc or {}).get("message") if complete else (terminate[0].get("what") if terminate else None)
        found = said_known or lookup(said)
        if found is not None and not (found.warning or found.carrier) and found.family in FAMILIES \
                and found.family != "unexplained":
            file = found.file.rpartition(":")[0]
            routed, _ = route_phase([(file, "")])
            phase = routed if routed not in ("unknown", "user") else phase
            source = f"catalogue: {file.split('/')[0]} raises this message in {found.file} " \
                     f"({found.first_version}-{found.last_version})"
            family = found.family
    row.update(phase=phase, phase_source=source, family=family)

    # the user's code closest to the failure
    site = exc if exc is not None and exc.get("user_file") else next(
        (e for e in reversed(excs) if e.get("user_file")), None) or next((f for f in faults if f.get("user_file")), None)
    if site is not None:
        row.update(user_file=site["user_file"], user_line=site.get("user_line"), user_code=site.get("user_code"))
    else:
        frame = next((c["user_frame"] for c in compiles if c.get("user_frame")), None)
        if frame:
            file, _, line = frame.rpartition(":")
            row.update(user_file=file, user_line=int(line) if line.isdigit() else None)
    return row
