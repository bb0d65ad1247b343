"""Decode captured stderr/stdout and classify every line (the ``lines`` frame).

Classification is done with Polars expressions over the whole column. Context (is this indented line part of a
traceback? is this plain line the continuation of an exception message, or of generated code echoed by
``TORCH_LOGS=output_code``?) is computed with forward-filled block states, partitioned by rank so that the
interleaved output of several ``[rankN]:`` processes classifies as if each had been captured alone.

:func:`classify` returns the frame with helper columns (prefixed ``_``) that the assemblers in
``tracebacks.py``, ``faults.py``, ``printer.py`` and ``asserts.py`` use; :func:`public` drops them.

All patterns use the Rust regex dialect and compile in Python ``re`` too (a test checks both).
"""

from __future__ import annotations

import polars as pl

# ---------------------------------------------------------------------------------------------- line cleanup
ANSI = r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"
RANK_IN_PREFIX = r"\[(?:rank|default)(\d+)\]:"
# Decorations that CI systems, launchers and logging frameworks put before a line; any chain of them is removed
# (``lines.prefix`` keeps it). One token each, with its own separator where it has one:
DECORATIONS: dict[str, str] = {
    # ISO timestamps (GitHub Actions, containerd 'stderr F', Python logging asctime), bracketed or not
    "timestamp": (r"\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?"
                  r"(?: (?:stdout|stderr) [FP])?(?: [-|])? ?"),
    "clock": r"\[\d\d:\d\d:\d\d(?:[.,]\d+)?\]:? ?",
    "ci": r"##\[(?:error|warning|notice|debug|info|group|endgroup|section|command)\]",
    "rank": r"\[(?:rank|default)\d+\]:",
    # Ray's and vLLM's process tag ('(EngineCore pid=2328) '), also behind a test harness label ('[test 1] ')
    "ray": r"(?:\[[A-Za-z][\w -]{0,20}\] )?\((?:[\w.]+ )?pid=\d+(?:, ip=[\d.]+)?\) ",
    "mpirun": r"\[\d+,\d+\]<(?:stdout|stderr)>: ?",
    # Python logging: 'ERROR:root:', '[ERROR] ', 'root - ERROR - ', loguru 'ERROR    | mod:fn:12 - '
    "logging": (r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL):[\w.<>-]*:"
                r"|\[(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\] ?"
                r"|[\w.]+ - (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - "
                r"|(?:TRACE|DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL) +\| [\w.<>]+:[\w<>]+:\d+ - "
                # vLLM / SGLang: 'ERROR 07-23 07:21:49 [core.py:586] '
                r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]\s]+\] "
                # a C++ logger's '[20:26:00 /src/main.cpp:51] '
                r"|\[\d\d:\d\d:\d\d(?:\.\d+)? [^\]\s]+:\d+\] "
                # ExecuTorch's ET_LOG: '[method.cpp:66] '
                r"|\[[\w.-]+\.(?:cpp|cc|cxx|c|h|hpp|mm?):\d+\] "),
    # pytest's failure report: 'E       RuntimeError: ...'
    "pytest": r"E(?: {7}| {3})",
    # a log pasted into a Markdown quote ('> Traceback ...'; not a REPL's '>>> ') or between curly quotes
    "quote": r">(?: |$)|[\u201c\u201e]",  # or an opening curly quote around a quoted log line
    # a box-drawing gutter that some terminals and test runners draw left of captured output (' │ E   RuntimeError')
    "gutter": r" ?\u2502 ",
}
DECORATION = "^(?:" + "|".join(f"(?:{p})" for p in DECORATIONS.values()) + ")+"
# glog header of torch's Python logging (``W1130 05:06:08.690000 13845 torch/x.py:874] ``) and of c10's C++
# logging (``[W1130 05:06:08.690000000 ProcessGroupNCCL.cpp:123] ``, ``[E520 19:20:12.156885067 shim_common.cpp:311] ``)
GLOG = (r"^\[?(?P<level>[VIWEFC])\d{3,4} \d\d:\d\d:\d\d\.\d+(?: +\d+)? (?P<src>[^\s\]]+:\d+)\] ?"
        r"(?:\[!?(?:[a-z]+/)?\d+/\d+(?:_\d+)?\] )?")  # + the compile id torch adds: '[0/0] ', '[!ca/0/1_1] '
