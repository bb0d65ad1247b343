"""The rule schema: the dataclasses of one YAML rule file (``rules/<family>/<name>.yaml``), as the engine uses them.

These classes are the one definition of a rule. They do not validate: a rule file is validated by the pydantic
models :mod:`.validation` derives from them (every model forbids unknown keys, so a typo is an error with a
``file:line:column``, see :mod:`aoti_trace.library.loader`), and a validated rule is turned into these classes, which
is what the rule cache stores. So an analysis whose rule set comes from the cache does not import pydantic. Each
field's ``metadata`` holds the keyword arguments of its pydantic ``Field`` (alias, description, constraints); the
JSON Schema written to ``rules/rule.schema.json`` for editors is :func:`.validation.rule_json_schema`.

The match tree is a union of ``all`` / ``any`` / ``not`` / leaf (:data:`Node`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, Union

from aoti_trace.model.vocabulary import FAMILIES, PRECISIONS, ROLES, Family, Precision, Role, Severity
from aoti_trace.model.frames import SCHEMAS

SCHEMA_VERSION = 1

ID_RE = r"^AOTI-[A-Z]\d{3}$"
NAME_RE = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
ENV_RE = r"^[A-Z_][A-Z0-9_]*$"
PLACEHOLDER_RE = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")
# '{{' not followed by a plain '{{name}}' placeholder: templates allow placeholders only
BAD_TEMPLATE_RE = re.compile(r"\{\{(?!\s*[A-Za-z_]\w*\s*\}\})")

Status = Literal["experimental", "test", "stable", "deprecated"]
Occurrence = Literal["last", "first", "all"]
Scope = Literal["run", "row"]
if TYPE_CHECKING:  # a Literal built from SCHEMAS at run time (pydantic validates it); a frame name is a str to mypy
    FrameName: TypeAlias = str
else:
    FrameName = Literal[tuple(SCHEMAS)]

# line kinds a `lines` leaf skips unless it lists them in `include`
# (traceback_code: the source lines a traceback quotes, e.g. `raise RuntimeError(f"Missing out variants: ...")`, which
# repeat an error's wording without being the error)
SKIPPED_LINE_KINDS: tuple[str, ...] = ("noise", "output_code", "traceback_code")

Scalar = Union[str, int, float, bool]


def check_regex(pattern: str) -> None:
    """Raise ``ValueError`` unless ``pattern`` compiles in Python ``re`` and in Rust ``regex`` (Polars)."""
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"regex rejected by Python re: {exc}") from None
    from aoti_trace.engine.query import rust_regex_error

    err = rust_regex_error(pattern)
    if err:
        raise ValueError(f"regex rejected by Polars (Rust regex): {err}")


@dataclass(frozen=True, kw_only=True)
class Leaf:
    """One predicate on one column of one frame. Exactly one operator."""

    frame: FrameName = field(metadata={"description": "frame the predicate reads (see docs/frames.md)"})
    column: str = field(metadata={"description": "column of that frame"})
    regex: str | None = field(default=None, metadata={
        "description": "Rust-dialect regex, also valid in Python re; (?P<name>...) groups"})
    contains: str | None = field(default=None, metadata={"description": "literal substring"})
    equals: Scalar | None = field(default=None, metadata={"description": "exact value"})
    in_: list[Scalar] | None = field(default=None, metadata={"alias": "in", "description": "one of these values"})
    exists: bool | None = field(default=None, metadata={
        "description": "true: the cell is not null; false: it is null"})
    ignore_case: bool = field(default=False, metadata={
        "description": "case-insensitive regex / contains / equals / in (strings)"})
    anchor: bool = field(default=False, metadata={
        "description": "this leaf locates the finding and supplies the captures"})
    include: list[Literal["noise", "output_code", "traceback_code"]] = field(default_factory=list, metadata={
        "description": "`lines` leaves skip rows whose kind is noise, output_code or traceback_code unless listed here"})

    @property
    def operator(self) -> str:
        return next(op for op in ("regex", "contains", "equals", "in_", "exists") if getattr(self, op) is not None)


@dataclass(frozen=True, kw_only=True)
class All:
    all: list[Node] = field(metadata={"min_length": 1})
    scope: Scope = field(default="run", metadata={"description": "row: all children true on the same row"})


@dataclass(frozen=True, kw_only=True)
class AnyOf:
    any: list[Node] = field(metadata={"min_length": 1})
    scope: Scope = "run"


@dataclass(frozen=True, kw_only=True)
class Not:
    not_: Node = field(metadata={"alias": "not"})
    scope: Scope = "run"


Node = Union[Leaf, All, AnyOf, Not]


def children(node: Any) -> list[Any]:
    if isinstance(node, All):
        return list(node.all)
    if isinstance(node, AnyOf):
        return list(node.any)
    if isinstance(node, Not):
        return [node.not_]
    return []


def leaves(node: Any, negated: bool = False) -> list[tuple[Leaf, bool]]:
    """All leaves of ``node`` with whether they sit under an odd number of ``not``."""
    if isinstance(node, Leaf):
        return [(node, negated)]
    neg = negated ^ isinstance(node, Not)
    return [pair for child in children(node) for pair in leaves(child, neg)]


@dataclass(frozen=True, kw_only=True)
class TorchRange:
    min: str | None = field(default=None, metadata={"description": "lowest torch version (inclusive), e.g. '2.5'"})
    max: str | None = field(default=None, metadata={
        "description": "highest torch version (inclusive, by prefix: '2.12' covers 2.12.x)"})


@dataclass(frozen=True, kw_only=True)
class ColumnRef:
    column: str = field(metadata={"description": "take this column of the anchor row"})


@dataclass(frozen=True, kw_only=True)
class Example:
    """An inline test: frames given as rows (any frame name), the expected verdict and fields."""

    name: str = field(metadata={"pattern": NAME_RE})
    expect: Literal["match", "no_match"]
    origin: str | None = field(default=None, metadata={
        "description": "where the text was copied from (capture, issue URL, doc §)"})
    xfail: str | None = field(default=None, metadata={
        "description": "known gap: the reason; does not fail `rules test`"})
    fields: dict[str, str] | None = field(default=None, metadata={"description": "expected extracted fields (subset)"})
    lines: str | list[dict[str, Any]] | None = field(default=None, metadata={
        "description": "stderr text (one `lines` row per line) or `lines` rows"})
    stdout: str | None = field(default=None, metadata={
        "description": "stdout text (one `lines` row per line, stream stdout)"})
    # the example's other keys: frame name -> rows (metadata model.derive.EXTRA: no key of the rule file itself)
    frames: dict[str, list[dict[str, Any]]] = field(default_factory=dict, metadata={"extra": True})

    def frame_rows(self) -> dict[str, list[dict[str, Any]]]:
        return dict(self.frames)


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One rule file."""

    schema_: int = field(default=SCHEMA_VERSION, metadata={"alias": "schema", "description": "rule-format version"})
    id: str = field(metadata={"pattern": ID_RE, "description": "immutable id, never reused, e.g. AOTI-E001"})
    name: str = field(metadata={
        "pattern": NAME_RE, "description": "kebab-case, unique; the guide and YAML file are named after it"})
    title: str = field(metadata={"max_length": 120, "description": "one line"})
    description: str = field(metadata={"max_length": 1024})
    family: Family = field(metadata={"description": "closed vocabulary: aoti_trace.model.vocabulary.FAMILIES"})
    severity: Severity
    role: Role = field(metadata={
        "description": "cause | symptom | carrier | noise; symptoms, carriers and noise never outrank a cause"})
    precision: Precision
    priority: int = field(default=0, metadata={"description": "tie-breaker after precision: higher wins"})
    status: Status
    version: int = field(metadata={"ge": 1, "description": "bumped when match or extract change"})
    replaced_by: str | None = field(default=None, metadata={
        "pattern": ID_RE, "description": "required when status is deprecated"})
    torch: TorchRange | None = field(default=None, metadata={
        "description": "apply only in this torch range; outside it the rule is skipped"})
    match: Node
    occurrence: Occurrence = field(default="last", metadata={"description": "which anchor row makes the finding"})
    extract: dict[str, str | ColumnRef] = field(default_factory=dict, metadata={
        "description": "field -> capture group of the anchor regex (or several, 'a|b': the first that captured), or "
                       "{column: name} of the anchor row"})
    message: str = field(metadata={"description": "one line; {{field}} placeholders only"})
    remedy: str = field(metadata={"description": "markdown; {{field}} placeholders only"})
    guide: str | None = field(default=None, metadata={
        "description": "path under rules/, e.g. guides/<family>/<name>.md (must exist)"})
    env_flags: dict[str, str] = field(default_factory=dict, metadata={
        "description": "VAR -> value for the suggested re-run"})
    references: list[str] = field(default_factory=list)
    supersedes: list[str] = field(default_factory=list, metadata={
        "description": "ids suppressed when this rule fires on the same run"})
    examples: list[Example] = field(default_factory=list)

    def anchor_leaf(self) -> Leaf:
        """The leaf marked ``anchor: true``, else the first leaf not under ``not``."""
        pairs = leaves(self.match)
        marked = [(leaf, neg) for leaf, neg in pairs if leaf.anchor]
        if len(marked) > 1:
            raise ValueError("only one leaf may be the anchor")
        if marked:
            if marked[0][1]:
                raise ValueError("the anchor leaf cannot sit under `not`")
            return marked[0][0]
        positive = [leaf for leaf, neg in pairs if not neg]
        if not positive:
            raise ValueError("the match tree needs at least one leaf not under `not`")
        return positive[0]

    def examples_of(self, expect: str) -> list[Example]:
        return [e for e in self.examples if e.expect == expect]


assert set(FAMILIES) == set(Family.__args__)  # type: ignore[attr-defined]
