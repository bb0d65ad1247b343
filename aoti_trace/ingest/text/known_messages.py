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
wins (the most literal text). Templates with less than ``MIN_LITERAL`` characters of text (``{}: {}``) never match;
a carrier template (a wrapper whose family is the one of the message it carries: ``CALL_DELEGATE execute failed at
instruction {}: 0x{}``) matches only a message no other template matches, and then says only that something failed.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

import polars as pl

from aoti_trace.model.vocabulary import HANDLED_LEVELS

MIN_LITERAL = 16
MAX_MESSAGE = 4096
# a line is failure evidence when it matches an error template with at least this much literal text (stripped pieces)
MIN_EVIDENCE = 24
# the literal piece a line must contain to be looked up at all (the Polars prefilter of error_lines)
MIN_ANCHOR = 10
MAX_CANDIDATES = 2000  # lines looked up per call of error_lines, at most (the first ones)
# up to this many lines, error_lines looks for the anchors in Python (:func:`_holds_anchor`, ~0.1-1 ms a line):
# Polars' Aho-Corasick automaton of the ~7,000 anchors takes ~40 ms to build, whatever the number of lines
SMALL_CANDIDATES = 64
# line kinds that can carry a pasted error message (not tracebacks, warnings, noise, generated code)
EVIDENCE_KINDS = ("plain", "exception", "cpp_error", "printer", "torch_log")
# ExecuTorch's checks that return false to a caller that may try again (executorch#7170: logged, then it ran fine)
SOFT_KINDS = ("et_return_false",)
# the kind of platform.jsonl's messages (runtimes, compilers, linkers, the loader): matched anywhere in a line
PLATFORM = "platform"


class KnownMessage(NamedTuple):
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
    # a wrapper whose family is the one of the message it carries ('CALL_DELEGATE execute failed at instruction {}'):
    # it says that something failed (failure evidence) but not what (its family is not used)
    carrier: bool = False


def _collapse(text: str) -> str:
    return " ".join(text.split())


# a template: its index in the catalogue, its pieces, its literal length and its record (KnownMessage's fields as a
# plain tuple; lookup() makes a KnownMessage of the one it returns)
Template = tuple[int, tuple[str, ...], int, tuple[Any, ...]]


class _Catalogue(NamedTuple):
    """What a lookup reads, as the on-disk cache stores it: the templates grouped by the text a message must start
    with (the first piece, stripped on the left; '' for a template that starts with a field), each group pickled on
    its own, so that a run unpickles only the groups a message can match (all ~9,300 templates take ~25 ms; this
    ~3 ms, the groups one bytes object with the span of each)."""

    anchors: tuple[str, ...]  # see _anchors()
    lengths: tuple[int, ...]  # the lengths of the groups' texts, ascending
    spans: dict[str, tuple[int, int]]  # first piece -> where in ``groups`` its pickled list of templates is
    groups: bytes  # the pickled lists, one after the other; each list in catalogue order


@lru_cache(maxsize=1)
def _catalogue() -> _Catalogue:
    """The catalogue from the on-disk cache of ``library.cache``, keyed by the catalogue files and this module's
    source (a change of either builds anew; parsing the catalogue's ~9,500 lines takes ~0.3 s)."""
    from aoti_trace.library.cache import cached
    from aoti_trace.library.loader import default_rules_dir

    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    return cached([default_rules_dir() / "catalogue"], _build_catalogue, _Catalogue, extra=f"catalogue {code}",
                  suffixes=(".jsonl",))


def _build_catalogue() -> _Catalogue:
    templates = _read_templates()
    groups: dict[str, list[Template]] = {}
    for template in templates:
        # a platform message may start anywhere in a line: its group is the one of templates that start with a field
        first = template[1][0].lstrip() if template[3][7] != PLATFORM else ""
        groups.setdefault(first, []).append(template)
    spans: dict[str, tuple[int, int]] = {}
    blobs: list[bytes] = []
    at = 0
    for first, group in groups.items():
        blobs.append(pickle.dumps(group, protocol=pickle.HIGHEST_PROTOCOL))
        spans[first] = (at, at + len(blobs[-1]))
        at += len(blobs[-1])
    return _Catalogue(_build_anchors(templates), tuple(sorted({len(first) for first in groups})), spans,
                      b"".join(blobs))


@lru_cache(maxsize=4096)
def _group(first: str) -> tuple[Template, ...]:
    """The templates whose first piece (stripped on the left) is ``first``, in catalogue order."""
    catalogue = _catalogue()
    span = catalogue.spans.get(first)
    if span is None:
        return ()
    group: list[Template] = pickle.loads(memoryview(catalogue.groups)[span[0]:span[1]])
    return tuple(group)


def _read_templates() -> tuple[Template, ...]:
    from aoti_trace.library.loader import default_rules_dir

    folder: Path = default_rules_dir() / "catalogue"
    out: list[Template] = []
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
        if not isinstance(m, dict) or not m.get("template"):
            continue
        pieces = tuple(p for p in _collapse(str(m["template"])).split("{}"))
        literal = sum(len(p.strip()) for p in pieces)
        if literal < MIN_LITERAL:
            continue
        files = m.get("files") or ["?"]
        record = (str(m["template"]), str(m.get("exc_type") or ""), str(m.get("family") or ""), str(files[0]),
                  str(m.get("first_version") or ""), str(m.get("last_version") or ""), bool(m.get("warning")),
                  str(m.get("kind") or ""), bool(m.get("internal")), literal, bool(m.get("carrier")))
        out.append((len(out), pieces, literal, record))
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