# older c10 logging without a timestamp: ``[E ProcessGroupNCCL.cpp:563] ``
GLOG_SHORT = r"^\[(?P<level>[VIWEFC]) (?P<src>[^\s\]]+:\d+)\] ?"
# ExecuTorch's ET_LOG ('E executorch:program.cpp:108] ', 'F 00:00:00.000658 executorch:operator_registry.cpp:33] ')
GLOG_ET = r"^(?P<level>[DIWEFC]) (?:\d\d:\d\d:\d\d\.\d+ )?(?P<src>executorch:[^\s\]]+:\d+)\] ?"
# Android logcat ('F/libc    (25506): ', '02-28 16:07:12.101: I/ETLOG(8314): '); the tag is the source
LOGCAT = r"^(?:\d\d-\d\d \d\d:\d\d:\d\d\.\d+:? +)?(?P<level>[VDIWEF])/(?P<src>[\w.$-]+) *\( *\d+\): "
# torch 2.0-2.2's own log format after its timestamp ('[0/1] torch._subclasses.fake_tensor: [ERROR] '); the logger
# is the source, the level's initial the level
TORCH_LOGGER = (r"^(?:\[!?(?:[a-z]+/)?\d+/\d+(?:_\d+)?\] )?(?P<src>torch\.[\w.]+): "
                r"\[(?P<level>[DIWEC])(?:EBUG|NFO|ARNING|RROR|RITICAL)\] ?")
# every log header that gives a line its level and source, tried in this order
LOG_HEADERS = (GLOG, GLOG_SHORT, GLOG_ET, LOGCAT, TORCH_LOGGER)
# IPython / Jupyter tracebacks (and exceptions printed as "<class 'T'>: message"), rewritten into the standard form
# so that one traceback parser reads both
# ('RuntimeError    Traceback (most recent call last)', 'File ~/x.py:12, in f(a)', 'Cell In[3], line 5',
# '----> 12 out = model(x)' and IPython 7's 'x.py in f(a)')
# IPython's traceback header names the exception ('CacheLimitExceeded    Traceback (most recent call last)')
IPYTHON_TB_HEAD = r"^(?P<type>[A-Za-z_][\w.]*)\s{2,}Traceback \(most recent call last\)\s*$"
IPYTHON: list[tuple[str, str]] = [
    (IPYTHON_TB_HEAD, "Traceback (most recent call last):"),
    (r'^File (?P<f>[^"\s][^\n]*?):(?P<l>\d+), in (?P<fn>[^\s(]+)(?:\(.*)?$', '  File "${f}", line ${l}, in ${fn}'),
    (r"^Cell In ?\[(?P<n>\d*)\], line (?P<l>\d+)\s*$", '  File "<cell In[${n}]>", line ${l}, in <module>'),
    (r"^(?P<f><ipython-input-[^>]+>) in (?P<fn>[^\s(]+)(?:\(.*)?$", '  File "${f}", line 0, in ${fn}'),
    (r"^(?P<f>\S+\.py) in (?P<fn>[^\s(]+)\(.*\)\s*$", '  File "${f}", line 0, in ${fn}'),
    (r"^(?P<a>-*> ?\d+ .*)$", "    ${a}"),
    # an exception printed as its class and message (torch.onnx's 'Exception summary', print(type(e), e)):
    # "<class 'torch._dynamo.exc.UserError'>: Constraints violated" -> "torch._dynamo.exc.UserError: Constraints ..."
    (r"^<class '(?P<t>[A-Za-z_][\w.]*)'>:", "${t}:"),
]

