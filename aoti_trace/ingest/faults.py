"""Fatal signals and C++ aborts (the ``faults`` frame).

* faulthandler dumps (``Fatal Python error: Segmentation fault`` + the crashing thread's stack);
* the shell's report of a killed child (``Segmentation fault (core dumped)``, ``... Aborted (core dumped) cmd``):
  a fatal_signal row without a stack;
* ``terminate called after throwing an instance of '...'`` / ``what():`` pairs.
"""

from __future__ import annotations

import re

import polars as pl

from aoti_trace.frames import conform, empty
from aoti_trace.vocabulary import is_torch, is_user, route_phase, torch_relative

FATAL = re.compile(r"^Fatal Python error: (?P<what>.*?)\s*$")
THREAD = re.compile(r"^(?P<current>Current thread|Thread) 0x[0-9a-fA-F]+ \(most recent call first\):|^Stack \(most recent call first\):")
FH_FRAME = re.compile(r'^  File "(?P<file>[^"]*)", line (?P<line>\d+|\?\?\?) in (?P<func>.+?)\s*$')
TERMINATE = re.compile(r"^terminate called (?:after throwing an instance of '(?P<type>[^']*)'|(?P<other>.*))")
WHAT = re.compile(r"^\s*what\(\):\s+(?P<what>.*)$")
# the shell's report of a child killed by a signal: 'Segmentation fault (core dumped)' on its own line, or a
# script's job line './run.sh: line 34:  1930 Aborted                 (core dumped) cmd ...'
SHELL_SIGNAL = (
    r"^(?:\S+: line \d+: +\d+ +)?(?P<what>Segmentation fault|Bus error|Aborted|Illegal instruction"
    r"|Floating point exception|Killed)(?: +\(core dumped\))?(?:\s*$| +\S)"
)
SHELL_SIGNAL_RE = re.compile(SHELL_SIGNAL)

SIGNALS = {
    "segmentation fault": "SIGSEGV",
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
    sel = df.filter(pl.col("kind").is_in(["faulthandler", "terminate"]) | pl.col("_what") | shell).select(
        "_rk", "_i", "lineno", "_msg", "kind", "run_id", "path"
    )
    if sel.height == 0:
        return empty("faults")
    run_id, path = sel["run_id"][0], sel["path"][0]
    rows: list[dict] = []
    state: dict[int, dict] = {}  # per rank: the open dump / terminate row
    for rk, _i, lineno, msg, kind, *_ in sel.iter_rows():
        st = state.setdefault(rk, {"dump": None, "in_current": False, "term": None})
        m = FATAL.match(msg)
        if m:
            st["dump"] = {"run_id": run_id, "path": path, "lineno": lineno, "kind": "fatal_signal",
                          "signal": _signal(m["what"]), "what": m["what"], "_stack": []}
            st["in_current"] = False
            rows.append(st["dump"])
            continue
        m = THREAD.match(msg)
        if m and st["dump"] is not None:
            # the crashing thread is 'Current thread' (or the only 'Stack' of a dump without threads)
            st["in_current"] = m["current"] != "Thread" and not st["dump"]["_stack"]
            continue
        m = FH_FRAME.match(msg)
        if m and st["dump"] is not None and st["in_current"]:
            st["dump"]["_stack"].append((m["file"], m["line"], m["func"]))
            continue
        if msg.startswith("Extension modules: "):
            st["dump"], st["in_current"] = None, False
            continue
        m = SHELL_SIGNAL_RE.match(msg) if kind == "plain" else None
        if m:
            rows.append({"run_id": run_id, "path": path, "lineno": lineno, "kind": "fatal_signal",
                         "signal": _signal(m["what"]) or ("SIGKILL" if m["what"] == "Killed" else None), "_stack": []})
            continue
        m = TERMINATE.match(msg)
        if m:
            st["term"] = {"run_id": run_id, "path": path, "lineno": lineno, "kind": "terminate",
                          "exc_type": m["type"], "what": None, "_stack": []}
            rows.append(st["term"])
            continue
        m = WHAT.match(msg)
        if m:
            if st["term"] is not None and st["term"]["what"] is None:
                st["term"]["what"] = m["what"]
            else:  # what() without the terminate line (cut log): still a C++ abort
                rows.append({"run_id": run_id, "path": path, "lineno": lineno, "kind": "terminate",
                             "exc_type": None, "what": m["what"], "_stack": []})
    for row in rows:
        stack = row.pop("_stack")
        if row["kind"] == "fatal_signal":
            row.pop("what", None)
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
