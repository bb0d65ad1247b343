"""Which known message is this? Look a message up in the message catalogue (``rules/catalogue``).

The catalogue lists the error messages torch raises on the AOTI path (``messages.jsonl``) and those of the code
that AOTI logs come from besides (``dynamo.jsonl``, ``c10_cuda.jsonl``, ``executorch.jsonl``, ``triton.jsonl``), each
with the file that raises it and a family; the files other than ``messages.jsonl`` also list warnings, flagged
``warning`` (see ``rules/catalogue/README.md``). A log often holds only the final ``Type: message`` line, or one
pasted error line with no traceback: no frame says where it was raised. :func:`lookup` finds the catalogued template a
message was made from, so that failure detection can name the raising file, its phase and its family, and
:func:`error_lines` finds the lines of a log that are catalogued errors, which failure detection counts as evidence.

Matching needs no regex: a template is its literal pieces between the ``{}`` fields; it matches when the first piece
starts the message and every piece follows in order (``str.find``, linear in the message). The most specific match
wins (the most literal text). Templates with less than ``MIN_LITERAL`` characters of text (``{}: {}``) and carrier
templates (``Error: {}``, wrappers whose family is the one of the message they carry) never match.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, NamedTuple

import polars as pl

MIN_LITERAL = 16
MAX_MESSAGE = 4096
# a line is failure evidence when it matches an error template with at least this much literal text (stripped pieces)
MIN_EVIDENCE = 24
# the literal piece a line must contain to be looked up at all (the Polars prefilter of error_lines)
MIN_ANCHOR = 10
MAX_CANDIDATES = 2000  # lines looked up per call of error_lines, at most (the first ones)
# line kinds that can carry a pasted error message (not tracebacks, warnings, noise, generated code)
EVIDENCE_KINDS = ("plain", "exception", "cpp_error", "printer", "torch_log")
HANDLED_LEVELS = ("V", "I", "W", "D")  # a line logged at these levels is not an error, whatever it says
# ExecuTorch's checks that return false to a caller that may try again (executorch#7170: logged, then it ran fine)
SOFT_KINDS = ("et_return_false",)
# the kind of platform.jsonl's messages (runtimes, compilers, linkers, the loader): matched anywhere in a line
PLATFORM = "platform"


class KnownMessage(NamedTuple):  # a tuple: ~10,000 are made per process
    template: str
    exc_type: str
    family: str
    file: str  # path:line of the raising statement in the newest release that has it
    first_version: str
    last_version: str
    warning: bool = False  # a warning or info text: never failure evidence
    kind: str = ""  # the catalogue's kind: 'et_return_false' (a check whose caller decides) is not evidence either
    internal: bool = False
    literal: int = 0  # characters of literal text (stripped pieces)


def _collapse(text: str) -> str:
    return " ".join(text.split())


@lru_cache(maxsize=1)
def _templates() -> tuple[tuple[tuple[str, ...], int, KnownMessage], ...]:
    """Every catalogued template with enough literal text: its pieces, its literal length, its record. Parsing the
    catalogue's ~9,500 lines takes ~0.3 s: the result comes from the on-disk cache when it holds it."""
    return _cached(_read_templates, "templates")


def _cached(build: Callable[[], tuple[Any, ...]], what: str) -> tuple[Any, ...]:
    """``build()`` through the on-disk cache of ``library.cache``, keyed by the catalogue files and this module's
    source (a change of either builds anew)."""
    from aoti_trace.library.cache import cached
    from aoti_trace.library.loader import default_rules_dir

    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    return cached([default_rules_dir() / "catalogue"], build, tuple, extra=f"catalogue-{what} {code}",
                  suffixes=(".jsonl",))


