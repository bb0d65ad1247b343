"""Assemble Python exceptions (the ``exceptions`` frame) from classified lines.

Walks only the traceback / exception rows of :func:`aoti_trace.ingest.lines.classify`, per rank, so chains
(``The above exception was the direct cause ...`` / ``During handling ...``) of interleaved ranks stay apart.
"""

from __future__ import annotations

import re

import polars as pl

from aoti_trace.frames import conform, empty

# Matched in Polars (Rust regex: linear time, whatever the line holds), never with Python's backtracking `re`:
# `.+?\s*$` is quadratic there on a frame line that ends in a long run of spaces.
FILE_LINE = r'^  File "(?P<file>[^"]*)", line (?P<line>[0-9]{1,18}),? in (?P<func>.+?)\s*$'
EXC = r"^(?P<type>[^:\s]+)(?::(?: (?P<msg>.*))?)?$"
TORCH_FILE = re.compile(r"(?:^|/)(?:torch|functorch|torchgen)/")
STDLIB_FILE = re.compile(r"/lib/python\d+(?:\.\d+)?/(?!site-packages/|dist-packages/)|^<frozen |^<frozen>")
# code generated at run time: Triton launchers ('<string>'), Inductor's cache, FX graph modules
GENERATED_FILE = re.compile(r"^<string>$|^<eval_with_key>|/torchinductor_[^/]*/|^<fx-")


def is_torch(path: str) -> bool:
    """File belongs to torch (installed, or a source checkout)."""
    return bool(TORCH_FILE.search(path))


def is_user(path: str) -> bool:
    """File is outside torch, the standard library and generated code (the user's code or a third-party library)."""
    return not is_torch(path) and not STDLIB_FILE.search(path) and not GENERATED_FILE.search(path)


def torch_relative(path: str) -> str:
    """``.../site-packages/torch/x.py`` -> ``torch/x.py``; a checkout path -> from its last ``torch/``."""
    m = re.search(r"(?:site|dist)-packages/(.*)$", path)
    if m:
        return m.group(1)
    i = path.rfind("/torch/")
    return path[i + 1:] if i >= 0 else path


def innermost(frames: list[tuple[str, int, str]]) -> dict:
    """User and torch fields from frames listed outermost first."""
    out: dict = {}
    for file, line, func in reversed(frames):
        if "user_file" not in out and is_user(file):
            out.update(user_file=file, user_line=line, user_function=func)
        if "torch_function" not in out and is_torch(file):
            out.update(torch_function=func, torch_file=torch_relative(file))
    return out


def exceptions_frame(df: pl.DataFrame) -> pl.DataFrame:
    """One row per exception; ``df`` is the output of ``classify()``."""
    sel = df.filter(
        pl.col("_tb_head") | pl.col("_tb_cause") | pl.col("_tb_context") | pl.col("_tb_file") | pl.col("_exc")
        | (pl.col("_exc_owner") >= 0)
    ).select("_rk", "_i", "lineno", "_msg", "_tb_head", "_tb_cause", "_tb_context", "_tb_file", "_exc",
             "_exc_owner", "run_id", "path")
    if sel.height == 0:
        return empty("exceptions")
    sel = sel.with_columns(
        pl.when(pl.col("_tb_file")).then(pl.col("_msg").str.extract_groups(FILE_LINE)).alias("_fr"),
        pl.when(pl.col("_exc")).then(pl.col("_msg").str.extract_groups(EXC)).alias("_ex"),
    )
    run_id, path = sel["run_id"][0], sel["path"][0]
    rows: list[dict] = []
    by_rank: dict[int, dict] = {}  # per rank: current frames, open chain, pending relation
    by_index: dict[int, dict] = {}
    for rk, i, lineno, msg, head, cause, context, tbf, exc, owner, _run, _path, fr, m in sel.iter_rows():
        st = by_rank.setdefault(rk, {"frames": [], "chain": None, "pending": None})
        if head:
            st["frames"] = []
            if st["pending"] is None:
                st["chain"] = None  # a traceback not announced by a separator starts a new chain
        elif cause or context:
            st["pending"] = "cause" if cause else "context"
        elif tbf:
            if fr and fr["line"] is not None:
                st["frames"].append((fr["file"], int(fr["line"]), fr["func"]))
        elif exc:
            m = m if m and m["type"] is not None else None
            chain = st["chain"]
            if chain is not None and st["pending"] is not None:
                chain[-1]["chained_by"] = st["pending"]
                chain[-1]["is_final"] = False
            else:
                chain = st["chain"] = []
            row = {
                "run_id": run_id, "path": path, "lineno": lineno, "chain": len(chain), "chained_by": None,
                "is_final": True, "exc_type": m["type"] if m else msg, "_msg": [m["msg"] or ""] if m else [""],
                "frames": len(st["frames"]), **innermost(st["frames"]),
            }
            chain.append(row)
            rows.append(row)
            by_index[i] = row
            st["pending"] = None
            st["frames"] = []
        elif owner >= 0 and owner in by_index:
            by_index[owner]["_msg"].append(msg)
    for row in rows:
        parts = row.pop("_msg")
        while len(parts) > 1 and not parts[-1].strip():
            parts.pop()
        if len(parts) > 1 and not parts[0].strip():  # 'ChildFailedError: ' + a message starting on the next line
            parts.pop(0)
        row["message"] = "\n".join(p.rstrip() for p in parts)
    if not rows:
        return empty("exceptions")
    return conform("exceptions", pl.DataFrame(rows, infer_schema_length=None))
