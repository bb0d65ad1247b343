"""Frame schemas: the tables every ingest step produces and every rule reads.

All frames share two columns: ``run_id`` (one analysed process or capture) and, where rows come from a file,
``path`` + ``lineno`` (1-based), which the rule engine turns into evidence locations.

``SCHEMAS`` is the single source of truth. ``docs/frames.md`` is generated from it
(``python -m aoti_trace.model.frames > docs/frames.md``) and a test keeps the two in sync.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Hashable, TypeVar, cast

import polars as pl

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

T = TypeVar("T")

Str, I32, I64, F64, Bool = pl.String, pl.Int32, pl.Int64, pl.Float64, pl.Boolean

# frame name -> (description, {column: (dtype, description)})
SCHEMAS: dict[str, tuple[str, dict[str, tuple[PolarsDataType, str]]]] = {
    # ------------------------------------------------------------------ TORCH_TRACE
    "events": (
        "One row per TORCH_TRACE record (header line); payloads stay on disk, addressed by byte offset. Of a trace "
        "file over 64 MiB, only the first and last 4096 plain chromium_event records (no compile id, no stack) are "
        "kept, and (unless every payload is verified) the compile sessions that finished ok in the middle of the "
        "file are left out but for their str records and the first record of each stack; the first session, every "
        "failed, incomplete or damaged one and the last ones are kept whole (damage kind records_skipped counts what "
        "was left out; session numbers are those of the whole file).",
        {
            "run_id": (Str, "analysed run"),
            "path": (Str, "trace file"),
            "lineno": (I64, "line of the record header"),
            "rank": (I32, "rank from the envelope, else from the file name (rank_N), else null"),
            "level": (Str, "glog level letter (V I W E C)"),
            "time": (Str, "glog timestamp 'MMDD HH:MM:SS.ffffff' (local time, no year)"),
            "pid": (I64, "process id from the glog prefix"),
            "src": (Str, "torch source file:line that logged the record"),
            "event": (Str, "first envelope key: the event name (artifact, graph_dump, compilation_metrics, ...)"),
            "compile_id": (Str, "tlparse display form '[frame/compile]', '[frame/compile_attempt]', '[!ca/frame/compile]' or null"),
            "session": (I32, "derived compile session (0-based per file); AOTI records carry no compile id"),
            "stack": (I32, "the stack logged with the record: stacks.stack of the same path; null when none"),
            "name": (Str, "artifact / graph_dump / dump_file name"),
            "encoding": (Str, "artifact encoding (string, json)"),
            "payload_offset": (I64, "byte offset of the payload's first line (with its TAB) in the file"),
            "payload_length": (I64, "payload byte length on disk (TABs and newlines included)"),
            "payload_lines": (I32, "number of payload lines"),
            "md5": (Str, "has_payload from the envelope"),
            "md5_ok": (Bool, "payload md5 matches has_payload (null when not checked or no payload)"),
        },
    ),
    "compiles": (
        "One row per compile session, closed by its compilation_metrics record (or by the end of the log). Of a "
        "trace file over 64 MiB, the sessions that finished ok in the middle of the file have no row (events).",
        {
            "run_id": (Str, "analysed run"),
            "path": (Str, "trace file"),
            "lineno": (I64, "line of the compilation_metrics record (or of the session's last record)"),
            "rank": (I32, "rank"),
            "session": (I32, "compile session"),
            "compile_id": (Str, "display compile id, null for AOTI"),
            "kind": (Str, "aoti | dynamo | export"),
            "api": (Str, "user-facing API seen in the stack: aoti_compile_and_package, aot_compile, compile, export, ..."),
            "user_frame": (Str, "user code 'file:line' that called the API (from the interned stack)"),
            "status": (Str, "ok | failed | incomplete (no compilation_metrics: process died mid-compile)"),
            "fail_type": (Str, "exception type of a failed compile"),
            "fail_reason": (Str, "exception text of a failed compile (multi-line)"),
            "start_time_us": (I64, "compile start (epoch microseconds)"),
            "end_time_us": (I64, "compile end (epoch microseconds)"),
            "duration_s": (F64, "compile duration in seconds"),
            "pytorch_version": (Str, "torch version"),
            "python_version": (Str, "python version"),
            "cuda_version": (Str, "CUDA version torch was built with"),
            "triton_version": (Str, "triton version"),
            "device_key": (Str, "AOTI_DEVICE_KEY from inductor_config aot_inductor.metadata (cpu, cuda, ...)"),
            "aoti_platform": (Str, "AOTI_PLATFORM"),
            "aoti_machine": (Str, "AOTI_MACHINE"),
            "cpu_isa": (Str, "AOTI_CPU_ISA"),
            "compute_capability": (Str, "AOTI_COMPUTE_CAPABILITY"),
            "cxx": (Str, "C++ compiler from inductor_config cpp.cxx"),
            "nan_asserts": (Bool, "inductor_config nan_asserts"),
            "debug_printer": (Str, "inductor_config aot_inductor.debug_intermediate_value_printer"),
        },
    ),
    "artifacts": (
        "One row per record with a payload (artifact, graph_dump, ...); read the text with read_payload().",
        {
            "run_id": (Str, "analysed run"),
            "path": (Str, "trace file"),
            "lineno": (I64, "line of the record header"),
            "rank": (I32, "rank"),
            "session": (I32, "compile session"),
            "event": (Str, "event name"),
            "name": (Str, "artifact or graph_dump name"),
            "encoding": (Str, "artifact encoding"),
            "payload_offset": (I64, "byte offset of the payload"),
            "payload_length": (I64, "payload byte length on disk"),
            "md5_ok": (Bool, "payload md5 matches"),
        },
    ),
    "stacks": (
        "Stack frames logged with records (dynamo_start and id-less AOTI/export records), interned names resolved: "
        "one set of frames per distinct stack per trace file (events.stack says which records logged it).",
        {
            "run_id": (Str, "analysed run"),
            "path": (Str, "trace file"),
            "lineno": (I64, "line of the first record of the file that logged this stack"),
            "stack": (I32, "stack id, 0-based per file in order of first appearance (events.stack)"),
            "records": (I32, "number of records of the file that logged this stack (records a long file's events "
                                "left out included)"),
            "depth": (I32, "0 = outermost frame"),
            "filename": (Str, "source file of the frame (resolved from the str table)"),
            "line": (I32, "line in that source file"),
            "function": (Str, "function name"),
            "code": (Str, "source text of the line (loc)"),
            "is_user": (Bool, "frame is outside torch / the standard library"),
        },
    ),
    "damage": (
        "Problems found in the inputs themselves: one row per (source, kind), with a count and the first location.",
        {
            "run_id": (Str, "analysed run"),
            "path": (Str, "damaged file"),
            "lineno": (I64, "first damaged line"),
            "kind": (Str, "no_inputs | truncated_line | truncated_payload | md5_mismatch | bad_json | bad_header | bad_utf8 | bad_gzip | unknown_event | schema_drift | orphan_payload | no_trace_files | empty_file | unreadable | not_regular_file | symlink_skipped | lost_output | incomplete_compile | cut_mid_line | line_split | line_clipped | lines_skipped | records_skipped"),
            "count": (I64, "occurrences"),
            "detail": (Str, "human-readable description of the first occurrence"),
        },
    ),
    # ------------------------------------------------------------------ stderr / stdout
    "lines": (
        "Every line of captured stderr/stdout (ANSI colours stripped), classified. Of a stream over 64 MiB, only the "
        "head, the tail and the failure signals (damage kind lines_skipped counts the rest).",
        {
            "run_id": (Str, "analysed run"),
            "stream": (Str, "stderr | stdout"),
            "path": (Str, "file the line was read from ('-' for standard input)"),
            "lineno": (I64, "1-based line number"),
            "rank": (I32, "from a [rankN]: prefix, else null"),
            "kind": (Str, "torch_log | traceback | traceback_code (a source line quoted by a traceback) | exception | cpp_error | aoti_torch_exception | device_assert | compiler_diagnostic | faulthandler | cpp_frame | output_code | printer | terminate | warning | noise | plain"),
            "level": (Str, "log level of a line with a log header (V D I W E F C): torch's glog header, ExecuTorch's "
                           "ET_LOG, Android logcat; any kind; else null"),
            "src": (Str, "source file:line from the log header (torch/x.py:12, shim_common.cpp:311; the tag for "
                         "Android logcat), else null"),
            "prefix": (Str, "decoration removed from the line: timestamps, CI annotations, [rankN]:, launcher and logging "
                            "prefixes, the glog header; null when none"),
            "text": (Str, "the message: the line without its prefix, colour codes or line terminator (IPython "
                          "traceback lines rewritten to the standard form)"),
            "raw": (Str, "the line as written, without colour codes or line terminator: what a report shows around evidence"),
        },
    ),
    "exceptions": (
        "Python exceptions assembled from tracebacks; a chain gives one row per exception.",
        {
            "run_id": (Str, "analysed run"),
            "path": (Str, "file"),
            "lineno": (I64, "line of the 'Type: message' line"),
            "chain": (I32, "position in its chain, 0 = the first printed (root cause when chained)"),
            "chained_by": (Str, "cause | context | null: how the next exception in the chain relates"),
            "is_final": (Bool, "the last exception of its chain (what the process died with)"),
            "complete": (Bool, "false for a traceback cut before its 'Type: message' line (then exc_type is null)"),
            "level": (Str, "glog level when the traceback was written through a logger (W, E, ...), else null"),
            "exc_type": (Str, "qualified exception type, e.g. torch._inductor.exc.InductorError"),
            "message": (Str, "exception message (may span lines)"),
            "user_file": (Str, "innermost frame outside torch / stdlib / generated code ('<string>', Inductor cache)"),
            "user_line": (I32, "its line"),
            "user_function": (Str, "its function"),
            "user_code": (Str, "source text of that line, when the traceback shows it"),
            "raise_code": (Str, "source text of the innermost frame's line (the statement that raised), when shown"),
            "torch_function": (Str, "innermost torch frame's function"),
            "torch_file": (Str, "innermost torch frame's file (relative to site-packages when possible)"),
            "frames": (I32, "number of traceback frames"),
            "phase": (Str, "phase the exception was raised in (aoti_trace.model.vocabulary.PHASES), from its frames"),
            "phase_source": (Str, "what decided the phase: 'frame: torch/x.py in f' or 'call: <user code>'"),
        },
    ),
    "device_asserts": (
        "CUDA/Triton device-side assertion lines.",
        {
            "run_id": (Str, "analysed run"),
            "path": (Str, "file"),
            "lineno": (I64, "line"),
            "kernel_file": (Str, "generated kernel source file"),
            "kernel_line": (I32, "line in the kernel file"),
            "function": (Str, "function field of the assert line"),
            "block": (Str, "block index 'x,y,z'"),
            "thread": (Str, "thread index 'x,y,z'"),
            "assertion": (Str, "the assertion text"),
            "index_var": (Str, "index variable of an 'index out of bounds' assertion (tmpN)"),
            "lower": (Str, "lower bound"),
            "upper": (Str, "upper bound expression (e.g. ks0, 1024)"),
            "count": (I64, "assertion lines differing only in block/thread folded into this row (block/thread: the first)"),
        },
    ),
    "faults": (
        "Fatal signals (faulthandler dumps) and C++ terminate/what() pairs.",
        {
            "run_id": (Str, "analysed run"),
            "path": (Str, "file"),
            "lineno": (I64, "first line of the dump"),
            "kind": (Str, "fatal_signal | terminate"),
            "signal": (Str, "SIGSEGV, SIGABRT, SIGBUS, SIGILL, SIGFPE (fatal_signal)"),
            "exc_type": (Str, "C++ exception type (terminate)"),
            "what": (Str, "what() text, first line (terminate); the fatal error or the shell's line (fatal_signal)"),
            "torch_function": (Str, "innermost torch frame of the crashing thread"),
            "torch_file": (Str, "its file"),
            "user_file": (Str, "innermost user frame of the crashing thread"),
            "user_line": (I32, "its line"),
            "phase": (Str, "phase of the crashing thread's stack (aoti_trace.model.vocabulary.PHASES)"),
            "stack": (Str, "the crashing thread's stack, innermost first, one frame per line"),
        },
    ),
    "printer": (
        "AOTI intermediate value printer output (AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER).",
        {
            "run_id": (Str, "analysed run"),
            "path": (Str, "file"),
            "lineno": (I64, "line"),
            "event": (Str, "before_launch | after_launch | model_inputs"),
            "kernel": (Str, "kernel name"),
            "arg": (Str, "argument / buffer name (level 2)"),
            "numel": (I64, "number of elements"),
            "dtype": (Str, "dtype"),
            "mean": (F64, "mean value"),
            "min": (F64, "min value"),
            "max": (F64, "max value"),
            "device": (Str, "device"),
            "size": (Str, "size"),
            "stride": (Str, "stride"),
            "suspicious": (Bool, "NaN/Inf in the statistics"),
            "launched_last": (Bool, "rows of the last launch with no complete after_launch: the kernel running at the crash"),
        },
    ),
    "process": (
        "How each captured process ended.",
        {
            "run_id": (Str, "analysed run"),
            "path": (Str, "manifest or exit-code file (or '--exit-code')"),
            "lineno": (I64, "always null"),
            "command": (Str, "command line, when known"),
            "exit_code": (I32, "exit status (negative: killed by signal, as subprocess reports it)"),
            "signal": (Str, "signal name when killed by one (SIGSEGV, ...), from -N, 128+N or a name"),
            "timed_out": (Bool, "ended by aoti-trace run --timeout"),
            "interrupted": (Bool, "aoti-trace forwarded Ctrl-C / SIGTERM to the command"),
            "duration_s": (F64, "wall time"),
            "env": (Str, "debug variables set for the run, 'K=V' space-separated"),
            "torch": (Str, "torch version of the captured process (manifest environment)"),
            "cuda": (Str, "CUDA version torch was built with (manifest environment)"),
            "gpus": (Str, "GPUs seen by nvidia-smi -L, '; '-separated (manifest environment)"),
            "cxx": (Str, "C++ compiler in use: CXX or torch's configured one (manifest environment)"),
            "cxx_version": (Str, "first line of the compiler's --version (manifest environment)"),
            "libstdcxx": (Str, "newest GLIBCXX version of the loaded libstdc++ (manifest environment)"),
        },
    ),
    "failures": (
        "Whether each run failed, decided from every source independently of the rule library; one row per run that "
        "failed (derived from the frames above by aoti_trace.ingest.text.failure).",
        {
            "run_id": (Str, "analysed run"),
            "path": (Str, "file of the main evidence (null when only the exit status shows it)"),
            "lineno": (I64, "its line"),
            "signals": (Str, "the evidence, comma-separated: exit_code, signal, timed_out, interrupted, exception, "
                             "cut_traceback, cpp_error, terminate, compiler_error, fatal_signal, device_assert, "
                             "failed_compile, incomplete_compile, torch_error_footer, test_failed, debugger_abort, "
                             "fatal_log"),
            "what": (Str, "what failed, one line: the last exception (a bare assert: the assert statement), else the "
                          "first error line, else how it ended"),
            "text": (Str, "the log line at path:lineno, without its prefix (null when the failure has no line)"),
            "exc_type": (Str, "exception type of `what`, when it is an exception"),
            "phase": (Str, "phase it failed in (aoti_trace.model.vocabulary.PHASES)"),
            "phase_source": (Str, "what decided the phase"),
            "family": (Str, "family of this failure when no rule explains it (aoti_trace.model.vocabulary.PHASE_FAMILY)"),
            "user_file": (Str, "the user's code closest to the failure"),
            "user_line": (I32, "its line"),
            "user_code": (Str, "source text of that line, when known"),
        },
    ),
    "divergence": (
        "Ranks of one run whose compiles differ from the other ranks' (as tlparse --all-ranks-html compares them): one "
        "row per diverging rank (derived from compiles and events by aoti_trace.ingest.divergence).",
        {
            "run_id": (Str, "analysed run"),
            "path": (Str, "the diverging rank's trace file"),
            "lineno": (I64, "always null: the divergence is of whole traces"),
            "rank": (I32, "the diverging rank"),
            "ranks": (Str, "every diverging rank of the run, as ranges"),
            "reference": (Str, "the ranks that agree (the largest group), as ranges"),
            "aspects": (Str, "where this rank differs: graphs, compile_ids, guards, code (comma-separated)"),
            "detail": (Str, "what differs, per group of ranks: 'rank 1 vs rank 0: 3 compiled graphs instead of 2, ...'"),
        },
    ),
    # ------------------------------------------------------------------ read on first use (aoti_trace.ingest.code / .sources)
    "code": (
        "Generated code of each run, read on first use: the trace's wrapper / kernel / output-code dumps (the newest "
        "ones) and the C++ kernel entries of its .pt2 packages.",
        {
            "run_id": (Str, "analysed run"),
            "path": (Str, "trace file or package the text was read from"),
            "lineno": (I64, "line of the trace record (null for a package entry)"),
            "event": (Str, "trace record event (artifact, graph_dump, ...); null for a package entry"),
            "name": (Str, "artifact / graph_dump name (inductor_aot_wrapper_code, ...) or the package entry"),
            "source": (Str, "'trace' or 'package'"),
            "text": (Str, "the code"),
        },
    ),
    "generated": (
        "Generated files that a run's log names (a device assert's kernel file, `*.wrapper.cpp:N` / "
        "`*.kernel.cpp:N` in a line), read on first use from this machine's disk, else from the run's packages.",
        {
            "run_id": (Str, "analysed run"),
            "file": (Str, "the generated file as the log names it"),
            "source": (Str, "'disk' or 'package'"),
            "path": (Str, "file or package the text was read from"),
            "entry": (Str, "package entry (null when read from disk)"),
            "text": (Str, "the file's text"),
        },
    ),
    "chromium": (
        "The payloads of the trace's chromium_event records (compile-phase spans), read on first use.",
        {
            "run_id": (Str, "analysed run"),
            "path": (Str, "trace file"),
            "lineno": (I64, "line of the record header"),
            "rank": (I32, "rank of the record"),
            "session": (I32, "compile session of the record"),
            "payload": (Str, "the event as torch wrote it (JSON)"),
        },
    ),
    "sources": (
        "The user's source statement at each call site the trace names (compiles.user_frame), read on first use from "
        "this machine, else from a copy beside the capture's manifest.",
        {
            "run_id": (Str, "analysed run"),
            "file": (Str, "source file as the trace names it"),
            "line": (I32, "line of the call"),
            "statement": (Str, "the whole statement starting there (continuation lines joined, at most 15 lines)"),
        },
    ),
    "package": (
        "Facts read from .pt2 packages without loading them (long form); keys are listed in docs/package-facts.md.",
        {
            "run_id": (Str, "analysed run"),
            "path": (Str, "package file"),
            "lineno": (I64, "line in the archive entry the fact was read from, else null"),
            "model": (Str, "model name inside the package (null for archive-level facts, '<host>' for facts about this machine)"),
            "item": (Str, "what the fact is about inside the model: input index, constant name, kernel, extern node; null for model-level facts"),
            "key": (Str, "fact name: AOTI_DEVICE_KEY, AOTI_COMPUTE_CAPABILITY, extern_op, input_dtype, ..."),
            "value": (Str, "fact value"),
            "entry": (Str, "archive entry the fact came from"),
        },
    ),
}

FRAME_NAMES: tuple[str, ...] = tuple(SCHEMAS)


# frame -> its text column: the line of text a finding quotes as evidence when a rule matches a row of that frame
TEXT_COLUMNS: dict[str, str] = {
    "lines": "text",
    "exceptions": "message",
    "compiles": "fail_reason",
    "device_asserts": "assertion",
    "faults": "what",
    "damage": "detail",
    "failures": "what",
    "divergence": "detail",
}


@functools.cache
def schema(name: str) -> pl.Schema:
    """Polars schema of frame ``name`` (built once per name)."""
    return pl.Schema({col: dtype for col, (dtype, _) in SCHEMAS[name][1].items()})


@functools.cache
def empty(name: str) -> pl.DataFrame:
    """An empty frame with the schema of ``name``, built once per name and shared (Polars frames are not changed in
    place here; every operation returns a new frame)."""
    return pl.DataFrame(schema=schema(name))


def conform(name: str, df: pl.DataFrame) -> pl.DataFrame:
    """Cast ``df`` to the schema of ``name``: add missing columns as nulls, order columns, keep extras last.
    A frame that already has that form is returned as it is."""
    target = schema(name)
    names = df.columns  # (names and dtypes: cheaper than building DataFrame.schema)
    n = len(target)
    if len(names) >= n and names[:n] == _names(name) and df.dtypes[:n] == _dtypes(name) \
            and not any(c in target for c in names[n:]):
        return df
    return df.select(_conform_exprs(name, tuple(df.columns)))


@functools.cache
def _names(name: str) -> list[str]:
    return list(schema(name))


@functools.cache
def _dtypes(name: str) -> list[PolarsDataType]:
    return list(schema(name).values())


@functools.lru_cache(maxsize=4096)
def _conform_exprs(name: str, columns: tuple[str, ...]) -> list[pl.Expr]:
    """The select of :func:`conform` for a frame with ``columns`` (building Polars expressions costs more than
    running them on a small frame, and the same few column sets come again and again)."""
    target = schema(name)
    cols = [(pl.col(c).cast(t) if c in columns else pl.lit(None, dtype=t)).alias(c) for c, t in target.items()]
    return cols + [pl.col(c) for c in columns if c not in target]


class Derived:
    """A frame computed from the other frames on first use (and then kept): its function reads files that the frames
    point at (trace payloads, package entries, source files), which most analyses never need."""

    def __init__(self, fn: Callable[[Frames], pl.DataFrame]) -> None:
        self.fn = fn
        self.value: pl.DataFrame | None = None

    def get(self, name: str, frames: Frames) -> pl.DataFrame:
        if self.value is None:
            self.value = conform(name, self.fn(frames))
        return self.value


@dataclass
class Frames:
    """A named set of frames. Missing frames read as empty frames with the right schema; a derived frame is computed
    on first use (:meth:`derive`)."""

    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    derived: dict[str, Derived] = field(default_factory=dict)
    # lookups built once from a frame (:meth:`index`): key -> (the frame it was built from, the lookup)
    indexes: dict[Hashable, tuple[pl.DataFrame, Any]] = field(default_factory=dict, repr=False, compare=False)

    def __getitem__(self, name: str) -> pl.DataFrame:
        if name not in SCHEMAS:
            raise KeyError(f"unknown frame {name!r}; known: {', '.join(FRAME_NAMES)}")
        if name not in self.tables and name in self.derived:
            return self.derived[name].get(name, self)
        return self.tables.get(name, empty(name))

    def add(self, name: str, df: pl.DataFrame) -> None:
        """Append rows to frame ``name`` (conformed to its schema)."""
        df = conform(name, df)
        if name in self.tables:
            df = pl.concat([self.tables[name], df], how="diagonal_relaxed")
        self.tables[name] = df

    def merge(self, other: Frames) -> None:
        for name, df in other.tables.items():
            self.add(name, df)

    def derive(self, name: str, fn: Callable[[Frames], pl.DataFrame]) -> None:
        """Compute frame ``name`` with ``fn(frames)`` when it is first read."""
        self.derived[name] = Derived(fn)

    def copy(self) -> Frames:
        """A shallow copy: the same frames, and the same derived frames (computed once for both)."""
        return Frames(dict(self.tables), dict(self.derived))

    def run_ids(self, skip: tuple[str, ...] = ()) -> list[str]:
        """Every run that has at least one row in a frame (but those named in ``skip``), in first-seen order.

        A derived frame (:meth:`derive`: code, generated, chromium, sources) holds rows of runs that other frames have
        (it is read from what they point at): it is computed here only when a frame after it in :data:`SCHEMAS` holds
        a run not seen yet, i.e. when it could place that run earlier (computing it reads files)."""
        seen: dict[str, None] = {}
        names = [n for n in SCHEMAS if n not in skip]
        for at, name in enumerate(names):
            if name in self.derived and name not in self.tables and self.derived[name].value is None:
                later = [self[n] for n in names[at + 1:] if n not in self.derived]
                if all(rid in seen for df in later if df.height
                       for rid in df.get_column("run_id").unique().to_list() if rid is not None):
                    continue
            df = self[name]
            if df.height:
                for rid in df.get_column("run_id").unique(maintain_order=True).to_list():
                    if rid is not None:
                        seen.setdefault(rid, None)
        return list(seen)

    def index(self, key: Hashable, df: pl.DataFrame, build: Callable[[], T]) -> T:
        """A lookup built from ``df`` (one of these frames) by ``build()``, once: kept under ``key`` for as long as
        ``df`` is the frame it was built from (per-run lookups of the rule pass: one pass over a frame instead of a
        filter per finding). The caller must not change what it gets."""
        got = self.indexes.get(key)
        if got is None or got[0] is not df:
            got = self.indexes[key] = (df, build())
        return cast(T, got[1])


def markdown() -> str:
    """The frame reference as markdown (docs/frames.md)."""
    out = ["# Frames", "", "Generated from `aoti_trace/model/frames.py` (`python -m aoti_trace.model.frames`). Do not edit.", ""]
    for name, (doc, cols) in SCHEMAS.items():
        out += [f"## `{name}`", "", doc, "", "| column | type | meaning |", "| --- | --- | --- |"]
        out += ["| `%s` | %s | %s |" % (c, t, d.replace("|", "\\|")) for c, (t, d) in cols.items()]
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown(), end="")
