"""A loaded rule set: the rules, the ignore list, the fragments and where each rule came from (the data the engine
evaluates; :mod:`aoti_trace.library.loader` reads it from rule folders)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from aoti_trace.engine.schema import NAME_RE, Rule


@dataclass(frozen=True, kw_only=True)
class IgnoreEntry:
    """One entry of ``ignore.yaml``: lines this regex matches are benign (``lines.kind`` noise). Validated by
    :func:`aoti_trace.engine.validation.validate_ignore`."""

    name: str = field(metadata={"pattern": NAME_RE})
    regex: str
    why: str
    origin: str | None = None


@dataclass
class RuleSet:
    """Loaded rules plus the ignore list and where each rule came from."""

    rules: list[Rule] = field(default_factory=list)
    root: Path | None = None  # the rules folder (guides are relative to it)
    paths: dict[str, Path] = field(default_factory=dict)  # rule id -> file
    ignore: list[IgnoreEntry] = field(default_factory=list)
    fragments: dict[str, str] = field(default_factory=dict)
    roots: dict[str, Path] = field(default_factory=dict)  # rule id -> its folder, when it is not ``root``
    literals: dict[str, tuple[str, ...] | None] = field(default_factory=dict)  # regex -> its required literals (model.literal)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def get(self, key: str) -> Rule | None:
        """A rule by id (case-insensitive) or name."""
        return next((r for r in self.rules if r.id == key.upper() or r.name == key), None)

    def guide_path(self, rule: Rule) -> Path | None:
        root = self.roots.get(rule.id, self.root)
        if rule.guide is None or root is None:
            return None
        return root / rule.guide
