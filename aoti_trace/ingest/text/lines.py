"""Decode captured stderr/stdout and classify every line (the ``lines`` frame).

Classification is done with Polars expressions over the whole column. Context (is this indented line part of a
traceback? is this plain line the continuation of an exception message, or of generated code echoed by
``TORCH_LOGS=output_code``?) is computed with forward-filled block states, partitioned by rank so that the
interleaved output of several ``[rankN]:`` processes classifies as if each had been captured alone.

:func:`classify` returns the frame with helper columns (prefixed ``_``) that the assemblers in
``tracebacks.py``, ``faults.py``, ``printer.py`` and ``asserts.py`` use; :func:`public` drops them.

All patterns use the Rust regex dialect and compile in Python ``re`` too (a test checks both). No pattern uses a
word boundary (``\\b``): with Unicode word boundaries Rust's regex cannot use its fast engine (an exact rewrite,
``(?:^|\\W)word``, is used instead).

Speed (issue 12): on inputs of :data:`SPARSE_MIN_ROWS` lines or more, one widened pattern per line
(:func:`_loud_pattern`) finds the *quiet* lines, whose per-line columns are known without matching anything, and
each per-line step then runs only on the rows its own widened guard can change (:func:`_sparse`). On smaller inputs
the cost is compiling the patterns, not running them: a step whose guard matches no line is skipped, and a flag
whose pattern's required literals occur in no line is known false without its pattern (:mod:`.prematch`). Every
shortcut gives exactly the result of running every step on every line (tests/ingest/text/test_text_fast.py).
"""

from __future__ import annotations

import functools
import re
from typing import Callable, Iterable

import polars as pl

from aoti_trace.ingest.text import prematch
from aoti_trace.ingest.text.faults import ANDROID_SIGNAL, LIBCXX_TERMINATE, SHELL_SIGNAL, UCX_BACKTRACE, UCX_SIGNAL

