"""Assemble Python exceptions (the ``exceptions`` frame) from classified lines.

Walks the traceback headers, chain separators, frame lines and exception lines of
:func:`aoti_trace.ingest.text.lines.classify`, per rank, so chains (``The above exception was the direct cause ...`` /
``During handling ...``) of interleaved ranks stay apart. Frame lines were already split into file, line and
function by ``classify`` (Polars, linear-time regex); the source line shown under each frame and the message lines
after each exception line are gathered in Polars beforehand (:func:`_prepared`), so the Python walk sees about a
quarter of the traceback rows.

Each exception also gets the phase it was raised in (:func:`aoti_trace.model.vocabulary.route_phase` over its frames,
innermost first) and the user's call site. A traceback that stops before its ``Type: message`` line (a log cut in
the middle, a crash while printing) still gives a row, with ``complete`` false and no type.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import polars as pl

from aoti_trace.model.frames import conform, empty
from aoti_trace.model.vocabulary import is_torch, is_user, route_call, route_phase, torch_relative

# bounded: applied to one already-split exception line, at most MAX_LINE characters of it
EXC = re.compile(r"^(?P<type>[^:\s]+)(?::(?: (?P<msg>.*))?)?$")
MAX_LINE = 4096

Frame = tuple[str, int, str, "str | None"]  # file, line, function, source text of the line


def innermost(frames: list[Frame]) -> dict[str, Any]:
    """User and torch fields, and the phase, from frames listed outermost first (a new dict)."""
    return dict(_innermost(tuple(frames)))


@functools.lru_cache(maxsize=4096)
def _innermost(frames: tuple[Frame, ...]) -> dict[str, Any]:
    """:func:`innermost`, once per distinct stack (a long log repeats the same tracebacks); never mutated."""
    out: dict[str, Any] = {}
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


# Python's white space (``str.isspace``, ``re``'s ``\\s``) in Rust regex: Unicode White_Space plus \x1c-\x1f
_PY_SPACE = r"[\s\x1c-\x1f]"


def _prepared(df: pl.DataFrame) -> pl.DataFrame:
    """The rows the assembly walks, with the per-row work done in Polars: the source line shown under each frame
    (the first line after it, before the next frame or the end of the traceback, that is not blank and not a
    3.11 marker line) in ``_code``, and the message lines after each exception line gathered in ``_more``.
    Code and message lines themselves are not walked."""
    c = pl.col
    files = "_f" in df.columns  # several files (lines.classify_many): everything per file, and per rank within it
    sel = df.select(*(["_f", "run_id", "path"] if files else []), "_rk", "_i", "lineno", "_msg", "_tb_head",
                    "_tb_cause", "_tb_context", "_tb_file", "_in_tb", "_exc", "_exc_owner", "_fr_file", "_fr_line",
                    "_fr_func", "level", "_tb_type").filter(
        c("_tb_head") | c("_tb_cause") | c("_tb_context") | c("_in_tb") | c("_exc") | (c("_exc_owner") >= 0))
    if sel.height == 0:
        return sel
    multi = sel.get_column("_rk").n_unique() > 1
    keys = (["_f", "_rk"] if multi else ["_f"]) if files else ["_rk"] if multi else []
    at = ["_f", "_i"] if files else ["_i"]  # a line: its index in its file

    def per_rank(e: pl.Expr) -> pl.Expr:
        return e.over(keys) if keys else e

    reset = c("_tb_head") | c("_tb_cause") | c("_tb_context")
    frame = c("_tb_file") & ~reset & c("_fr_file").is_not_null()
    code = ~reset & ~c("_tb_file") & c("_in_tb") & ~c("_exc")
    more = ~reset & ~c("_tb_file") & ~(c("_in_tb") & ~c("_exc")) & ~c("_exc") & (c("_exc_owner") >= 0)
    walked = reset | c("_tb_file") | (c("_exc") & ~(c("_in_tb") & ~c("_exc")))
    # the frame a code line belongs to: the latest frame since the traceback (or its exception line) started
    owner = per_rank(
        pl.when(frame).then(c("_i").cast(pl.Int64)).when(reset | c("_exc")).then(-1).otherwise(None).forward_fill()
    ).fill_null(-1)
    shown = (code & (owner >= 0) & ~c("_msg").str.contains(f"^{_PY_SPACE}*$")
             & ~c("_msg").str.slice(0, MAX_LINE).str.contains(f"^{_PY_SPACE}*[\\^~]+{_PY_SPACE}*$"))
    sel = sel.with_columns(owner.alias("_owner"), shown.alias("_shown"), more.alias("_more"), walked.alias("_walk"))
    codes = (sel.filter("_shown").group_by([*at[:-1], "_owner"], maintain_order=True)
             .agg(c("_msg").first().alias("_code")).rename({"_owner": "_i"}))
    msgs = sel.filter("_more").group_by([*at[:-1], "_exc_owner"], maintain_order=True) \
        .agg(c("_msg").alias("_more_msgs")).rename({"_exc_owner": "_i"})
    walk = sel.filter("_walk").drop("_owner", "_shown", "_more", "_walk")
    walk = walk.with_columns(c("_i").cast(pl.Int64))
    return (walk.join(codes.with_columns(c("_i").cast(pl.Int64)), on=at, how="left", maintain_order="left")
            .join(msgs.with_columns(c("_i").cast(pl.Int64)), on=at, how="left", maintain_order="left"))


def exceptions_frame(df: pl.DataFrame) -> pl.DataFrame:
    """One row per exception; ``df`` is the output of ``classify()``, or of ``classify_many()`` (several files:
    chains are followed per file and rank, and each row keeps its file's ``_f``)."""
    if df.height == 0:
        return empty("exceptions")
    files = "_f" in df.columns
    run_id, path = df["run_id"][0], df["path"][0]
    sel = _prepared(df)
    if sel.height == 0:
        return empty("exceptions")
    rows: list[dict[str, Any]] = []
    # per file and rank: current frames, open chain, pending relation, last frame line
    by_rank: dict[tuple[int, int], dict[str, Any]] = {}

    def cut(st: dict[str, Any]) -> None:
        """The open traceback ended without its exception line: record what it shows."""
        if st["frames"]:
            rows.append({"run_id": st["run_id"], "path": st["path"], **({"_f": st["f"]} if files else {}),
                         "lineno": st["last_lineno"], "chain": 0, "chained_by": None,
                         "is_final": True, "complete": False, "exc_type": st.get("tb_type"), "_msg": [""],
                         "level": st["level"], "frames": len(st["frames"]), **innermost(st["frames"])})
        st["frames"] = []

    n = sel.height
    walked = sel.select(pl.col("_f") if files else pl.repeat(0, n, dtype=pl.UInt32).alias("_f"),
                        pl.col("run_id") if files else pl.repeat(run_id, n, dtype=pl.String).alias("run_id"),
                        pl.col("path") if files else pl.repeat(path, n, dtype=pl.String).alias("path"),
                        "_rk", "lineno", "_msg", "_tb_head", "_tb_cause", "_tb_context", "_tb_file", "_exc",
                        "_fr_file", "_fr_line", "_fr_func", "level", "_tb_type", "_code", "_more_msgs")
    for (f, run_id, path, rk, lineno, msg, head, cause, context, tbf, exc, fr_file, fr_line, fr_func, level, tb_type,
         code, more) in walked.iter_rows():
        st = by_rank.setdefault((f, rk), {"frames": [], "chain": None, "pending": None, "last_lineno": None,
                                          "level": None, "f": f, "run_id": run_id, "path": path})
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
                code = code.strip()[:MAX_LINE] if code is not None else None
                st["frames"].append((fr_file, fr_line or 0, fr_func or "", code))
                st["last_lineno"] = lineno
        elif exc:
            m = EXC.match(msg[:MAX_LINE])
            chain = st["chain"]
            if chain is not None and st["pending"] is not None:
                chain[-1]["chained_by"] = st["pending"]
                chain[-1]["is_final"] = False
            else:
                chain = st["chain"] = []
            row = {
                "run_id": run_id, "path": path, **({"_f": f} if files else {}), "lineno": lineno, "chain": len(chain),
                "chained_by": None,
                "is_final": True, "complete": True, "exc_type": m["type"] if m else msg[:MAX_LINE],
                "_msg": [m["msg"] or ""] if m else [""], "level": level if level is not None else st["level"],
                "frames": len(st["frames"]), **innermost(st["frames"]),
            }
            if more is not None:
                row["_msg"].extend(more)
            chain.append(row)
            rows.append(row)
            st["pending"] = None
            st["frames"] = []
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
    rows.sort(key=(lambda r: (r["_f"], r["lineno"] or 0)) if files else (lambda r: r["lineno"] or 0))
    return conform("exceptions", pl.DataFrame(rows, infer_schema_length=None))