# ---------------------------------------------------------------------------------------------- line patterns
# Matched against the message: the line after the rank prefix and the glog header.
PATTERNS: dict[str, str] = {
    "tb_head": r"^Traceback \(most recent call last\):\s*$",
    "tb_cause": r"^The above exception was the direct cause of the following exception:\s*$",
    "tb_context": r"^During handling of the above exception, another exception occurred:\s*$",
    # two spaces of indent as Python prints it; none or more when a paste lost or added some
    "tb_file": r'^ {0,4}File "[^"]*", line \d+, in ',
    "tb_frame": r'^ {0,4}File "(?P<file>[^"]*)", line (?P<line>\d+),? in (?P<func>\S+)',
    # ``Type: message`` / ``Type`` / ``Type:`` as Python prints the last line of a traceback
    "exc_line": r"^(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*(?::(?: .*)?)?$",
    # an exception line without its traceback (a log pasted from its last line, a one-line CI summary): only types
    # whose name says so ('AssertionError: ...', 'torch._dynamo.exc.BackendCompilerFailed: ...', 'KeyboardInterrupt')
    "bare_exc": (
        r"^(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*(?:Error|Exception|Failed|Failure|Interrupt)"
        r"(?::(?: .*)?)?$"
        # any type that torch or triton defines, whatever its name ('torch._dynamo.exc.FailOnRecompileLimitHit: ...')
        r"|^(?:torch|triton)\.(?:[A-Za-z_][A-Za-z0-9_]*\.)+[A-Z][A-Za-z0-9_]*: "
    ),
    # the footer torch appends to a Dynamo/export error message: the message above it is an error even when its
    # 'Type: message' line was not posted
    "torch_footer": (
        r"^Set TORCH_LOGS=\\?\"\+dynamo\\?\" and TORCHDYNAMO_VERBOSE=1 for more information"
        r"|^You can suppress this exception and fall back to eager by setting:"
        r"|^The error above occurred when calling torch\.export\.export"
    ),
    # the line that introduces a stack printed for information, not a traceback
    "stack_print": r"(?:\bFound from :|^Stack \(most recent call last\):|^from user code:)\s*$",
    # a debugger's backtrace (gdb 'bt') through the C library's abort: the process aborted (SIGABRT)
    "gdb_abort": r"^#\d+\s+(?:0x[0-9a-fA-F]+ in )?(?:__GI_)?(?:abort|raise|__pthread_kill\w*) \(",
    # a debugger's backtrace frame
    "gdb_frame": r"^#\d+\s+(?:0x[0-9a-fA-F]+ in )?\S",
    # a build tool's own error line (CMake, LLVM): the build or the JIT stopped
    "tool_error": r"^(?:CMake Error(?: at \S+)?:|LLVM ERROR: )",
    # an application's error report that carries the exception ('Error during model prediction: CompilationError: ..')
    "error_report": (r"^Error(?: [a-z][\w ]{0,40})?: (?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b"
                     # ComfyUI's report of a node that raised ('!!! Exception during processing !!! <message>')
                     r"|^!!! Exception during processing !!! \S"
                     # Dynamo's wrapper message flattened onto one line by a UI or a paste ('<node> backend='inductor'
                     # raised: FileNotFoundError: ...'): the exception it announces follows on the same line
                     r"|\bbackend='\w+' raised: (?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b"
                     # a test report table's row whose cell is the exception ('test_x.py | TestX | test_y |
                     # torch._inductor.exc.InductorError: RuntimeError: ...')
                     r"|\S \| (?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception): \S"),
    # ExecuTorch's ET_CHECK failing (it aborts the process): 'In function CheckOk(), assert failed: hasValue_'
    "et_check": r"^In function \w+\(\), assert failed",
    # a CI runner's closing line for a failed step (GitHub Actions): an exit status, not the error itself
    "ci_exit": r"^Error: Process completed with exit code (\d+)\.?\s*$",
    # a line that says something went wrong in words, without an error type: used only to say *what* failed once
    # another signal (an exit status) shows that the run failed
    "error_words": (
        r"(?i)\b(?:failed to|failed with|cannot|can't|could not|couldn't|unable to|no such file|not found"
        r"|not registered|not supported|invalid|missing)\b"
    ),
    # a test runner's verdict ('FAILED test_x.py::T::test_y - AssertionError: ...')
    "test_failed": r"^(?:FAILED|ERROR) (?:\[[\d.]+m?s\] )?\S+::\S+",
    "fh_fatal": r"^Fatal Python error: ",
    "faulthandler": (
        r"^(?:Fatal Python error: |Python runtime state: |(?:Current thread|Thread) 0x[0-9a-fA-F]+ "
        r"\(most recent call first\):|Current thread's C stack trace|Stack \(most recent call first\):"
        r'|  File "[^"]*", line \d+ in |  File "[^"]*", line \?\?\? in |  <no Python frame>|  Binary file "'
        r"|  <tstate is freed>|  Garbage-collecting|  \.\.\.$|Extension modules: )"
    ),
    "device_assert": (
        r"^(?P<file>.+?):(?P<line>\d+): (?P<func>[^:\n]+): block: \[(?P<block>\d+,\d+,\d+)\], "
        r"thread: \[(?P<thread>\d+,\d+,\d+)\] Assertion `(?P<msg>[^`]*)` failed\.?"
    ),
    "xpu_assert": r"global id: \[[^\]]*\], local id: \[[^\]]*\]\s*Assertion `(?P<msg>[^`]*)` failed",
    "terminate": r"^terminate called (?:after throwing an instance of '|without an active exception|recursively)",
    "what": r"^\s*what\(\):  ",
    # the AOTI runtime's 'Error: ...' and dynamic-loader failures printed on their own
    "cpp_error": r"^Error: |^Error in dlopen|: undefined symbol: \S|: cannot open shared object file",
    "aoti_torch_exception": r"Exception in aoti_torch: ",
    # c10 C++ stacks: 'frame #N: sym + 0x.. (0x.. in lib)'; symbolized form 'C++ CapturedTraceback:' + '#N sym from f:l'
    "cpp_frame": (
        r"^(?:frame #\d+: |Exception raised from \S.* \(most recent call first\):|<omitting python frames>"
        r"|C\+\+ CapturedTraceback:|#\d+ .+ from \S*:\S*$)"
    ),
    "compiler_diagnostic": (
        r"^(?:cc1plus|g\+\+|c\+\+|clang\+\+|collect2|/?\S+?\.(?:cpp|cc|cxx|c|h|hpp|cu|cuh)(?::\d+(?::\d+)?)?"
        r"|\S*\bld(?:\.\w+)?): (?:fatal )?error: "
        # nvcc / ptxas / nvlink ('ptxas fatal   : ...', 'nvcc fatal   : ...', 'ptxas error   : ...')
        r"|^(?:ptxas|nvcc|nvlink|fatbinary|cicc|nvrtc)[\w-]*(?: (?:fatal|error))? *: "
        # MSVC and its linker ('x.cpp(12): error C2065: ...', 'x.obj : error LNK2019: ...', 'LINK : fatal error LNK1104')
        r"|^\S.*?\(\d+(?:,\d+)?\) ?: (?:fatal )?error C\d+: |^\S.*? : (?:fatal )?error LNK\d+: "
        r"|\bundefined reference to `|^(?:fatal )?error: "
    ),
    "warning": r"^\S.*?:\d+: [A-Z]\w*Warning: |^\[WARNING\] |^Warning: |^UserWarning: ",
    # benign lines (aoti-signatures.md §1.6): context, never the diagnosis
    "noise": "|".join(
        [
            r"Loading outdated pt2 file\. Please regenerate your package\.",
            r"^\+=+\+\s*$",
            r"^\|\s+!!!\s+WARNING\s+!!!\s+\|",
            r"torch\._export\.aot_compile\(\)(?:/torch\._export\.aot_load\(\))? is being deprecated",
            r"`isinstance\(treespec, LeafSpec\)` is deprecated",
            r"`torch\.jit\.script_method` is deprecated",
            r"You no longer need to specify args/kwargs to aoti_compile_and_package",
            r"Unable to load package\. f must be a buffer or a file ending in \.pt2",
            r"Device information mismatch for AOTI_\w+: .* This could cause some issues",
            r"\[WARNING\] Found constant or module state buffer or empty module state parameter",
            r"TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled",
            r"CUDA kernel errors might be asynchronously reported at some other API call",
            r"^For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
            r"^Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions",
            r"^Search for `\w+' in https://docs\.nvidia\.com/",
            r"^The error above occurred when calling torch\.export\.export\.",
            r"Setting OMP_NUM_THREADS environment variable for each process to be 1 in default",
        ]
    ),
    # code echoed by TORCH_LOGS (output_code, kernel_code, graph_code, *_graphs): each line of the record carries
    # the glog header and the artifact tag in torch 2.13
    "code_tag": r"^(?:\[[^\]]*\] )*\[__(?:\w+_code|\w+_graphs?|ir_\w+)\]",
    "printer_header": r"^\[  (?:before_launch|after_launch|aoti_model_inputs) - .*  \]:\s*$",
    # the block's own header is the last one on the line: symbolic-size arguments are printed before it on the
    # same line, joined by a literal backslash-n ('[  before_launch - k - s70: 32  ]\n[  before_launch - k - arg3_1  ]:')
    "printer_last_header": r"\[  (?P<event>before_launch|after_launch|aoti_model_inputs) - (?P<rest>[^\[\]]*?)  \]:\s*$",
    "printer_launch": r"^\[ (?P<event>before_launch|after_launch): (?P<kernel>\S+) \]\s*$",
    "printer_stat": (
        r"^(?P<key>Number of elements|Dtype|Mean value|Min value|Max value|Device|Size|Stride|Layout"
        r"|Is contiguous|Requires grad): (?P<value>.*)$"
    ),
    "printer_content": (
        r"^(?:[ \t0-9.eE+\-naifNI(),=:*]*|\[ [A-Za-z0-9_]+\{[0-9,]*\} \]|Columns \d+ to \d+[ \t0-9.eE+\-naifNI]*"
        r"|(?:Number of elements|Dtype|Mean value|Min value|Max value|Device|Size|Stride|Layout|Is contiguous"
        r"|Requires grad): .*)$"
    ),
}