# ---------------------------------------------------------------------------------------------- line cleanup
ANSI = r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"
# the rank a decoration names: torchrun's '[rank3]:' / '[default3]:', vLLM's worker tag '(VllmWorker rank=3 pid=N) '
RANK_IN_PREFIX = r"(?:\[(?:rank|default)|\((?:[\w.]+ )?rank=)(\d+)(?:\]:| )"
# Decorations that CI systems, launchers and logging frameworks put before a line; any chain of them is removed
# (``lines.prefix`` keeps it). One token each, with its own separator where it has one:
DECORATIONS: dict[str, str] = {
    # ISO timestamps (GitHub Actions, containerd 'stderr F', Python logging asctime), bracketed or not
    "timestamp": (r"\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?"
                  r"(?: (?:stdout|stderr) [FP])?(?: [-|])? ?"),
    "clock": r"\[\d\d:\d\d:\d\d(?:[.,]\d+)?\]:? ?",
    "ci": r"##\[(?:error|warning|notice|debug|info|group|endgroup|section|command)\]",
    "rank": r"\[(?:rank|default)\d+\]:",
    # Ray's and vLLM's process tag ('(EngineCore pid=2328) ', '(RayWorkerWrapper pid=7, ip=10.0.0.2) ', vLLM's
    # '(VllmWorker rank=1 pid=6482) ' with the worker's rank), also behind a test harness label ('[test 1] ')
    "ray": r"(?:\[[A-Za-z][\w -]{0,20}\] )?\((?:[\w.]+ )?(?:rank=\d+ )?pid=\d+(?:, ip=[\d.]+)?\) ",
    "mpirun": r"\[\d+,\d+\]<(?:stdout|stderr)>: ?",
    # Python logging: 'ERROR:root:', '[ERROR] ', 'root - ERROR - ', loguru 'ERROR    | mod:fn:12 - '
    "logging": (r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL):[\w.<>-]*:"
                r"|\[(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\] ?"
                r"|[\w.]+ - (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - "
                r"|(?:TRACE|DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL) +\| [\w.<>]+:[\w<>]+:\d+ - "
                # vLLM / SGLang: 'ERROR 07-23 07:21:49 [core.py:586] ', vLLM before 0.8 'ERROR 04-23 00:04:19
                # multiproc_worker_utils.py:240] ' (a line that is blank after it keeps no trailing space)
                r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?"
                r" (?:\[[^\]\s]+\] ?|[\w.-]+\.py:\d+\] ?)"
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
    # (also a frame line whose start a paste cut off: 'torch/_inductor/select_algorithm.py", line 2022, in f')
    # (and pytest's long traceback format: '/usr/lib/python3/torch/_dynamo/eval_frame.py:375: in __call__')
    "tb_file": r'^ {0,4}File "[^"]*", line \d+, in |^[^\s"]+\.py", line \d+, in |^[^\s"]+\.py:\d+: in \S+\s*$',
    "tb_frame": r'^ {0,4}(?:File ")?(?P<file>[^"]*?)(?:", line |:)(?P<line>\d+)(?:,? in |: in )(?P<func>\S+)',
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
        # torch 2.0's form of the same footer
        r"|^Set torch\._dynamo\.config\.verbose=True for more information"
        r"|^You can suppress this exception and fall back to eager by setting:"
        r"|^The error above occurred when calling torch\.export\.export"
        # the user frames Dynamo appends to the message of an error raised while it traced ('from user code:')
        r"|^from user code:\s*$"
        # the end of the shape engine's data-dependent guard error (GuardOnDataDependentSymNode), printed only with it
        r"|^For extended logs when we create symbols, also add TORCHDYNAMO_EXTENDED_DEBUG_CREATE_SYMBOL="
    ),
    # the line that introduces a stack printed for information, not a traceback (Dynamo's graph-break report,
    # 'Graph break in user code at f:l' / 'Reason: ...' / 'User code traceback:', lists frames and no exception)
    "stack_print": (r"(?:(?:^|\W)Found from :|^Stack \(most recent call last\):|^from user code:"
                    r"|^User code traceback:)\s*$"),
    # a debugger's backtrace (gdb 'bt') through the C library's abort: the process aborted (SIGABRT)
    "gdb_abort": r"^#\d+\s+(?:0x[0-9a-fA-F]+ in )?(?:__GI_)?(?:abort|raise|__pthread_kill\w*) \(",
    # a debugger's backtrace frame
    "gdb_frame": r"^#\d+\s+(?:0x[0-9a-fA-F]+ in )?\S",
    # a build tool's own error line (CMake, LLVM): the build or the JIT stopped
    "tool_error": r"^(?:CMake Error(?: at \S+)?:|LLVM ERROR: )",
    # a line its program logged at error level (the decoration '[ERROR] ', 'ERROR:root:' went to the prefix) that
    # says a step failed ('[ERROR] [Qnn ExecuTorch]: Failed to add node to Qnn Graph with error: 1000')
    "error_level_failed": r"\b(?:Failed to [a-z]+|failed with (?:error|code|status)\b)",
    # an application's error report that carries the exception ('Error during model prediction: CompilationError: ..')
    "error_report": (r"^Error(?: [a-z][\w ]{0,40})?: (?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b"
                     # ComfyUI's report of a node that raised ('!!! Exception during processing !!! <message>')
                     r"|^!!! Exception during processing !!! \S"
                     # an application's error-level report of a failed step ('❌ [ERROR] Error in Phase 1 (Encoding):
                     # Data-dependent branching'): the level tag and the word say it failed
                     r"|(?:^|\s)\[(?:ERROR|CRITICAL|FATAL)\] (?:Error|Failed|Exception)\b[^:]{0,80}: \S"
                     # a report's header for the exception it shows next ('Original exception:', then its message)
                     r"|^Original exception:\s*$"
                     # Dynamo's wrapper message flattened onto one line by a UI or a paste ('<node> backend='inductor'
                     # raised: FileNotFoundError: ...'): the exception it announces follows on the same line
                     r"|\bbackend='\w+' raised: (?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)\b"
                     # a test report table's row whose cell is the exception ('test_x.py | TestX | test_y |
                     # torch._inductor.exc.InductorError: RuntimeError: ...')
                     r"|\S \| (?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception): \S"),
    # a program's own report, on a line of its own, that it cannot read a file it was given (llama2.c-style runners:
    # 'couldn't load /x/tokenizer.model', then exit(1)); a path with a folder, optionally followed by the reason
    "file_unreadable": (
        r"(?i)^(?:couldn't|could not|cannot|can't|unable to|failed to) (?:load|open|read) ['\"]?"
        r"(?:[a-z]:)?[^\s'\"]*[\\/][^\s'\"]+['\"]?(?:[:,] .*)?$"
    ),
    # a line torch prints only on the way to raising, when the exception itself may be missing from a short paste:
    # the ShapeEnv recorder's error log of an event that raised ('failed while running evaluate_expr(*(s0 >= 0,
    # True), ...)', torch/fx/experimental/recording.py, logged and re-raised); nn.Module's NotImplementedError for an
    # object without forward ('Module [YOLO] is missing the required "forward" function'), pasted without its type;
    # Inductor's assert_size_stride check (torch/csrc/dynamo/guards.cpp: 'AssertionError: expected size 2==2, stride
    # 3684352==3236401 at dim=0'), a message no other code prints, wherever a paste put it on the line
    "raised_report": (r"^failed while running \w+\(\*"
                      r'|^Module \[[\w.]+\] is missing the required "forward" function'
                      r"|AssertionError: expected size \d+==\d+, stride \d+==\d+ at dim=\d+"
                      # subprocess.CalledProcessError's message pasted without its type (a build that Triton or
                      # Inductor ran: "Command '['...tcc.exe', ...]' returned non-zero exit status 1.")
                      r"|^Command '.*' (?:returned non-zero exit status -?\d+|died with <Signals\.\w+: \d+>)"),
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
        # the compiler drivers by name, with a folder or a version ('clang: error: linker command failed ...',
        # '/usr/bin/clang-15: error: ...', 'gcc: fatal error: ...', 'xcrun: error: ...'), and GCC's
        # crash on a file ('k.cpp:3:18: internal compiler error: in vect_get_vector_types_for_stmt, ...')
        r"^(?:(?:[\w.:/\\-]*[/\\])?(?:cc1plus|cc1|g\+\+|c\+\+|clang\+\+|clang|gcc|cc|icx|icpx|hipcc|collect2|metal"
        r"|xcrun|lld|ld\.lld)(?:-[\d.]+)?(?:\.exe)?"
        r"|/?\S+?\.(?:cpp|cc|cxx|c|h|hpp|cu|cuh)(?::\d+(?::\d+)?)?"
        r"|(?:\S*[^\w\s])?ld(?:\.\w+)?): (?:fatal |internal compiler )?error: "
        # nvcc / ptxas / nvlink ('ptxas fatal   : ...', 'nvcc fatal   : ...', 'ptxas error   : ...')
        r"|^(?:ptxas|nvcc|nvlink|fatbinary|cicc|nvrtc)[\w-]*(?: (?:fatal|error))? *: "
        # ptxas on a line of the PTX file ('ptxas /tmp/x.ptx, line 818; error   : Feature ... not supported on ...')
        r"|^ptxas \S+, line \d+; (?:error|fatal) *: "
        # MSVC and its linker ('x.cpp(12): error C2065: ...', 'x.obj : error LNK2019: ...', 'LINK : fatal error LNK1104')
        r"|^\S.*?\(\d+(?:,\d+)?\) ?: (?:fatal )?error C\d+: |^\S.*? : (?:fatal )?error LNK\d+: "
        r"|(?:^|\W)undefined reference to `|^(?:fatal |internal compiler )?error: "
        # Triton's MLIR diagnostics on a kernel's Python source, with a column ('/tmp/torchinductor_u/tt/c.py:56:26:
        # error: operand #0 does not dominate this use', 'loc("/x/fwd_kernel.py":262:24): error: ...')
        r'|^\S+\.py:\d+:\d+: error: |^loc\("[^"]+":\d+:\d+\): error: '
        # g++'s notes of a failed overload resolution, printed only under a 'no matching function' error: the error
        # itself may be cut from a pasted log ('x.h:396:110: note:   no known conversion for argument 2 from ...')
        r"|^\S+\.(?:cpp|cc|cxx|c|h|hpp|cu|cuh):\d+(?::\d+)?: note: +(?:no known conversion for argument \d+ from "
        r"|candidate expects \d+ arguments?, \d+ provided)"
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


