"""Assemble Python exceptions (the ``exceptions`` frame) from classified lines.

Walks only the traceback / exception rows of :func:`aoti_trace.ingest.lines.classify`, per rank, so chains
(``The above exception was the direct cause ...`` / ``During handling ...``) of interleaved ranks stay apart.
Frame lines were already split into file, line and function by ``classify`` (Polars, linear-time regex).

Each exception also gets the phase it was raised in (:func:`aoti_trace.vocabulary.route_phase` over its frames,
innermost first) and the user's call site. A traceback that stops before its ``Type: message`` line (a log cut in
the middle, a crash while printing) still gives a row, with ``complete`` false and no type.
"""

from __future__ import annotations

import re

import polars as pl

from aoti_trace.frames import conform, empty
from aoti_trace.vocabulary import is_torch, is_user, route_call, route_phase, torch_relative

# bounded: applied to one already-split exception line, at most MAX_LINE characters of it
EXC = re.compile(r"^(?P<type>[^:\s]+)(?::(?: (?P<msg>.*))?)?$")
MARKER = re.compile(r"^\s*[\^~]+\s*$")  # Python 3.11's error-location markers under a code line
MAX_LINE = 4096

Frame = tuple[str, int, str, "str | None"]  # file, line, function, source text of the line


def innermost(frames: list[Frame]) -> dict:
    """User and torch fields, and the phase, from frames listed outermost first."""
    out: dict = {}
    if frames and frames[-1][3]:
        out["raise_code"] = frames[-1][3].strip()
    for file, line, func, code in reversed(frames):
        if "user_file" not in out and is_user(file):
            out.update(user_file=file, user_line=line, user_function=func, user_code=code)
        if "torch_function" not in out and is_torch(file):
            out.update(torch_function=func, torch_file=torch_relative(file))
    inner_first = [(f, fn) for f, _, fn, _ in reversed(frames)]
    phase, index = route_phase(inner_first)
    if phase == "user":  # an error raised at the call itself: the torch API the user line calls
        called = route_call(out.get("user_code"))
        if called is not None:
            phase, out["phase_source"] = called, f"call: {out.get('user_code', '').strip()[:120]}"
    elif index is not None:
        file, func = inner_first[index]
        out["phase_source"] = f"frame: {torch_relative(file)} in {func}"
    out["phase"] = phase
    return out


def exceptions_frame(df: pl.DataFrame) -> pl.DataFrame:
    """One row per exception; ``df`` is the output of ``classify()``."""
    sel = df.filter(
        pl.col("_tb_head") | pl.col("_tb_cause") | pl.col("_tb_context") | pl.col("_in_tb") | pl.col("_exc")
        | (pl.col("_exc_owner") >= 0)
    ).select("_rk", "_i", "lineno", "_msg", "_tb_head", "_tb_cause", "_tb_context", "_tb_file", "_in_tb", "_exc",
             "_exc_owner", "_fr_file", "_fr_line", "_fr_func", "level", "run_id", "path", "_tb_type")
    if sel.height == 0:
        return empty("exceptions")
    run_id, path = sel["run_id"][0], sel["path"][0]
    rows: list[dict] = []
    by_rank: dict[int, dict] = {}  # per rank: current frames, open chain, pending relation, last frame line
    by_index: dict[int, dict] = {}

    def cut(st: dict) -> None:
        """The open traceback ended without its exception line: record what it shows."""
        if st["frames"]:
            rows.append({"run_id": run_id, "path": path, "lineno": st["last_lineno"], "chain": 0, "chained_by": None,
                         "is_final": True, "complete": False, "exc_type": st.get("tb_type"), "_msg": [""], "level": st["level"],
                         "frames": len(st["frames"]), **innermost(st["frames"])})
        st["frames"] = []

    for (rk, i, lineno, msg, head, cause, context, tbf, in_tb, exc, owner, fr_file, fr_line, fr_func, level,
         _run, _path, tb_type) in sel.iter_rows():
        st = by_rank.setdefault(rk, {"frames": [], "chain": None, "pending": None, "last_lineno": None,
                                     "level": None})
        if head:
            cut(st)
            st["level"] = level
            st["tb_type"] = tb_type  # the type IPython's header names, for a traceback cut before its last line
            if st["pending"] is None:
                st["chain"] = None  # a traceback not announced by a separator starts a new chain
        elif cause or context:
            cut(st)
            st["tb_type"] = None
            st["pending"] = "cause" if cause else "context"
        elif tbf:
            if fr_file is not None:
                st["frames"].append((fr_file, fr_line or 0, fr_func or "", None))
                st["last_lineno"] = lineno
        elif in_tb and not exc:
            frames = st["frames"]
            code = msg.strip()
            if frames and frames[-1][3] is None and code and not MARKER.match(msg[:MAX_LINE]):
                frames[-1] = (*frames[-1][:3], code[:MAX_LINE])
        elif exc:
            m = EXC.match(msg[:MAX_LINE])
            chain = st["chain"]
            if chain is not None and st["pending"] is not None:
                chain[-1]["chained_by"] = st["pending"]
                chain[-1]["is_final"] = False
            else:
                chain = st["chain"] = []
            row = {
                "run_id": run_id, "path": path, "lineno": lineno, "chain": len(chain), "chained_by": None,
                "is_final": True, "complete": True, "exc_type": m["type"] if m else msg[:MAX_LINE],
                "_msg": [m["msg"] or ""] if m else [""], "level": level if level is not None else st["level"],
                "frames": len(st["frames"]), **innermost(st["frames"]),
            }
            chain.append(row)
            rows.append(row)
            by_index[i] = row
            st["pending"] = None
            st["frames"] = []
        elif owner >= 0 and owner in by_index:
            by_index[owner]["_msg"].append(msg)
    for st in by_rank.values():
        cut(st)
    for row in rows:
        parts = row.pop("_msg")
        while len(parts) > 1 and not parts[-1].strip():
            parts.pop()
        if len(parts) > 1 and not parts[0].strip():  # 'ChildFailedError: ' + a message starting on the next line
            parts.pop(0)
        row["message"] = "\n".join(p.rstrip() for p in parts) if row["complete"] else None
    if not rows:
        return empty("exceptions")
    rows.sort(key=lambda r: r["lineno"] or 0)
    return conform("exceptions", pl.DataFrame(rows, infer_schema_length=None))
