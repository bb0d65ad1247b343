"""Fatal signals and C++ aborts (the ``faults`` frame).

* faulthandler dumps (``Fatal Python error: Segmentation fault`` + the crashing thread's stack);
* the shell's report of a killed child (``Segmentation fault (core dumped)``, ``... Aborted (core dumped) cmd``):
  a fatal_signal row without a stack;
* ``terminate called after throwing an instance of '...'`` / ``what():`` pairs, and libc++'s one-line form
  (``libc++abi: terminating due to uncaught exception of type T: what``).
* Android's ``Fatal signal 11 (SIGSEGV) ...`` crash line.
* UCX's crash handler: ``Caught signal 11 (Segmentation fault: ...)`` and its ``==== backtrace (tid:N) ====``.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from aoti_trace.model.frames import conform, empty
from aoti_trace.model.vocabulary import is_torch, is_user, route_phase, torch_relative

# Line patterns, matched in Polars (Rust regex: linear time on any line), never with Python's backtracking `re`
# (`.*?\s*$` is quadratic there on a line ending in a long run of spaces).
FATAL = r"^Fatal Python error: (?P<what>.*?)\s*$"
THREAD = r"^(?P<current>Current thread|Thread) 0x[0-9a-fA-F]+ \(most recent call first\):|^Stack \(most recent call first\):"
FH_FRAME = r'^  File "(?P<file>[^"]*)", line (?P<line>[0-9]{1,18}|\?\?\?) in (?P<func>.+?)\s*$'
TERMINATE = r"^terminate called (?:after throwing an instance of '(?P<type>[^']*)'|(?P<other>.*))"
# libc++'s form (macOS, Android): the type and the what() on one line
LIBCXX_TERMINATE = (r"^(?:libc\+\+abi: )?terminating (?:due to|with) uncaught exception of type (?P<type>\S+?)"
                    r"(?:: (?P<what>.*))?$")
# Android's crash line (logcat, tag libc): 'Fatal signal 11 (SIGSEGV), code 1 (SEGV_MAPERR), fault addr 0x0 ...'
ANDROID_SIGNAL = r"^Fatal signal \d+ \((?P<sig>SIG[A-Z]+)\)"
WHAT = r"^\s*what\(\):\s+(?P<what>.*)$"
# UCX's crash handler (loaded with NCCL/MPI/UCC transports): '[host:pid:0:tid] Caught signal 11 (Segmentation fault:
# address not mapped ...)', then '==== backtrace (tid:3341850) ====' and native frames. It prints the backtrace only
# when the process dies (a fatal signal, or UCX's own fatal error): a log pasted from the header on is still a crash
UCX_SIGNAL = r"\bCaught signal (?P<num>[0-9]{1,2}) \((?P<name>[A-Za-z][A-Za-z -]*)"
UCX_BACKTRACE = r"^==== backtrace \(tid: *[0-9]+\) ====\s*$"
UCX_SIGNALS = {"4": "SIGILL", "6": "SIGABRT", "7": "SIGBUS", "8": "SIGFPE", "11": "SIGSEGV"}
# the shell's report of a child killed by a signal: 'Segmentation fault (core dumped)' on its own line, bash's job
# line './run.sh: line 34:  1930 Aborted                 (core dumped) cmd ...', zsh's '[1]    10753 killed     cmd'
# and 'zsh: segmentation fault  cmd' (and 'Segfault (core dumped)', as people retype it); zsh on Linux names SIGABRT
# by its alias SIGIOT: '[1]    2964411 IOT instruction (core dumped)'
SHELL_SIGNAL = (
    r"^(?:(?:\S+: line \d+: +\d+ +)?(?P<what>Segmentation fault|Segfault|Bus error|Aborted|Illegal instruction"
    r"|Floating point exception|Killed)|(?:\[\d+\] +[+-]? *\d+ +|zsh: )(?P<what2>(?i:segmentation fault|bus error"
    r"|abort|iot instruction|illegal hardware instruction|floating point exception|killed)))(?: +\(?core dumped\)?)?(?:\s*$| +\S)"
)

SIGNALS = {
    "segmentation fault": "SIGSEGV",
    "segfault": "SIGSEGV",
    "bus error": "SIGBUS",
    "aborted": "SIGABRT",
    "illegal instruction": "SIGILL",
    "floating-point exception": "SIGFPE",
    "floating point exception": "SIGFPE",
}

def _signal(what: str) -> str | None:
    low = what.lower()
    return next((sig for words, sig in SIGNALS.items() if low.startswith(words)), None)


def faults_frame(df: pl.DataFrame) -> pl.DataFrame:
    """One row per faulthandler dump and per terminate/what() pair; ``df`` is the output of ``classify()``."""
    shell = (pl.col("kind") == "plain") & pl.col("_msg").str.contains(SHELL_SIGNAL)
    # the patterns are matched only on lines classify() marked as possibly matching (lines.LOUD_ELSEWHERE)
    sel = df.select("_rk", "_i", "lineno", "_msg", "kind", "run_id", "path", "_what", "_elsewhere").filter(
        pl.col("kind").is_in(["faulthandler", "terminate"]) | pl.col("_what") | pl.col("_elsewhere"))
    if sel.height == 0:  # (the patterns below are then not compiled)
        return empty("faults")
    sel = sel.filter(
        pl.col("kind").is_in(["faulthandler", "terminate"]) | pl.col("_what") | shell
        | pl.col("_msg").str.contains(LIBCXX_TERMINATE) | pl.col("_msg").str.contains(ANDROID_SIGNAL)
        | pl.col("_msg").str.contains(UCX_SIGNAL) | pl.col("_msg").str.contains(UCX_BACKTRACE)
    ).drop("_what", "_elsewhere")
    if sel.height == 0:
        return empty("faults")
    text = pl.col("_msg")
    sel = sel.with_columns(
        text.str.extract_groups(FATAL).alias("_fatal"),
        text.str.contains(THREAD).alias("_is_thread"), text.str.extract_groups(THREAD).alias("_thread"),
        text.str.extract_groups(FH_FRAME).alias("_frame"),
        pl.when(pl.col("kind") == "plain").then(text.str.extract_groups(SHELL_SIGNAL)).alias("_shell"),
        text.str.contains(TERMINATE).alias("_is_term"), text.str.extract_groups(TERMINATE).alias("_term"),
        text.str.extract_groups(WHAT).alias("_whatm"),
        text.str.extract_groups(LIBCXX_TERMINATE).alias("_libcxx"),
        text.str.extract(ANDROID_SIGNAL, 1).alias("_android"),
        text.str.extract_groups(UCX_SIGNAL).alias("_ucx"), text.str.contains(UCX_BACKTRACE).alias("_ucx_bt"),
    )
    run_id, path = sel["run_id"][0], sel["path"][0]
    rows: list[dict[str, Any]] = []
    state: dict[int, dict[str, Any]] = {}  # per rank: the open dump / terminate row
    for r in sel.iter_rows(named=True):
        rk, lineno, msg = r["_rk"], r["lineno"], r["_msg"]
        st = state.setdefault(rk, {"dump": None, "in_current": False, "term": None, "ucx": None})
        m = r["_fatal"] if r["_fatal"]["what"] is not None else None
        if m:
            st["dump"] = {"run_id": run_id, "path": path, "lineno": lineno, "kind": "fatal_signal",
                          "signal": _signal(m["what"]), "what": m["what"], "_stack": []}
            st["in_current"] = False
            rows.append(st["dump"])
            continue
        m = r["_thread"] if r["_is_thread"] else None
        if m and st["dump"] is not None:
            # the crashing thread is 'Current thread' (or the only 'Stack' of a dump without threads)
            st["in_current"] = m["current"] != "Thread" and not st["dump"]["_stack"]
            continue
        m = r["_frame"] if r["_frame"]["line"] is not None else None
        if m and st["dump"] is not None and st["in_current"]:
            st["dump"]["_stack"].append((m["file"], m["line"], m["func"]))
            continue
        if msg.startswith("Extension modules: "):
            st["dump"], st["in_current"] = None, False
            continue
        m = r["_shell"] if r["_shell"] and (r["_shell"]["what"] or r["_shell"]["what2"]) is not None else None
        if m:
            said = (m["what"] or m["what2"]).lower()
            sig = _signal(said) or {"killed": "SIGKILL", "abort": "SIGABRT", "iot instruction": "SIGABRT",
                                    "illegal hardware instruction": "SIGILL"}.get(said)
            rows.append({"run_id": run_id, "path": path, "lineno": lineno, "kind": "fatal_signal", "what": msg[:300],
                         "signal": sig, "_stack": []})
            continue
        m = r["_ucx"] if r["_ucx"]["num"] in UCX_SIGNALS else None
        if m:
            st["ucx"] = {"run_id": run_id, "path": path, "lineno": lineno, "kind": "fatal_signal", "what": msg[:300],
                         "signal": UCX_SIGNALS[m["num"]], "_stack": []}
            rows.append(st["ucx"])
            continue
        if r["_ucx_bt"]:  # the backtrace of the signal reported just above, else a crash whose signal was not posted
            if st["ucx"] is None or lineno - st["ucx"]["lineno"] > 3:
                rows.append({"run_id": run_id, "path": path, "lineno": lineno, "kind": "fatal_signal",
                             "what": msg.strip()[:300], "signal": None, "_stack": []})
            st["ucx"] = None
            continue
        if r["_android"]:
            rows.append({"run_id": run_id, "path": path, "lineno": lineno, "kind": "fatal_signal", "what": msg[:300],
                         "signal": r["_android"], "_stack": []})
            continue
        m = r["_libcxx"] if r["_libcxx"]["type"] is not None else None
        if m:
            rows.append({"run_id": run_id, "path": path, "lineno": lineno, "kind": "terminate",
                         "exc_type": m["type"], "what": m["what"], "_stack": []})
            continue
        m = r["_term"] if r["_is_term"] else None
        if m:
            st["term"] = {"run_id": run_id, "path": path, "lineno": lineno, "kind": "terminate",
                          "exc_type": m["type"], "what": None, "_stack": []}
            rows.append(st["term"])
            continue
        m = r["_whatm"] if r["_whatm"]["what"] is not None else None
        if m:
            if st["term"] is not None and st["term"]["what"] is None:
                st["term"]["what"] = m["what"]
            else:  # what() without the terminate line (cut log): still a C++ abort
                rows.append({"run_id": run_id, "path": path, "lineno": lineno, "kind": "terminate",
                             "exc_type": None, "what": m["what"], "_stack": []})
    for row in rows:
        stack = row.pop("_stack")
        if row["kind"] == "fatal_signal":
            row["stack"] = "\n".join(f"{f}:{ln} in {fn}" for f, ln, fn in stack) or None
            row["phase"] = route_phase([(f, fn) for f, _, fn in stack])[0] if stack else "unknown"
            for f, ln, fn in stack:
                if "torch_function" not in row and is_torch(f):
                    row.update(torch_function=fn, torch_file=torch_relative(f))
                if "user_file" not in row and is_user(f):
                    row.update(user_file=f, user_line=int(ln) if ln.isdigit() else None)
        else:
            row["phase"] = "unknown"
    if not rows:
        return empty("faults")
    return conform("faults", pl.DataFrame(rows, infer_schema_length=None))
