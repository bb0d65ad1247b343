"""Reduce findings to *signatures*: what stays the same when the same failure happens on another host, model or rank.

A signature is the rule id plus normalised key facts of a finding:

* ``kernel``: the kernel name from the finding's fields, without the hash or index suffix Inductor appends
  (``triton_poi_fused_index_mul_0`` -> ``triton_poi_fused_index_mul``);
* ``op``: the operator the rule extracted (``fields.op``), as is;
* ``exc_type``: the exception type the rule extracted (``fields.exc_type``), else the ``SomethingError`` /
  ``SomethingException`` that starts the message;
* ``template``: the message with paths, addresses, hashes and numbers masked (``<path>``, ``<addr>``, ``<hash>``,
  ``<n>``), so ``(3x9 and 8x4)`` and ``(5x7 and 2x2)`` are one template.

All masking runs as Polars string expressions (Rust regex) over whole columns: no Python ``re`` on log text.
The signature id is the first 12 hex digits of the SHA-1 of those five values joined by a unit separator; it is
hashed once per distinct key, so the same failure has the same id in every triage (``--since`` relies on it).
"""

from __future__ import annotations

import hashlib
from typing import Any

import polars as pl

KEY_COLUMNS = ("rule_id", "kernel", "op", "exc_type", "template")

# Order matters: paths first (they hold hashes and numbers), then addresses, hashes, numbers.
MASKS: tuple[tuple[str, str], ...] = (
    # /tmp/x.py, ./x, ~/x, C:/x, and a/b/c (two slashes at least: "C++/Triton" is not a path)
    (r"(^|[^\w.+~-])(?:(?:[A-Za-z]:|\.{1,2}|~)?/[\w.+@%~-]+(?:/[\w.+@%~-]*)*|[\w.+@%~-]+(?:/[\w.+@%~-]+){2,}/?)",
     "${1}<path>"),
    (r"\b0x[0-9A-Fa-f]+\b", "<addr>"),
    (r"\b[0-9A-Fa-f]{12,}\b", "<hash>"),                                    # md5, sha, long hex ids
    (r"\b[a-z0-9]{24,}\b", "<hash>"),                                       # Inductor's base32 cache names
    # Inductor's generated names (arg3_1, buf0, tmp4, ks0, s70, u0) differ between models: their digits go
    (r"\b(arg|buf|tmp|ks|s|u|x|y|r|xindex|primals_)\d+(?:_\d+)?\b", "${1}<n>"),
    (r"(^|[^A-Za-z_])\d+(?:x\d+)+\b", "${1}<n>x<n>"),                        # shapes: 3x9 -> <n>x<n>
    (r"(^|[^\w.])[-+]?\d+(?:\.\d+)?(?:e[+-]?\d+)?\b", "${1}<n>"),          # 3, -1, 3.5, 1e+11 (not mat1)
)
KERNEL_SUFFIX = r"(?:_[0-9a-f]{6,}|_\d+)+$"  # triton_poi_fused_add_0, ..._0_abc1234f
EXC_TYPE = r"^(?:[\w.]+\.)?(\w*(?:Error|Exception|Exit|Interrupt))\b"


def mask(expr: pl.Expr) -> pl.Expr:
    """``expr`` (a string column) with paths, addresses, hashes and numbers replaced by placeholders."""
    for pattern, token in MASKS:
        expr = expr.str.replace_all(pattern, token)
    return expr.str.replace_all(r"\s+", " ").str.strip_chars()


def kernel_base(expr: pl.Expr) -> pl.Expr:
    """A kernel name without the hash/index suffix Inductor appends."""
    return expr.str.replace(KERNEL_SUFFIX, "")


def add_signatures(findings: pl.DataFrame) -> pl.DataFrame:
    """``findings`` (columns ``rule_id``, ``message``, ``kernel``, ``op``, ``exc_type``) with the normalised key
    columns and a ``signature`` id added."""
    if findings.is_empty():
        return findings.with_columns(
            pl.lit(None, pl.Utf8).alias("template"), pl.lit(None, pl.Utf8).alias("signature"))
    out = findings.with_columns(
        kernel_base(pl.col("kernel")).alias("kernel"),
        pl.coalesce(pl.col("exc_type"), pl.col("message").str.extract(EXC_TYPE, 1)).alias("exc_type"),
        mask(pl.col("message").str.split("\n").list.first()).alias("template"),
    )
    keys = out.select(KEY_COLUMNS).unique()
    ids = keys.with_columns(pl.Series("signature", [signature_id(row) for row in keys.iter_rows()], pl.Utf8))
    return out.join(ids, on=list(KEY_COLUMNS), how="left", nulls_equal=True)


def signature_id(key: tuple[Any, ...]) -> str:
    """The stable id of one signature key (``KEY_COLUMNS`` values; None is the empty string)."""
    text = "\x1f".join("" if v is None else str(v) for v in key)
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