# Per-line flags: one Boolean column ``_<name>`` each, computed on the message of every line that can match.
FLAGS: tuple[str, ...] = (
    "tb_head", "tb_cause", "tb_context", "tb_file", "fh_fatal", "faulthandler", "device_assert", "xpu_assert",
    "terminate", "what", "cpp_error", "aoti_torch_exception", "cpp_frame", "compiler_diagnostic", "warning", "noise",
    "code_tag", "printer_header", "printer_launch", "bare_exc", "stack_print",
)
# Patterns that faults.py matches on the message of any line: a line that can match one of them is never quiet
# (below), and the flag ``_elsewhere`` marks it, so that reader matches them only on the lines so marked.
LOUD_ELSEWHERE: tuple[str, ...] = (SHELL_SIGNAL, LIBCXX_TERMINATE, ANDROID_SIGNAL, UCX_SIGNAL, UCX_BACKTRACE)


def _uncaptured(pattern: str) -> str:
    """``pattern`` with its named groups made non-capturing (so that patterns can be joined into one)."""
    return re.sub(r"\(\?P<\w+>", "(?:", pattern)


def _widened(pattern: str) -> str:
    """A pattern that matches wherever ``pattern`` matches, and cheaper to run: word boundaries dropped, ``\\w`` and
    ``\\d`` (large Unicode classes) widened to ``\\S`` outside negated character classes."""
    out: list[str] = []
    i, negated = 0, None  # None outside a character class, else whether the class is negated
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            tok = pattern[i:i + 2]
            i += 2
            if tok == r"\b" and negated is None:
                tok = ""
            elif tok in (r"\w", r"\d") and not negated:
                tok = r"\S"
            out.append(tok)
            continue
        if negated is None and c == "[":
            negated = pattern[i + 1:i + 2] == "^"
        elif negated is not None and c == "]":
            negated = None
        out.append(c)
        i += 1
    return "".join(out)