def _read_templates() -> tuple[tuple[tuple[str, ...], int, KnownMessage], ...]:
    from aoti_trace.library.loader import default_rules_dir

    folder: Path = default_rules_dir() / "catalogue"
    out = []
    try:
        lines = [ln for path in sorted(folder.glob("*.jsonl")) for ln in path.read_text(encoding="utf-8").split("\n")
                 if ln.strip()]  # not splitlines(): a template may hold U+2028 and the like
    except OSError:
        return ()
    try:  # one parse of the whole catalogue; line by line (skipping what does not parse) only if that fails
        records = json.loads("[" + ",".join(lines) + "]")
    except ValueError:
        records = []
        for line in lines:
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
    for m in records:
        if not isinstance(m, dict) or m.get("carrier") or not m.get("template"):
            continue
        pieces = tuple(p for p in _collapse(str(m["template"])).split("{}"))
        literal = sum(len(p.strip()) for p in pieces)
        if literal < MIN_LITERAL:
            continue
        files = m.get("files") or ["?"]
        out.append((pieces, literal, KnownMessage(str(m["template"]), str(m.get("exc_type") or ""),
                                                   str(m.get("family") or ""), str(files[0]),
                                                   str(m.get("first_version") or ""),
                                                   str(m.get("last_version") or ""), bool(m.get("warning")),
                                                   str(m.get("kind") or ""), bool(m.get("internal")), literal)))
    return tuple(out)


def _matches(pieces: tuple[str, ...], message: str) -> int:
    """How much literal text of the template ``pieces`` the message holds (0: it is not made from it). A message
    may end early, at a sentence boundary of a piece (a pasted line that lost the template's tail: 'cudaMallocAsync
    does not yet support checkPoolLiveAllocations' of '{} does not yet support {}. If you need it, ...'); the text
    matched up to there counts."""
    first = pieces[0].lstrip()
    if first and not message.startswith(first):
        return 0
    return _follow(pieces, message, len(first.strip()))


def _follow(pieces: tuple[str, ...], message: str, at: int) -> int:
    """The literal text of ``pieces`` the message holds in order, the first piece ending at ``at``."""
    matched = len(pieces[0].strip())
    for piece in pieces[1:]:
        piece = piece.strip()
        if not piece:
            continue
        i = message.find(piece, at)
        if i < 0:
            return matched + _cut(piece, message, at)
        at = i + len(piece)
        matched += len(piece)
    return matched


def _matches_inside(pieces: tuple[str, ...], message: str) -> int:
    """:func:`_matches` for a ``platform`` template: its first piece may start anywhere in the message (a runtime's
    error string inside ``CUDA error: {}``, a linker's after ``/usr/bin/ld: ``, a compiler's after its location), at
    a word boundary; the best of its occurrences counts."""
    first = pieces[0].strip()
    if not first:
        return _matches(pieces, message)
    best, i = 0, message.find(first)
    while i >= 0:
        if i == 0 or not (message[i - 1].isalnum() or message[i - 1] == "_"):
            best = max(best, _follow(pieces, message, i + len(first)))
        i = message.find(first, i + 1)
    return best


def _cut(piece: str, message: str, at: int) -> int:
    """The length of the longest leading sentences of ``piece`` that end the message after ``at`` (0 if none)."""
    end = message.rstrip().rstrip(".")
    best, start = 0, 0
    while (dot := piece.find(". ", start)) > 0:
        head = piece[:dot]
        if end.endswith(head) and len(end) - len(head) >= at:
            best = len(head)
        start = dot + 1
    return best


@lru_cache(maxsize=1)
def _by_prefix() -> dict[int, dict[str, list[int]]]:
    """The templates (their index in :func:`_templates`) by the text a message must start with (the first piece,
    stripped on the left): length -> that text -> indexes. The empty text (a template that starts with a field)
    is under length 0."""
    out: dict[int, dict[str, list[int]]] = {}
    for i, (pieces, _literal, known) in enumerate(_templates()):
        first = pieces[0].lstrip() if known.kind != PLATFORM else ""  # a platform message may start anywhere
        out.setdefault(len(first), {}).setdefault(first, []).append(i)
    return out