KINDS: tuple[str, ...] = (
    "torch_log", "traceback", "traceback_code", "exception", "cpp_error", "aoti_torch_exception", "device_assert",
    "compiler_diagnostic", "faulthandler", "cpp_frame", "output_code", "printer", "terminate", "warning", "noise",
    "plain",
)


def _has(name: str) -> pl.Expr:
    return pl.col("_msg").str.contains(PATTERNS[name])


# a line is classified on its first MAX_LINE_CHARS characters: ~25 regex columns over a multi-megabyte line (a log
# of one repeated character, binary data) would cost seconds per line; the rest is counted as damage ``line_clipped``
MAX_LINE_CHARS = 65_536


def clip_long_lines(lines: list[str]) -> tuple[list[str], int, int | None]:
    """``lines`` with each line cut to :data:`MAX_LINE_CHARS` characters; the number of lines cut and the index of
    the first."""
    if not lines or max(map(len, lines)) <= MAX_LINE_CHARS:
        return lines, 0, None
    first = next(i for i, ln in enumerate(lines) if len(ln) > MAX_LINE_CHARS)
    clipped = sum(1 for ln in lines if len(ln) > MAX_LINE_CHARS)
    return [ln[:MAX_LINE_CHARS] if len(ln) > MAX_LINE_CHARS else ln for ln in lines], clipped, first


