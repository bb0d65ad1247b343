"""The rule schema: pydantic models for one YAML rule file (``rules/<family>/<name>.yaml``).

Every model forbids unknown keys, so a typo is an error with a ``file:line:column`` (see :mod:`.loader`).
``rule_json_schema()`` exports the JSON Schema written to ``rules/rule.schema.json`` for editors.

The match tree is a discriminated union (``all`` / ``any`` / ``not`` / leaf): pydantic then reports exactly one
precise error for a mistake in a nested node instead of one per union member (rule-design.md §7 #10).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, Union

import polars as pl
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

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
if TYPE_CHECKING:  # a Literal built from SCHEMAS at run time (pydantic validates it); a frame name is a str to mypy
    FrameName: TypeAlias = str
else:
    FrameName = Literal[tuple(SCHEMAS)]

# line kinds a `lines` leaf skips unless it lists them in `include`
# (traceback_code: the source lines a traceback quotes, e.g. `raise RuntimeError(f"Missing out variants: ...")`, which
# repeat an error's wording without being the error)
SKIPPED_LINE_KINDS: tuple[str, ...] = ("noise", "output_code", "traceback_code")

Scalar = Union[str, int, float, bool]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


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


class Leaf(Strict):
    """One predicate on one column of one frame. Exactly one operator."""

    frame: FrameName = Field(description="frame the predicate reads (see docs/frames.md)")
    column: str = Field(description="column of that frame")
    regex: str | None = Field(default=None, description="Rust-dialect regex, also valid in Python re; (?P<name>...) groups")
    contains: str | None = Field(default=None, description="literal substring")
    equals: Scalar | None = Field(default=None, description="exact value")
    in_: list[Scalar] | None = Field(default=None, alias="in", description="one of these values")
    exists: bool | None = Field(default=None, description="true: the cell is not null; false: it is null")
    ignore_case: bool = Field(default=False, description="case-insensitive regex / contains / equals / in (strings)")
    anchor: bool = Field(default=False, description="this leaf locates the finding and supplies the captures")
    include: list[Literal["noise", "output_code", "traceback_code"]] = Field(
        default_factory=list,
        description="`lines` leaves skip rows whose kind is noise, output_code or traceback_code unless listed here",
    )

    @model_validator(mode="after")
    def _check(self) -> Leaf:
        ops = [op for op in ("regex", "contains", "equals", "in_", "exists") if getattr(self, op) is not None]
        if len(ops) != 1:
            names = [o.rstrip("_") for o in ops]
            raise ValueError(f"a leaf needs exactly one of regex, contains, equals, in, exists; got {names or 'none'}")
        cols = SCHEMAS[self.frame][1]
        if self.column not in cols:
            raise ValueError(f"frame {self.frame!r} has no column {self.column!r}; columns: {', '.join(cols)}")
        dtype = cols[self.column][0]
        if (self.regex is not None or self.contains is not None) and dtype != pl.String:
            raise ValueError(f"regex/contains need a string column; {self.frame}.{self.column} is {dtype}")
        if self.regex is not None:
            check_regex(self.regex)
        values = [self.equals] if self.equals is not None else list(self.in_ or [])
        for value in values:
            if not _fits(value, dtype):
                raise ValueError(f"{value!r} cannot equal a value of {self.frame}.{self.column} ({dtype})")
        if self.include and self.frame != "lines":
            raise ValueError("include applies to `lines` leaves only")
        return self

    @property
    def operator(self) -> str:
        return next(op for op in ("regex", "contains", "equals", "in_", "exists") if getattr(self, op) is not None)


def _fits(value: Any, dtype: Any) -> bool:
    if dtype == pl.String:
        return isinstance(value, str)
    if dtype == pl.Boolean:
        return isinstance(value, bool)
    if dtype.is_integer():
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return next((k for k in ("all", "any", "not") if k in value), "leaf")
    kinds: dict[type[object], str] = {All: "all", AnyOf: "any", Not: "not"}
    return kinds.get(type(value), "leaf")


class All(Strict):
    all: list[Node] = Field(min_length=1)
    scope: Literal["run", "row"] = Field(default="run", description="row: all children true on the same row")


class AnyOf(Strict):
    any: list[Node] = Field(min_length=1)
    scope: Literal["run", "row"] = "run"


class Not(Strict):
    not_: Node = Field(alias="not")
    scope: Literal["run", "row"] = "run"


Node = Annotated[
    Union[
        Annotated[Leaf, Tag("leaf")],
        Annotated[All, Tag("all")],
        Annotated[AnyOf, Tag("any")],
        Annotated[Not, Tag("not")],
    ],
    Discriminator(_kind),
]

for _model in (All, AnyOf, Not):
    _model.model_rebuild()


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


class TorchRange(Strict):
    min: str | None = Field(default=None, description="lowest torch version (inclusive), e.g. '2.5'")
    max: str | None = Field(default=None, description="highest torch version (inclusive, by prefix: '2.12' covers 2.12.x)")

    @field_validator("min", "max")
    @classmethod
    def _version(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"\d+(?:\.\d+){0,2}", v):
            raise ValueError(f"torch version must look like '2', '2.5' or '2.5.1', got {v!r}")
        return v


class ColumnRef(Strict):
    column: str = Field(description="take this column of the anchor row")


class Example(BaseModel):
    """An inline test: frames given as rows (any frame name), the expected verdict and fields."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str = Field(pattern=NAME_RE)
    expect: Literal["match", "no_match"]
    origin: str | None = Field(default=None, description="where the text was copied from (capture, issue URL, doc §)")
    xfail: str | None = Field(default=None, description="known gap: the reason; does not fail `rules test`")
    fields: dict[str, str] | None = Field(default=None, description="expected extracted fields (subset)")
    lines: str | list[dict[str, Any]] | None = Field(
        default=None, description="stderr text (one `lines` row per line) or `lines` rows"
    )
    stdout: str | None = Field(default=None, description="stdout text (one `lines` row per line, stream stdout)")

    @model_validator(mode="after")
    def _frames(self) -> Example:
        for key, value in (self.model_extra or {}).items():
            if key not in SCHEMAS:
                raise ValueError(f"unknown example key {key!r}; frames: {', '.join(SCHEMAS)}")
            if not isinstance(value, list) or not all(isinstance(r, dict) for r in value):
                raise ValueError(f"example frame {key!r} must be a list of row mappings")
            cols = SCHEMAS[key][1]
            for row in value:
                bad = [c for c in row if c not in cols]
                if bad:
                    raise ValueError(f"frame {key!r} has no column {bad[0]!r}")
        return self

    def frame_rows(self) -> dict[str, list[dict[str, Any]]]:
        return dict(self.model_extra or {})