def lookup(message: str | None) -> KnownMessage | None:
    """The catalogued torch message that ``message`` (an exception's message, without its type) was made from."""
    if not message:
        return None
    msg = _collapse(message[:MAX_MESSAGE])
    # only the templates whose first piece starts the message can match (:func:`_matches`), in catalogue order
    candidates = sorted(i for n, table in _by_prefix().items() if n <= len(msg) for i in table.get(msg[:n], ()))
    templates = _templates()
    best: tuple[int, KnownMessage] | None = None
    for i in candidates:
        pieces, literal, known = templates[i]
        if best is not None and literal <= best[0]:
            continue
        matched = _matches_inside(pieces, msg) if known.kind == PLATFORM else _matches(pieces, msg)
        if matched >= MIN_LITERAL and (best is None or matched > best[0]):
            best = (matched, known if matched == literal else known._replace(literal=matched))
    return best[1] if best else None


def is_error(known: KnownMessage | None) -> bool:
    """``known`` is an error a user's run can die of, with enough literal text to be evidence on its own."""
    return known is not None and not known.warning and not known.internal and known.literal >= MIN_EVIDENCE \
        and known.kind not in SOFT_KINDS


@lru_cache(maxsize=1)
def _anchors() -> tuple[str, ...]:
    """For each template that can be evidence, a text every message made from it holds, even one cut at a sentence
    boundary (:func:`_matches`): the first sentence of its first literal piece, else (too short to be selective) of
    its longest piece. A line that contains none of them is not looked up. Read from the on-disk cache of
    ``library.cache`` (keyed by the catalogue files and this module's source), so that a run whose lines hold none of
    them does not read the templates."""
    return _cached(_build_anchors, "anchors")


def _build_anchors() -> tuple[str, ...]:
    out = set()
    for pieces, _literal, known in _templates():
        if is_error(known):
            texts = [p.strip() for p in pieces if p.strip()]
            anchor = texts[0].split(". ")[0]
            if len(anchor) < MIN_ANCHOR:
                anchor = max(texts, key=len).split(". ")[0]
            if len(anchor) >= MIN_ANCHOR:
                out.add(anchor)
    return tuple(sorted(out))


def error_lines(lines: pl.DataFrame) -> pl.DataFrame:
    """Per run, the first line of ``lines`` (the ``lines`` frame) whose message is a catalogued error (:func:`is_error`):
    run_id, path, lineno, text (``lookup(line_message(text))`` is its record). A line at a handled level
    (info, warning, debug) or whose best match is a warning is not one. Linear: a Polars Aho-Corasick prefilter on the
    templates' anchors, then :func:`lookup` (``str.find``) on the few lines left."""
    schema = {"run_id": pl.String, "path": pl.String, "lineno": pl.Int64, "text": pl.String}
    if lines.height == 0:
        return pl.DataFrame(schema=schema)
    text = pl.col("text")
    cand = (lines.filter(pl.col("kind").is_in(EVIDENCE_KINDS) & ~pl.col("level").fill_null("").is_in(HANDLED_LEVELS)
                         & (text.str.len_chars() >= MIN_EVIDENCE))
            .select("run_id", "path", "lineno", text.str.slice(0, MAX_MESSAGE).alias("text")))
    if cand.height == 0:  # the catalogue is not even loaded
        return pl.DataFrame(schema=schema)
    cand = cand.filter(cand.get_column("text").str.contains_any(list(_anchors()))).head(MAX_CANDIDATES)
    rows: dict[str, dict[str, object]] = {}
    for row in cand.iter_rows(named=True):
        if row["run_id"] in rows:
            continue
        if is_error(lookup(line_message(row["text"]))):
            rows[row["run_id"]] = row
    return pl.DataFrame(list(rows.values()), schema=schema) if rows else pl.DataFrame(schema=schema)


def line_message(text: str) -> str:
    """The message of a line: without a leading ``Type:`` of a one-line exception (``RuntimeError: m``)."""
    head, sep, rest = text.partition(": ")
    if sep and head and " " not in head and (head.endswith(("Error", "Exception")) or "." in head):
        return rest
    return text