def split_lines(text: str) -> tuple[list[str], bool]:
    """Split decoded text into lines. Returns the lines and whether the last one had a line terminator."""
    if not text:
        return [], True
    parts = text.split("\n")
    complete = parts[-1] == ""
    if complete:
        parts.pop()
    return parts, complete


def classify(lines: list[str], stream: str, run_id: str, path: str) -> pl.DataFrame:
    """Classify ``lines`` (already decoded, terminators removed). Keeps the ``_`` helper columns."""
    df = pl.DataFrame({"_raw": pl.Series(lines, dtype=pl.String)})
    if df.height == 0:
        df = df.with_columns(pl.lit(None, dtype=pl.String).alias("_raw")).clear()
    # 1. clean: CR at line end (CRLF), colour codes, decorations (timestamps, CI, rank, logging prefixes),
    # carriage-return overwrites
    df = df.with_row_index("_i").with_columns(
        pl.col("_raw").str.replace(r"\r$", "").str.replace_all(ANSI, "").alias("_t"),
    )
    df = df.with_columns(pl.col("_t").str.extract(DECORATION, 0).alias("_deco"))
    df = df.with_columns(
        pl.col("_deco").str.extract(RANK_IN_PREFIX, 1).cast(pl.Int32, strict=False).alias("rank"),
        pl.col("_t").str.slice(pl.col("_deco").str.len_chars().fill_null(0)).alias("_rest"),
    )
    # A decoration's own separator is part of its token where it has one; torchrun's rank prefix has none
    # ('[default0]:  File') or one space ('[rank0]: Traceback'). Python indents in steps of 2, so an odd number of
    # leading spaces after a rank prefix means a separator was added.
    rest = pl.col("_rest")
    odd = (rest.str.len_chars() - rest.str.strip_chars_start(" ").str.len_chars()) % 2 == 1
    df = df.with_columns(
        pl.when(pl.col("_deco").str.ends_with("]:") & odd).then(rest.str.slice(1)).otherwise(rest)
        .str.replace(r"^.*\r", "")
        .alias("text")
    )
    # Logs copied from CI pages or issue threads are often indented as a whole: remove an indent shared by every
    # non-blank line (a real stderr always has column-0 lines, e.g. 'Traceback' or a glog header).
    lead = pl.col("text").str.len_chars() - pl.col("text").str.strip_chars_start(" ").str.len_chars()
    common = df.select(lead.filter(pl.col("text").str.strip_chars() != "").min()).item()
    if common:
        df = df.with_columns(pl.col("text").str.slice(common))
    # 2. glog header -> level, src; the rest is the message. IPython tracebacks are rewritten to the standard form.
    parsed = [pl.col("text").str.extract_groups(h) for h in LOG_HEADERS]
    header = pl.coalesce([pl.col("text").str.extract(h, 0) for h in LOG_HEADERS])
    msg = pl.col("text").str.slice(header.str.len_chars().fill_null(0))
    # the type IPython's traceback header names is kept: a pasted notebook traceback is often cut before its last line
    df = df.with_columns(msg.str.extract(IPYTHON_TB_HEAD, 1).alias("_tb_type"))
    for pattern, repl in IPYTHON:
        msg = msg.str.replace(pattern, repl)
    df = df.with_columns(
        pl.coalesce([g.struct.field("level") for g in parsed]).alias("level"),
        pl.coalesce([g.struct.field("src") for g in parsed]).alias("src"),
        pl.concat_str([pl.col("_deco").fill_null(""), header.fill_null("")]).alias("prefix"),
        msg.alias("_msg"),
        pl.col("rank").fill_null(-1).alias("_rk"),
    )
    df = df.with_columns(
        pl.when(pl.col("prefix") == "").then(None).otherwise(pl.col("prefix")).alias("prefix"),
        pl.col("_msg").alias("text"),
    )
    df = df.with_columns(
        pl.col("level").is_not_null().alias("_glog"),
        *[_has(n).alias("_" + n) for n in (
            "tb_head", "tb_cause", "tb_context", "tb_file", "fh_fatal", "faulthandler", "device_assert",
            "xpu_assert", "terminate", "what", "cpp_error", "aoti_torch_exception", "cpp_frame",
            "compiler_diagnostic", "warning", "noise", "code_tag", "printer_header", "printer_launch",
            "printer_content", "exc_line", "bare_exc")],
        (pl.col("_msg").str.contains(r"^\s") | (pl.col("_msg").str.len_bytes() == 0)).alias("_ws"),
        (pl.col("_msg").str.len_bytes() == 0).alias("_blank"),
    )
    rk = "_rk"
    # 3. generated code echoed by TORCH_LOGS: in 2.13 every line of the record carries the glog header and the
    # artifact tag. Releases that prefixed only a record's first line print a tagged header ('Output code: ')
    # followed by bare code lines, which continue the block up to the next glog or structural line.
    hard = (pl.col("_tb_head") | pl.col("_fh_fatal") | pl.col("_terminate") | pl.col("_device_assert")
            | pl.col("_cpp_error") | pl.col("_warning") | pl.col("_noise"))
    header = pl.col("_code_tag") & pl.col("_msg").str.contains(r"code:\s*$")
    bare_code = (
        pl.when(pl.col("_glog")).then(header).when(hard).then(False).otherwise(None)
        .forward_fill().over(rk).fill_null(False)
    )
    code_state = (pl.col("_glog") & pl.col("_code_tag")) | (~pl.col("_glog") & bare_code)
    # 4. intermediate value printer blocks: a header opens a block, 'Requires grad' or a foreign line ends it
    prev_end = pl.col("_msg").shift(1).str.starts_with("Requires grad: ").over(rk).fill_null(False)
    printer_state = (
        pl.when(pl.col("_printer_header")).then(True)
        .when(prev_end | ~pl.col("_printer_content") | pl.col("_glog")).then(False).otherwise(None)
        .forward_fill().over(rk).fill_null(False)
    )
    # 5. tracebacks: a segment is a non-indented line plus the indented lines after it
    seg_tb = (
        pl.when(~pl.col("_ws")).then(pl.col("_tb_head")).otherwise(None).forward_fill().over(rk).fill_null(False)
    )
    # a stack printed for information ('skipping cudagraphs ... Found from :', logging's 'Stack (most recent call
    # last):', Dynamo's 'from user code:') lists frames without a traceback: it lasts up to the next line that is
    # not indented
    stack_print = (
        pl.when(pl.col("_msg").str.contains(PATTERNS["stack_print"])).then(True)
        .when(~pl.col("_ws")).then(False).otherwise(None).forward_fill().over(rk).fill_null(False)
    )
    df = df.with_columns(
        code_state.alias("_code"), printer_state.alias("_pblock"),
        # a pasted fragment may start inside a traceback: its frame lines and the source line under each still count
        (seg_tb | (pl.col("_tb_file") & ~pl.col("_glog") & ~stack_print)
         | (pl.col("_msg").str.starts_with("    ") & pl.col("_tb_file").shift(1).over(rk).fill_null(False)
            & ~code_state & ~pl.col("_glog") & ~stack_print))
        .alias("_in_tb"),
    )
    prev_in_tb = pl.col("_in_tb").shift(1).over(rk).fill_null(False)
    exc_line = (
        ((pl.col("_exc_line") & prev_in_tb) | (pl.col("_bare_exc") & ~pl.col("_ws")))
        & ~pl.col("_in_tb") & ~pl.col("_code") & ~pl.col("_tb_cause") & ~pl.col("_tb_context")
    )
    df = df.with_columns(exc_line.alias("_exc"))
    # 6. exception message continuation: every line after the exception line up to the next structural line
    breaker = (
        pl.col("prefix").str.starts_with("##[").fill_null(False) | pl.col("_tb_head") | pl.col("_tb_cause") | pl.col("_tb_context") | pl.col("_glog") | pl.col("_faulthandler")
        | pl.col("_device_assert") | pl.col("_terminate") | pl.col("_cpp_error") | pl.col("_warning")
        | pl.col("_code") | pl.col("_printer_header") | pl.col("_printer_launch")
    )
    owner = (
        pl.when(pl.col("_exc")).then(pl.col("_i").cast(pl.Int64)).when(breaker).then(-1).otherwise(None)
        .forward_fill().over(rk).fill_null(-1)
    )
    df = df.with_columns(owner.alias("_exc_owner"))
    # 7. Python warnings: the source line printed under a warning belongs to it
    prev_warn = pl.col("_warning").shift(1).over(rk).fill_null(False)
    prev_noise = pl.col("_noise").shift(1).over(rk).fill_null(False)
    warn_src = prev_warn & pl.col("_ws") & ~pl.col("_in_tb")
    # 8. kind, most specific first
    c = pl.col
    kind = (
        pl.when(c("_code")).then(pl.lit("output_code"))
        .when(c("_pblock") | c("_printer_launch")).then(pl.lit("printer"))
        .when(c("_faulthandler")).then(pl.lit("faulthandler"))
        .when(c("_device_assert") | c("_xpu_assert")).then(pl.lit("device_assert"))
        .when(c("_terminate") | c("_what")).then(pl.lit("terminate"))
        .when(c("_cpp_error")).then(pl.lit("cpp_error"))
        .when(c("_aoti_torch_exception")).then(pl.lit("aoti_torch_exception"))
        .when(c("_cpp_frame")).then(pl.lit("cpp_frame"))
        .when(c("_noise") | (warn_src & prev_noise)).then(pl.lit("noise"))
        .when(c("_in_tb") & ~c("_tb_head") & ~c("_tb_cause") & ~c("_tb_context") & ~c("_tb_file") & ~c("_blank"))
        .then(pl.lit("traceback_code"))
        .when(c("_tb_head") | c("_tb_cause") | c("_tb_context") | c("_in_tb")).then(pl.lit("traceback"))
        .when(c("_compiler_diagnostic")).then(pl.lit("compiler_diagnostic"))
        .when(c("_exc") | ((c("_exc_owner") >= 0) & ~c("_blank"))).then(pl.lit("exception"))
        .when(c("_warning") | warn_src).then(pl.lit("warning"))
        .when(c("_glog")).then(pl.lit("torch_log"))
        .otherwise(pl.lit("plain"))
    )
    frame = pl.when(pl.col("_tb_file")).then(pl.col("_msg")).str.extract_groups(PATTERNS["tb_frame"])
    return df.with_columns(
        kind.alias("kind"),
        frame.struct.field("file").alias("_fr_file"),
        frame.struct.field("line").cast(pl.Int32, strict=False).alias("_fr_line"),
        frame.struct.field("func").alias("_fr_func"),
        pl.lit(run_id, dtype=pl.String).alias("run_id"),
        pl.lit(stream, dtype=pl.String).alias("stream"),
        pl.lit(path, dtype=pl.String).alias("path"),
        (pl.col("_i").cast(pl.Int64) + 1).alias("lineno"),
    )


def public(df: pl.DataFrame) -> pl.DataFrame:
    """The ``lines`` frame: ``classify()`` output without helper columns."""
    return df.select("run_id", "stream", "path", "lineno", "rank", "kind", "level", "src", "prefix", "text",
                     pl.col("_t").alias("raw"))
