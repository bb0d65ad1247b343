"""Validating rule files: the pydantic models of the rule schema's dataclasses (:mod:`.schema`), with their checks.

The models are derived from the dataclasses by :func:`aoti_trace.model.derive.derive` (one definition of each field);
what they add is the checks: every model forbids unknown keys, so a typo is an error with a ``file:line:column`` (see
:mod:`aoti_trace.library.loader`); a leaf has exactly one operator on a column of its frame and a regex both Python
and Polars accept; a rule's extract, placeholders, anchor and scopes agree. :func:`validate_rule` returns the
dataclasses. Only what parses rule files (a rule-cache miss, ``rules lint``) or exports ``rules/rule.schema.json``
imports this module, and with it pydantic.

The match tree is a discriminated union (``all`` / ``any`` / ``not`` / leaf): pydantic then reports exactly one
precise error for a mistake in a nested node instead of one per union member (rule-design.md §7 #10).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias, Union

import polars as pl
from pydantic import ConfigDict, Discriminator, Tag, field_validator, model_validator

from aoti_trace.engine.ruleset import IgnoreEntry
from aoti_trace.engine.schema import (
    BAD_TEMPLATE_RE,
    ENV_RE,
    ID_RE,
    PLACEHOLDER_RE,
    SCHEMA_VERSION,
    All,
    AnyOf,
    ColumnRef,
    Example,
    Leaf,
    Node,
    Not,
    Rule,
    TorchRange,
    check_regex,
    leaves,
)
from aoti_trace.model.derive import derive, to_dataclass
from aoti_trace.model.frames import SCHEMAS

STRICT = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _check_leaf(self: Any) -> Any:
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


def _fits(value: Any, dtype: Any) -> bool:
    if dtype == pl.String:
        return isinstance(value, str)
    if dtype == pl.Boolean:
        return isinstance(value, bool)
    if dtype.is_integer():
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


LeafModel = derive(Leaf, __name__, STRICT, validators={"_check": model_validator(mode="after")(_check_leaf)})
AllModel = derive(All, __name__, STRICT, {Node: "NodeModel"})
AnyOfModel = derive(AnyOf, __name__, STRICT, {Node: "NodeModel"})
NotModel = derive(Not, __name__, STRICT, {Node: "NodeModel"})


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return next((k for k in ("all", "any", "not") if k in value), "leaf")
    # the models, and the dataclasses (a rule validated from its attributes: RuleModel.model_validate(rule,
    # from_attributes=True))
    kinds: dict[type[object], str] = {AllModel: "all", AnyOfModel: "any", NotModel: "not", All: "all", AnyOf: "any",
                                      Not: "not"}
    return kinds.get(type(value), "leaf")


if TYPE_CHECKING:  # the models are values to mypy (built at run time)
    NodeModel: TypeAlias = Any
else:
    NodeModel = Annotated[
        Union[
            Annotated[LeafModel, Tag("leaf")],
            Annotated[AllModel, Tag("all")],
            Annotated[AnyOfModel, Tag("any")],
            Annotated[NotModel, Tag("not")],
        ],
        Discriminator(_kind),
    ]

for _model in (AllModel, AnyOfModel, NotModel):
    _model.model_rebuild(_types_namespace={"NodeModel": NodeModel})


def _version(cls: Any, v: str | None) -> str | None:
    if v is not None and not re.fullmatch(r"\d+(?:\.\d+){0,2}", v):
        raise ValueError(f"torch version must look like '2', '2.5' or '2.5.1', got {v!r}")
    return v


TorchRangeModel = derive(TorchRange, __name__, STRICT,
                         validators={"_version": field_validator("min", "max")(_version)})
ColumnRefModel = derive(ColumnRef, __name__, STRICT)


def _frames(self: Any) -> Any:
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


ExampleModel = derive(Example, __name__, ConfigDict(frozen=True),
                      validators={"_frames": model_validator(mode="after")(_frames)})


def _schema(cls: Any, v: int) -> int:
    if v > SCHEMA_VERSION:
        raise ValueError(f"rule format {v} is newer than this aoti-trace understands ({SCHEMA_VERSION}); upgrade aoti-trace")
    return v


def _env(cls: Any, v: dict[str, str]) -> dict[str, str]:
    for key in v:
        if not re.fullmatch(ENV_RE, key):
            raise ValueError(f"env_flags key {key!r} is not an environment variable name")
    return v


def _ids(cls: Any, v: list[str]) -> list[str]:
    for rid in v:
        if not re.fullmatch(ID_RE, rid):
            raise ValueError(f"supersedes entry {rid!r} is not a rule id")
    return v


def _template(cls: Any, v: str) -> str:
    if BAD_TEMPLATE_RE.search(v):
        raise ValueError("templates allow only {{field}} placeholders")
    return v


def _cross(self: Any) -> Any:
    rule: Rule = to_dataclass(self)
    anchor = rule.anchor_leaf()  # raises for 0 positive leaves / several anchors / negated anchor
    for name, ref in rule.extract.items():
        if isinstance(ref, ColumnRef):
            if ref.column not in SCHEMAS[anchor.frame][1]:
                raise ValueError(f"extract {name!r}: frame {anchor.frame!r} has no column {ref.column!r}")
            continue
        if anchor.regex is None:
            raise ValueError(f"extract {name!r} names group {ref!r} but the anchor leaf has no regex")
        groups = re.compile(anchor.regex).groupindex
        for group in ref.split("|"):
            if group not in groups:
                raise ValueError(
                    f"extract {name!r}: group {group!r} is not in the anchor regex "
                    f"(groups: {', '.join(groups) or 'none'})"
                )
    for where in ("message", "remedy"):
        unknown = [p for p in PLACEHOLDER_RE.findall(getattr(rule, where)) if p not in rule.extract]
        if unknown:
            raise ValueError(f"{where} uses {{{{{unknown[0]}}}}} but extract has no field {unknown[0]!r}")
    if rule.status == "deprecated" and not rule.replaced_by:
        raise ValueError("a deprecated rule needs replaced_by")
    if rule.role == "noise" and rule.severity == "error":
        raise ValueError("a noise rule cannot have severity error")
    if rule.id in rule.supersedes:
        raise ValueError("a rule cannot supersede itself")
    _check_scopes(self.match, "run")
    return self


def _check_scopes(node: Any, outer: str) -> None:
    """``scope: row`` nodes: all leaves on one frame, no ``scope: run`` written inside (on the models: whether a
    scope was written is known there only)."""
    scope = getattr(node, "scope", None)
    if outer == "row" and scope == "run" and "scope" in node.model_fields_set:
        raise ValueError("scope: run cannot be nested inside scope: row")
    if scope == "row" and outer == "run":
        frames = {leaf.frame for leaf, _ in leaves(to_dataclass(node))}
        if len(frames) != 1:
            raise ValueError(f"scope: row needs all its leaves on one frame, got {sorted(frames)}")
    key = {AllModel: "all", AnyOfModel: "any", NotModel: "not_"}.get(type(node))
    kids = [] if key is None else getattr(node, key)
    for child in kids if isinstance(kids, list) else [kids]:
        _check_scopes(child, "row" if scope == "row" or outer == "row" else "run")


RuleModel = derive(
    Rule, __name__, STRICT, {Node: NodeModel, TorchRange: TorchRangeModel, ColumnRef: ColumnRefModel, Example: ExampleModel},
    validators={
        "_schema": field_validator("schema_")(_schema),
        "_env": field_validator("env_flags")(_env),
        "_ids": field_validator("supersedes")(_ids),
        "_template": field_validator("message", "remedy")(_template),
        "_cross": model_validator(mode="after")(_cross),
    },
)
IgnoreEntryModel = derive(IgnoreEntry, __name__, ConfigDict(extra="forbid", frozen=True))


def validate_rule(data: Any) -> Rule:
    """The rule of a rule file's data; raises pydantic's ``ValidationError``."""
    rule: Rule = to_dataclass(RuleModel.model_validate(data))
    return rule


def validate_ignore(data: Any) -> IgnoreEntry:
    """One entry of ``ignore.yaml``; raises pydantic's ``ValidationError``."""
    entry: IgnoreEntry = to_dataclass(IgnoreEntryModel.model_validate(data))
    return entry


def rule_json_schema() -> dict[str, Any]:
    """JSON Schema of a rule file (``rules/rule.schema.json``)."""
    schema = RuleModel.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://github.com/aoti-trace/aoti-trace/rules/rule.schema.json"
    return schema