@functools.cache
def _guard(step: str) -> str:
    """The widened pattern of the lines that ``step`` can change (built once per process)."""
    deco = "^(?:" + "|".join(f"(?:{p})" for p in DECORATIONS.values()) + ")"
    return {
        "cleanup": lambda: _union([r"\x1b", r"\r", deco]),
        "headers": lambda: _union(LOG_HEADERS),
        "ipython": lambda: _union(p for p, _ in IPYTHON),
        "flags": lambda: _union([*(PATTERNS[n] for n in FLAGS), *LOUD_ELSEWHERE]),
        "elsewhere": lambda: _union(LOUD_ELSEWHERE),
        "loud": _loud_pattern,
    }[step]()


def _loud_pattern() -> str:
    """The pattern of a *loud* line. A line that matches none of its parts is quiet: no escape code or carriage
    return, no leading white space, not blank, no decoration, no log header, nothing IPython's form rewrites and no
    flag set (:data:`FLAGS`, :data:`LOUD_ELSEWHERE`). The per-line columns of a quiet line are therefore known
    without matching anything: its text is the line, it has no prefix, level, source or rank, and every flag is
    false. The block states (code, printer, traceback, exception message) are computed over all lines alike."""
    return "|".join([r"^\s", r"^$", _guard("cleanup"), _guard("headers"), _guard("ipython"), _guard("flags")])


# Below this many rows a step runs on every row, or on none when its guard matches no row: splitting a few hundred
# lines by guard patterns costs more Polars operations than it saves (the same result: a guard only skips rows a step
# would not change).
SPARSE_MIN_ROWS = 2048


def _union(patterns: Iterable[str]) -> str:
    """One widened pattern that matches wherever any of ``patterns`` does."""
    return "|".join(f"(?:{_widened(_uncaptured(p))})" for p in patterns)


@functools.cache
def guard_of(pattern: str) -> str:
    """The widened ``pattern`` (:func:`_widened`): it matches wherever ``pattern`` does, and a bounded repeat of
    ``\\w`` in it compiles ~10x faster (``\\S``)."""
    return _union([pattern])


def _sparse(df: pl.DataFrame, guard: str, column: str, step: Callable[[pl.DataFrame], pl.DataFrame],
            defaults: dict[str, pl.Expr], small_guard: bool = True) -> pl.DataFrame:
    """``step(rows)`` applied only to the rows whose ``column`` matches ``guard`` (a pattern that matches wherever
    the step can change anything); the other rows get ``defaults``. The rows come back in any order. Below
    :data:`SPARSE_MIN_ROWS` rows the step runs on every row, or on none when no row matches the guard (with
    ``small_guard``: the guard compiles in a fraction of the time of the step's own patterns)."""
    if df.height < SPARSE_MIN_ROWS:
        if prematch.ENABLED and small_guard and not df.get_column(column).str.contains(guard).any():
            return df.with_columns(**defaults)
        return step(df)
    hit = df.get_column(column).str.contains(guard)
    if hit.all():
        return step(df)
    rest = df.filter(~hit).with_columns(**defaults)
    if not hit.any():
        return rest
    done = step(df.filter(hit))
    return pl.concat([done, rest.select(done.columns)])


# a line's log header, any of LOG_HEADERS (the first that matches, as separate matches would pick): one match
HEADER = "^(?P<header>" + "|".join(
    f"(?:{re.sub(r'[(][?]P<(level|src)>', lambda m, k=k: f'(?P<{m[1]}{k}>', h.removeprefix('^'))})"  # type: ignore[misc]  # lambda with a default
    for k, h in enumerate(LOG_HEADERS)) + ")"


_GLOG_PLAIN = _uncaptured(GLOG)