class Rule(Strict):
    """One rule file."""

    schema_: int = Field(default=SCHEMA_VERSION, alias="schema", description="rule-format version")
    id: str = Field(pattern=ID_RE, description="immutable id, never reused, e.g. AOTI-E001")
    name: str = Field(pattern=NAME_RE, description="kebab-case, unique; the guide and YAML file are named after it")
    title: str = Field(max_length=120, description="one line")
    description: str = Field(max_length=1024)
    family: Family = Field(description="closed vocabulary: aoti_trace.model.vocabulary.FAMILIES")
    severity: Severity
    role: Role = Field(description="cause | symptom | carrier | noise; symptoms, carriers and noise never outrank a cause")
    precision: Precision
    priority: int = Field(default=0, description="tie-breaker after precision: higher wins")
    status: Status
    version: int = Field(ge=1, description="bumped when match or extract change")
    replaced_by: str | None = Field(default=None, pattern=ID_RE, description="required when status is deprecated")
    torch: TorchRange | None = Field(default=None, description="apply only in this torch range; outside it the rule is skipped")
    match: Node
    occurrence: Occurrence = Field(default="last", description="which anchor row makes the finding")
    extract: dict[str, str | ColumnRef] = Field(
        default_factory=dict, description="field -> capture group of the anchor regex (or several, 'a|b': the first that captured), or "
                           "{column: name} of the anchor row"
    )
    message: str = Field(description="one line; {{field}} placeholders only")
    remedy: str = Field(description="markdown; {{field}} placeholders only")
    guide: str | None = Field(default=None, description="path under rules/, e.g. guides/<family>/<name>.md (must exist)")
    env_flags: dict[str, str] = Field(default_factory=dict, description="VAR -> value for the suggested re-run")
    references: list[str] = Field(default_factory=list)
    supersedes: list[str] = Field(default_factory=list, description="ids suppressed when this rule fires on the same run")
    examples: list[Example] = Field(default_factory=list)

    @field_validator("schema_")
    @classmethod
    def _schema(cls, v: int) -> int:
        if v > SCHEMA_VERSION:
            raise ValueError(f"rule format {v} is newer than this aoti-trace understands ({SCHEMA_VERSION}); upgrade aoti-trace")
        return v

    @field_validator("env_flags")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            if not re.fullmatch(ENV_RE, key):
                raise ValueError(f"env_flags key {key!r} is not an environment variable name")
        return v

    @field_validator("supersedes")
    @classmethod
    def _ids(cls, v: list[str]) -> list[str]:
        for rid in v:
            if not re.fullmatch(ID_RE, rid):
                raise ValueError(f"supersedes entry {rid!r} is not a rule id")
        return v

    @field_validator("message", "remedy")
    @classmethod
    def _template(cls, v: str) -> str:
        if BAD_TEMPLATE_RE.search(v):
            raise ValueError("templates allow only {{field}} placeholders")
        return v

    @model_validator(mode="after")
    def _cross(self) -> Rule:
        anchor = self.anchor_leaf()  # raises for 0 positive leaves / several anchors / negated anchor
        for field, ref in self.extract.items():
            if isinstance(ref, ColumnRef):
                if ref.column not in SCHEMAS[anchor.frame][1]:
                    raise ValueError(f"extract {field!r}: frame {anchor.frame!r} has no column {ref.column!r}")
                continue
            if anchor.regex is None:
                raise ValueError(f"extract {field!r} names group {ref!r} but the anchor leaf has no regex")
            groups = re.compile(anchor.regex).groupindex
            for name in ref.split("|"):
                if name not in groups:
                    raise ValueError(
                        f"extract {field!r}: group {name!r} is not in the anchor regex "
                        f"(groups: {', '.join(groups) or 'none'})"
                    )
        for where in ("message", "remedy"):
            unknown = [p for p in PLACEHOLDER_RE.findall(getattr(self, where)) if p not in self.extract]
            if unknown:
                raise ValueError(f"{where} uses {{{{{unknown[0]}}}}} but extract has no field {unknown[0]!r}")
        if self.status == "deprecated" and not self.replaced_by:
            raise ValueError("a deprecated rule needs replaced_by")
        if self.role == "noise" and self.severity == "error":
            raise ValueError("a noise rule cannot have severity error")
        if self.id in self.supersedes:
            raise ValueError("a rule cannot supersede itself")
        self._check_scopes(self.match, "run")
        return self

    def _check_scopes(self, node: Any, outer: str) -> None:
        scope = getattr(node, "scope", None)
        if outer == "row" and scope == "run" and not isinstance(node, Leaf) and "scope" in node.model_fields_set:
            raise ValueError("scope: run cannot be nested inside scope: row")
        if scope == "row" and outer == "run":
            frames = {leaf.frame for leaf, _ in leaves(node)}
            if len(frames) != 1:
                raise ValueError(f"scope: row needs all its leaves on one frame, got {sorted(frames)}")
        for child in children(node):
            self._check_scopes(child, "row" if scope == "row" or outer == "row" else "run")

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


def rule_json_schema() -> dict[str, Any]:
    """JSON Schema of a rule file (``rules/rule.schema.json``)."""
    schema = Rule.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://github.com/aoti-trace/aoti-trace/rules/rule.schema.json"
    return schema


assert set(FAMILIES) == set(Family.__args__)  # type: ignore[attr-defined]