def lookup(message: str | None) -> KnownMessage | None:
    """The catalogued torch message that ``message`` (an exception's message, without its type) was made from."""
    if not message:
        return None
    msg = _collapse(message[:MAX_MESSAGE])
    # only the templates whose first piece starts the message can match (:func:`_matches`), in catalogue order
    candidates = sorted(t for n in _catalogue().lengths if n <= len(msg) for t in _group(msg[:n]))
    # the most specific match; a carrier only when no other template matches (the message it carries decides)
    best: tuple[int, tuple[Any, ...]] | None = None
    carrier: tuple[int, tuple[Any, ...]] | None = None
    for _i, pieces, literal, record in candidates:
        wrapper = record[10]
        top = carrier if wrapper else best
        if top is not None and literal <= top[0]:
            continue
        matched = _matches_inside(pieces, msg) if record[7] == PLATFORM else _matches(pieces, msg)
        if matched >= MIN_LITERAL and (top is None or matched > top[0]):
            if wrapper:
                carrier = (matched, record)
            else:
                best = (matched, record)
    found = best or carrier
    return KnownMessage(*found[1])._replace(literal=found[0]) if found else None


def is_error(known: KnownMessage | None) -> bool:
    """``known`` is an error a user's run can die of, with enough literal text to be evidence on its own."""
    return known is not None and not known.warning and not known.internal and known.literal >= MIN_EVIDENCE \
        and known.kind not in SOFT_KINDS


def _anchors() -> tuple[str, ...]:
    """For each template that can be evidence, a text every message made from it holds, even one cut at a sentence
    boundary (:func:`_matches`): the first sentence of its first literal piece, else (too short to be selective) of
    its longest piece. A line that contains none of them is not looked up (and the templates are not read)."""
    return _catalogue().anchors


def _build_anchors(templates: tuple[Template, ...]) -> tuple[str, ...]:
    out = set()
    for _i, pieces, _literal, record in templates:
        if is_error(KnownMessage(*record)):
            texts = [p.strip() for p in pieces if p.strip()]
            anchor = texts[0].split(". ")[0]
            if len(anchor) < MIN_ANCHOR:
                anchor = max(texts, key=len).split(". ")[0]
            if len(anchor) >= MIN_ANCHOR:
                out.add(anchor)
    return tuple(sorted(out))


@lru_cache(maxsize=1)
def _anchor_index() -> dict[str, tuple[str, ...]]:
    """The anchors by their first ``MIN_ANCHOR`` characters (every anchor has at least that many)."""
    out: dict[str, list[str]] = {}
    for anchor in _anchors():
        out.setdefault(anchor[:MIN_ANCHOR], []).append(anchor)
    return {head: tuple(group) for head, group in out.items()}


def _holds_anchor(text: str) -> bool:
    """Whether ``text`` contains one of the anchors, as Polars' ``str.contains_any(anchors)`` says: each window of
    ``MIN_ANCHOR`` characters is looked up among the anchors' first characters (linear in the text, which
    error_lines cuts at ``MAX_MESSAGE``)."""
    index = _anchor_index()
    for i in range(len(text) - MIN_ANCHOR + 1):
        group = index.get(text[i:i + MIN_ANCHOR])
        if group is not None and any(text.startswith(anchor, i) for anchor in group):
            return True
    return False


def error_lines(lines: pl.DataFrame) -> pl.DataFrame:
    """Per run, the first line of ``lines`` (the ``lines`` frame) whose message is a catalogued error (:func:`is_error`):
    run_id, path, lineno, text (``lookup(line_message(text))`` is its record). A line at a handled level
    (info, warning, debug) or whose best match is a warning is not one. Linear: a prefilter on the templates' anchors
    (Polars' Aho-Corasick, or :func:`_holds_anchor` for a few lines), then :func:`lookup` (``str.find``) on the
    few lines left."""
    schema = {"run_id": pl.String, "path": pl.String, "lineno": pl.Int64, "text": pl.String}
    if lines.height == 0:
        return pl.DataFrame(schema=schema)
    text = pl.col("text")
    cand = (lines.filter(pl.col("kind").is_in(EVIDENCE_KINDS) & ~pl.col("level").fill_null("").is_in(HANDLED_LEVELS)
                         & (text.str.len_chars() >= MIN_EVIDENCE))
            .select("run_id", "path", "lineno", text.str.slice(0, MAX_MESSAGE).alias("text")))
    if cand.height == 0:  # the catalogue is not even loaded
        return pl.DataFrame(schema=schema)
    texts = cand.get_column("text")
    if cand.height <= SMALL_CANDIDATES:
        holds = pl.Series([_holds_anchor(text) for text in texts.to_list()], dtype=pl.Boolean)
    else:
        holds = texts.str.contains_any(list(_anchors()))
    cand = cand.filter(holds).head(MAX_CANDIDATES)
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