def _cleanup(df: pl.DataFrame) -> pl.DataFrame:
    """Step 1 on rows that may have a CR, a colour code or a decoration."""
    df = df.with_columns(
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
    return df.with_columns(
        pl.when(pl.col("_deco").str.ends_with("]:") & odd).then(rest.str.slice(1)).otherwise(rest)
        .str.replace(r"^.*\r", "")
        .alias("text")
    )


def _headers(df: pl.DataFrame) -> pl.DataFrame:
    """Step 2a on rows that may start with a log header: its text, level and source. Rows in any order."""
    glog = df.get_column("text").str.contains(_GLOG_PLAIN)
    if glog.all():
        return _glog_headers(df)
    if not glog.any():
        return _any_headers(df)
    return pl.concat([_glog_headers(df.filter(glog)), _any_headers(df.filter(~glog))])


def _glog_headers(df: pl.DataFrame) -> pl.DataFrame:
    """:func:`_any_headers` for rows that start with a :data:`GLOG` header, without a capturing match (~5x
    cheaper): the header is what removing the match takes away; its level is its first letter (after an optional
    ``[``), its source the token between the last space and the first ``]`` (the time holds neither, the source
    no white space and no ``]``)."""
    text = pl.col("text")
    header = text.str.slice(0, text.str.len_chars() - text.str.replace(_GLOG_PLAIN, "").str.len_chars())
    return df.with_columns(header.alias("_header")).with_columns(
        pl.when(text.str.starts_with("[")).then(text.str.slice(1, 1)).otherwise(text.str.slice(0, 1)).alias("level"),
        pl.col("_header").str.replace(r"\].*$", "").str.replace(r"^.* ", "").alias("src"),
    )


def _any_headers(df: pl.DataFrame) -> pl.DataFrame:
    """The log header of each row (:data:`LOG_HEADERS`, the first that matches), its level and source."""
    parsed = pl.col("text").str.extract_groups(HEADER)
    return df.with_columns(
        parsed.struct.field("header").alias("_header"),
        pl.coalesce([parsed.struct.field(f"level{k}") for k in range(len(LOG_HEADERS))]).alias("level"),
        pl.coalesce([parsed.struct.field(f"src{k}") for k in range(len(LOG_HEADERS))]).alias("src"),
    )


def _ipython(df: pl.DataFrame) -> pl.DataFrame:
    """Step 2b on rows that IPython's form may rewrite."""
    msg = pl.col("_msg")
    # the type IPython's traceback header names is kept: a pasted notebook traceback is often cut before its last line
    df = df.with_columns(msg.str.extract(IPYTHON_TB_HEAD, 1).alias("_tb_type"))
    for pattern, repl in IPYTHON:
        msg = msg.str.replace(pattern, repl)
    return df.with_columns(msg.alias("_msg"))


def _flags(df: pl.DataFrame) -> pl.DataFrame:
    """The per-line flags, on rows whose message may set one. On a small input a pattern whose required literals
    occur in no message is not compiled (:mod:`.prematch`)."""
    hay = prematch.Haystack(df.get_column("_msg"))
    return df.with_columns(*[hay.contains("_msg", PATTERNS[n]).alias("_" + n) for n in FLAGS],
                           hay.contains("_msg", _guard("elsewhere")).alias("_elsewhere")).with_columns(
        (pl.col("_code_tag") & hay.contains("_msg", r"code:\s*$")).alias("_code_header"))


def _per_line(df: pl.DataFrame, dedent: bool) -> pl.DataFrame:
    """Steps 1-2 and the per-line flags for the rows of ``df`` (``_i``, ``_raw``); each row on its own, except the
    indent shared by every non-blank line, which is removed only when ``dedent`` (``df`` holds every line). Each
    step runs only on the rows it can change (:func:`_sparse`); the rows come back in any order."""
    # 1. clean: CR at line end (CRLF), colour codes, decorations (timestamps, CI, rank, logging prefixes),
    # carriage-return overwrites
    df = _sparse(df, _guard("cleanup"), "_raw", _cleanup, {"_t": pl.col("_raw"), "_deco": pl.lit(None, dtype=pl.String),
                                    "rank": pl.lit(None, dtype=pl.Int32), "_rest": pl.col("_raw"),
                                    "text": pl.col("_raw")})
    # Logs copied from CI pages or issue threads are often indented as a whole: remove an indent shared by every
    # non-blank line (a real stderr always has column-0 lines, e.g. 'Traceback' or a glog header).
    # (a tab-indented block too: the shared lead counts spaces and tabs alike, and only whitespace is removed)
    if dedent and "_dd" in df.columns:  # several files (classify_many): per file, in the files held whole here
        lead = pl.col("text").str.len_chars() - pl.col("text").str.strip_chars_start(" \t").str.len_chars()
        common = pl.when(pl.col("_dd") & (pl.col("text").str.strip_chars() != "")).then(lead).min().over("_f")
        if df.select(common.max()).item():
            df = df.with_columns(pl.col("text").str.slice(common.fill_null(0)))
    elif dedent:
        lead = pl.col("text").str.len_chars() - pl.col("text").str.strip_chars_start(" \t").str.len_chars()
        common = df.select(lead.filter(pl.col("text").str.strip_chars() != "").min()).item()
        if common:
            df = df.with_columns(pl.col("text").str.slice(common))
    # 2. glog header -> level, src; the rest is the message. IPython tracebacks are rewritten to the standard form.
    df = _sparse(df, _guard("headers"), "text", _headers,
                 {"_header": pl.lit(None, dtype=pl.String), "level": pl.lit(None, dtype=pl.String),
                  "src": pl.lit(None, dtype=pl.String)})
    df = df.with_columns(pl.col("text").str.slice(pl.col("_header").str.len_chars().fill_null(0)).alias("_msg"))
    df = _sparse(df, _guard("ipython"), "_msg", _ipython, {"_tb_type": pl.lit(None, dtype=pl.String)})
    df = df.with_columns(
        pl.concat_str([pl.col("_deco").fill_null(""), pl.col("_header").fill_null("")]).alias("prefix"),
        pl.col("rank").fill_null(-1).alias("_rk"),
    )
    df = df.with_columns(
        pl.when(pl.col("prefix") == "").then(None).otherwise(pl.col("prefix")).alias("prefix"),
        pl.col("_msg").alias("text"),
        pl.col("level").is_not_null().alias("_glog"),
        (pl.col("_msg").str.contains(r"^\s") | (pl.col("_msg").str.len_bytes() == 0)).alias("_ws"),
        (pl.col("_msg").str.len_bytes() == 0).alias("_blank"),
    )
    return _sparse(df, _guard("flags"), "_msg", _flags,
                   {**{"_" + n: pl.lit(False) for n in FLAGS}, "_elsewhere": pl.lit(False),
                    "_code_header": pl.lit(False)}, small_guard=False)  # its patterns are pre-checked one by one


def _quiet(df: pl.DataFrame, schema: pl.Schema) -> pl.DataFrame:
    """The per-line columns of quiet rows (``_i``, ``_raw``), in ``schema`` (see :func:`_loud_pattern`)."""
    line = {"_raw", "_t", "_rest", "text", "_msg"}
    return df.select([
        pl.col(name) if name in ("_i", "_f", "_g", "_dd") else pl.col("_raw").alias(name) if name in line
        else pl.lit(-1, dtype=dtype).alias(name) if name == "_rk"
        else pl.lit(False).alias(name) if dtype == pl.Boolean
        else pl.lit(None, dtype=dtype).alias(name)
        for name, dtype in schema.items()
    ])


def _contains_where(df: pl.DataFrame, where: pl.Expr, pattern: str) -> pl.Series:
    """``_msg`` matches ``pattern``, evaluated only on the rows where ``where`` holds (false elsewhere)."""
    idx = df.select(where.fill_null(False).arg_true()).to_series()
    out = pl.Series("", [False], dtype=pl.Boolean).extend_constant(False, df.height - 1) if df.height \
        else pl.Series("", [], dtype=pl.Boolean)
    if idx.len():
        out = out.scatter(idx, df.get_column("_msg").gather(idx).str.contains(pattern))
    return out


# A device-side assertion line wrapped by a terminal or a paste after 'block:' ('/x/cbz.py:37: unknown: block:' then
# ' [7163,0,0], thread: [39,0,0] Assertion `index out of bounds: ...` failed.'): the second half
WRAPPED_ASSERT_TAIL = r"^\s*\[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion `"


def _unwrap_device_asserts(df: pl.DataFrame, by_file: bool) -> pl.DataFrame:
    """The second half of a wrapped device-side assertion becomes the whole assertion line (the first half stays as
    it is), so that it is read as the kernel printed it; ``_unwrapped`` keeps the line as it was (``raw``)."""
    raw = pl.col("_raw")
    if df.height < 2 or not df.select(raw.str.contains("], thread: [", literal=True).any()).item():
        return df
    prev = raw.shift(1)
    joined = (raw.str.contains(WRAPPED_ASSERT_TAIL) & prev.str.contains(r": block:\s*$")).fill_null(False)
    if by_file:
        joined = joined & (pl.col("_f") == pl.col("_f").shift(1)).fill_null(False)
    if not df.select(joined.any()).item():
        return df
    return df.with_columns(
        pl.when(joined).then(pl.concat_str([prev.str.strip_chars_end(), pl.lit(" "), raw.str.strip_chars_start()]))
        .otherwise(raw).alias("_raw"),
        pl.when(joined).then(raw).alias("_unwrapped"))


def classify(lines: list[str], stream: str, run_id: str, path: str) -> pl.DataFrame:
    """Classify ``lines`` (already decoded, terminators removed). Keeps the ``_`` helper columns.

    Only loud lines (:func:`_loud_pattern`, one match per line) go through the per-line cleanup and matching; the
    quiet ones, the bulk of an ordinary log, get their known columns directly."""
    return classify_many([(lines, stream, run_id, path)])


def classify_many(files: list[tuple[list[str], str, str, str]]) -> pl.DataFrame:
    """Classify the lines of several files, each ``(lines, stream, run_id, path)``, in one pass.

    With one file this is :func:`classify`. With several, the rows of every file in order, with ``_f`` (the file's
    index in ``files``) and ``_i`` (the line's index in its file); each line is classified exactly as
    :func:`classify` of its own file classifies it: every context (the blocks, the shared indent) is computed per
    file, and per rank within it. The ~40 regex columns have a fixed cost per call that small files do not amortise:
    ``aoti-trace triage`` classifies all captured streams of a batch of runs at once (:func:`aoti_trace.ingest.text.
    read_streams`)."""
    by_file = len(files) > 1
    if not by_file:
        df = pl.DataFrame({"_raw": pl.Series(files[0][0] if files else [], dtype=pl.String)})
        if df.height == 0:
            df = df.with_columns(pl.lit(None, dtype=pl.String).alias("_raw")).clear()
        df = df.with_row_index("_i")
    else:
        sizes = pl.DataFrame({"_f": pl.Series(range(len(files)), dtype=pl.UInt32),
                              "_n": pl.Series([len(f[0]) for f in files], dtype=pl.UInt32)})
        sizes = sizes.with_columns((pl.col("_n").cum_sum() - pl.col("_n")).alias("_start"))
        rows = sizes.filter(pl.col("_n") > 0).select(pl.col("_f", "_start").repeat_by("_n").explode())
        df = pl.DataFrame({"_raw": pl.Series([ln for f in files for ln in f[0]], dtype=pl.String)}).with_row_index("_g")
        df = df.with_columns(rows.get_column("_f"), (df.get_column("_g") - rows.get_column("_start")).alias("_i"),
                             pl.lit(True).alias("_dd"))
    order = "_g" if by_file else "_i"
    df = _unwrap_device_asserts(df, by_file)
    loud = df.get_column("_raw").str.contains(_guard("loud")) if df.height >= SPARSE_MIN_ROWS else None
    if loud is None or loud.all():
        df = _per_line(df, dedent=True).sort(order)
    else:
        if by_file:  # the indent shared by every line of a file: only in files whose lines are all loud
            df = df.with_columns(loud.alias("_dd")).with_columns(pl.col("_dd").all().over("_f"))
        # a quiet line is not indented, so no indent is shared by every line
        part = _per_line(df.filter(loud), dedent=by_file)
        df = pl.concat([part, _quiet(df.filter(~loud), part.schema)]).sort(order)
        del part
    # states are partitioned by rank only where the lines carry more than one (the same result, without a group-by);
    # with several files, per file too
    multi = df.get_column("_rk").n_unique() > 1
    keys = (["_f", "_rk"] if multi else ["_f"]) if by_file else ["_rk"] if multi else []

    def per_rank(e: pl.Expr) -> pl.Expr:
        return e.over(keys) if keys else e

    # 3. generated code echoed by TORCH_LOGS: in 2.13 every line of the record carries the glog header and the
    # artifact tag. Releases that prefixed only a record's first line print a tagged header ('Output code: ')
    # followed by bare code lines, which continue the block up to the next glog or structural line.
    hard = (pl.col("_tb_head") | pl.col("_fh_fatal") | pl.col("_terminate") | pl.col("_device_assert")
            | pl.col("_cpp_error") | pl.col("_warning") | pl.col("_noise"))
    bare_code = per_rank(
        pl.when(pl.col("_glog")).then(pl.col("_code_header")).when(hard).then(False).otherwise(None).forward_fill()
    ).fill_null(False)
    code_state = (pl.col("_glog") & pl.col("_code_tag")) | (~pl.col("_glog") & bare_code)
    # 4. intermediate value printer blocks: a header opens a block, 'Requires grad' or a foreign line ends it
    # (a line's content matters only once a block was opened: matched from the first header on)
    first_header = df.select(pl.col("_printer_header").arg_true().first()).item()
    if first_header is None:
        printer_state = pl.lit(False)
    else:
        df = df.with_columns(
            _contains_where(df, pl.col(order) >= first_header, PATTERNS["printer_content"]).alias("_content"))
        prev_end = per_rank(pl.col("_msg").shift(1).str.starts_with("Requires grad: ")).fill_null(False)
        printer_state = per_rank(
            pl.when(pl.col("_printer_header")).then(True)
            .when(prev_end | ~pl.col("_content") | pl.col("_glog")).then(False).otherwise(None).forward_fill()
        ).fill_null(False)
    # 5. tracebacks: a segment is a non-indented line plus the indented lines after it
    seg_tb = per_rank(
        pl.when(~pl.col("_ws")).then(pl.col("_tb_head")).otherwise(None).forward_fill()
    ).fill_null(False)
    # a stack printed for information ('skipping cudagraphs ... Found from :', logging's 'Stack (most recent call
    # last):', Dynamo's 'from user code:') lists frames without a traceback: it lasts up to the next line that is
    # not indented
    stack_print = per_rank(
        pl.when(pl.col("_stack_print")).then(True).when(~pl.col("_ws")).then(False).otherwise(None).forward_fill()
    ).fill_null(False)
    df = df.with_columns(
        code_state.alias("_code"), printer_state.alias("_pblock"),
        # a pasted fragment may start inside a traceback: its frame lines and the source line under each still count
        (seg_tb | (pl.col("_tb_file") & ~pl.col("_glog") & ~stack_print)
         | (pl.col("_msg").str.starts_with("    ") & per_rank(pl.col("_tb_file").shift(1)).fill_null(False)
            & ~code_state & ~pl.col("_glog") & ~stack_print))
        .alias("_in_tb"),
    )
    prev_in_tb = per_rank(pl.col("_in_tb").shift(1)).fill_null(False)
    # an exception line ends a traceback: matched only on the lines right after one
    df = df.with_columns(_contains_where(df, prev_in_tb, PATTERNS["exc_line"]).alias("_exc_after_tb"))
    exc_line = (
        (pl.col("_exc_after_tb") | (pl.col("_bare_exc") & ~pl.col("_ws")))
        & ~pl.col("_in_tb") & ~pl.col("_code") & ~pl.col("_tb_cause") & ~pl.col("_tb_context")
    )
    df = df.with_columns(exc_line.alias("_exc"))
    # 6. exception message continuation: every line after the exception line up to the next structural line; a
    # logging header starts a new record, unless it is the previous line's own header (torch's log formatter and
    # glog write a multi-line record with its header on every line: 'E0607 06:26:14.084000 1400 torch/_guards.py:261]
    # [0/0]   - Not all values of dx ...' continues the ConstraintViolationError logged on the line above); such a
    # record ends at the first line without its header (the program's own output printed after it)
    header = pl.col("prefix").str.strip_chars_end()
    same_record = pl.col("_glog") & per_rank(pl.col("_glog").shift(1) & (header.shift(1) == header)).fill_null(False)
    record_ended = ~pl.col("_glog") & per_rank(same_record.shift(1)).fill_null(False)
    breaker = (
        pl.col("prefix").str.starts_with("##[").fill_null(False) | pl.col("_tb_head") | pl.col("_tb_cause") | pl.col("_tb_context") | (pl.col("_glog") & ~same_record) | record_ended | pl.col("_faulthandler")
        | pl.col("_device_assert") | pl.col("_terminate") | pl.col("_cpp_error") | pl.col("_warning")
        | pl.col("_code") | pl.col("_printer_header") | pl.col("_printer_launch")
    )
    owner = per_rank(
        pl.when(pl.col("_exc")).then(pl.col("_i").cast(pl.Int64)).when(breaker).then(-1).otherwise(None)
        .forward_fill()
    ).fill_null(-1)
    df = df.with_columns(owner.alias("_exc_owner"))
    # 7. Python warnings: the source line printed under a warning belongs to it
    prev_warn = per_rank(pl.col("_warning").shift(1)).fill_null(False)
    prev_noise = per_rank(pl.col("_noise").shift(1)).fill_null(False)
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
    if by_file:
        facts = [pl.lit(pl.Series([f[k] for f in files], dtype=pl.String)).gather(pl.col("_f")).alias(name)
                 for k, name in ((2, "run_id"), (1, "stream"), (3, "path"))]
    else:
        _lines, stream, run_id, path = files[0] if files else ([], "", "", "")
        facts = [pl.lit(run_id, dtype=pl.String).alias("run_id"), pl.lit(stream, dtype=pl.String).alias("stream"),
                 pl.lit(path, dtype=pl.String).alias("path")]
    out = df.with_columns(
        kind.alias("kind"),
        *_frame_fields(df),
        *facts,
        (pl.col("_i").cast(pl.Int64) + 1).alias("lineno"),
    )
    return out.drop("_g", "_dd") if by_file else out


def _frame_fields(df: pl.DataFrame) -> list[pl.Series]:
    """``_fr_file``, ``_fr_line``, ``_fr_func`` of the traceback frame lines (null elsewhere), matched on those
    lines only."""
    idx = df.get_column("_tb_file").arg_true()
    out = []
    if not idx.len():  # no frame line: the columns are null (and the pattern need not be compiled)
        return [pl.repeat(None, df.height, dtype=dtype, eager=True).alias(name) for name, dtype in
                (("_fr_file", pl.String), ("_fr_line", pl.Int32), ("_fr_func", pl.String))]
    parsed = df.get_column("_msg").gather(idx).str.extract_groups(PATTERNS["tb_frame"]).struct.unnest()
    for name, field, dtype in (("_fr_file", "file", pl.String), ("_fr_line", "line", pl.Int32),
                               ("_fr_func", "func", pl.String)):
        full = pl.repeat(None, df.height, dtype=dtype, eager=True).alias(name)
        out.append(full.scatter(idx, parsed.get_column(field).cast(dtype, strict=False)) if idx.len() else full)
    return out


def public(df: pl.DataFrame) -> pl.DataFrame:
    """The ``lines`` frame: ``classify()`` output without helper columns."""
    raw = pl.coalesce("_unwrapped", "_t") if "_unwrapped" in df.columns else pl.col("_t")
    return df.select("run_id", "stream", "path", "lineno", "rank", "kind", "level", "src", "prefix", "text",
                     raw.alias("raw"))
