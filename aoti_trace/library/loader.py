"""Load rule files from disk: YAML with positions, ``%{FRAGMENT}`` interpolation, validation, ``file:line:column`` errors.

Layout of a rules folder (the repository's ``rules/``, or ``aoti_trace/_rules`` in an installed wheel)::

    rules/<family>/<name>.yaml     one rule per file
    rules/fragments.yaml           {fragments: {NAME: regex}}  interpolated as %{NAME} into rule regexes
    rules/ignore.yaml              {ignore: [{name, regex, why, origin}]}  benign lines -> lines.kind = "noise"
    rules/guides/<family>/<name>.md
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from aoti_trace.model.literal import required_literals
from aoti_trace.engine.ruleset import IgnoreEntry, RuleSet
from aoti_trace.engine.schema import Rule, check_regex, leaves
from aoti_trace.model.errors import RuleError

FRAGMENT_RE = re.compile(r"%\{([A-Z][A-Z0-9_]*)\}")
SPECIAL_FILES = ("fragments.yaml", "ignore.yaml")
RULES_ENV = "AOTI_TRACE_RULES"  # extra rule folders, os.pathsep-separated, added to the built-in library

if TYPE_CHECKING:
    # imported where a rule file is parsed: a cached rule set needs no YAML and no pydantic (start-up)
    import yaml
    from pydantic import ValidationError

# what every `rules_path` argument accepts: a rules folder or file, an already loaded RuleSet, or None (the built-in
# library; see load_rules)
RulesSource: TypeAlias = "str | Path | RuleSet | None"


def default_rules_dir() -> Path:
    """``aoti_trace/_rules`` in an installed wheel, else the checkout's top-level ``rules/``."""
    pkg = Path(__file__).resolve().parents[1]
    for candidate in (pkg / "_rules", pkg.parent / "rules"):
        if candidate.is_dir():
            return candidate
    raise RuleError(f"no rules folder found (looked for {pkg / '_rules'} and {pkg.parent / 'rules'})")


# ---------------------------------------------------------------------------------------------- YAML + positions


def _parse(path: Path) -> tuple[Any, yaml.Node | None]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleError(f"{path}:1:1: cannot read rule file: {exc}") from None
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)  # libyaml when PyYAML has it (~20x faster)
    try:
        node = loader.get_single_node()  # one parse: the nodes keep positions, the data is built from them
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else f"{path}:1:1"
        raise RuleError(f"{where}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise RuleError(f"{path}:1:1: invalid YAML: {exc}") from None
    finally:
        loader.dispose()
    return data, node


def _child(node: yaml.Node | None, part: Any, key_node: bool = False) -> yaml.Node | None:
    import yaml

    if isinstance(node, yaml.MappingNode) and isinstance(part, str):
        for k, v in node.value:
            if k.value == part:
                found: yaml.Node = k if key_node else v
                return found
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        item: yaml.Node = node.value[part]
        return item
    return None


def _locate(root: yaml.Node | None, loc: tuple[Any, ...], extra_key: bool = False) -> yaml.Node | None:
    """Walk pydantic's ``loc`` down the YAML node tree; skip parts that are not keys (discriminator tags)."""
    node = root
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        nxt = _child(node, part, key_node=extra_key and last)
        if nxt is not None:
            node = nxt
    return node


def _mark(path: Path, node: yaml.Node | None) -> str:
    if node is None:
        return f"{path}:1:1"
    return f"{path}:{node.start_mark.line + 1}:{node.start_mark.column + 1}"


# keys a rule-level (model validator) message may be about: point at that key instead of the file start
_TOPIC_KEYS = ("extract", "message", "remedy", "replaced_by", "severity", "supersedes", "scope", "anchor", "match")


def _schema_error(path: Path, root: yaml.Node | None, exc: ValidationError) -> RuleError:
    err = exc.errors(include_url=False)[0]
    loc = tuple(err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    extra = err["type"] == "extra_forbidden"
    node = _locate(root, loc, extra_key=extra)
    import yaml

    if err["type"] == "value_error" and isinstance(node, yaml.MappingNode):
        words = re.findall(r"[a-z_]+", msg)
        topic = next((w for w in words[:3] if w in _TOPIC_KEYS), None)
        if topic and topic != "match" and _child(node, topic) is not None:
            node = _child(node, topic)
    if extra:
        msg = f"unknown key {loc[-1]!r}"
        loc = loc[:-1]
    label = ".".join(str(p) for p in _readable_loc(loc))
    return RuleError(f"{_mark(path, node)}: {label + ': ' if label else ''}{msg}")


def _readable_loc(loc: tuple[Any, ...]) -> list[Any]:
    """Drop the discriminator tags pydantic inserts (`('all', 'all', 0, 'leaf', 'regx')` -> `all.0.regx`)."""
    out: list[Any] = []
    for i, part in enumerate(loc):
        if part == "leaf":
            continue
        if part in ("all", "any", "not") and i + 1 < len(loc) and loc[i + 1] == part:
            continue
        out.append(part)
    return out


# ---------------------------------------------------------------------------------------------- fragments


def _interpolate(data: Any, fragments: dict[str, str], path: Path, root: yaml.Node | None, loc: tuple[Any, ...] = ()) -> Any:
    if isinstance(data, dict):
        out = {}
        for k, v in data.items():
            if k == "regex" and isinstance(v, str):
                def sub(m: re.Match[str]) -> str:
                    if m[1] not in fragments:
                        node = _locate(root, (*loc, k))
                        raise RuleError(f"{_mark(path, node)}: unknown fragment %{{{m[1]}}} (fragments.yaml has: "
                                        f"{', '.join(sorted(fragments)) or 'none'})")
                    return fragments[m[1]]
                out[k] = FRAGMENT_RE.sub(sub, v)
            else:
                out[k] = _interpolate(v, fragments, path, root, (*loc, k))
        return out
    if isinstance(data, list):
        return [_interpolate(v, fragments, path, root, (*loc, i)) for i, v in enumerate(data)]
    return data


def load_fragments(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    data, root = _parse(path)
    frags = (data or {}).get("fragments") if isinstance(data, dict) else None
    if not isinstance(frags, dict) or set(data) - {"fragments"}:
        raise RuleError(f"{path}:1:1: expected a mapping with one key 'fragments' (NAME: regex)")
    for name, pattern in frags.items():
        node = _locate(root, ("fragments", name))
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", str(name)) or not isinstance(pattern, str):
            raise RuleError(f"{_mark(path, node)}: fragment names are UPPER_CASE and values are regex strings")
        try:
            check_regex(pattern)
        except ValueError as exc:
            raise RuleError(f"{_mark(path, node)}: fragment {name}: {exc}") from None
        if re.compile(pattern).groups:
            raise RuleError(f"{_mark(path, node)}: fragment {name} must not define capture groups; use (?:...)")
    return {str(k): v for k, v in frags.items()}


def load_ignore(path: Path) -> list[IgnoreEntry]:
    if not path.is_file():
        return []
    data, root = _parse(path)
    items = data.get("ignore") if isinstance(data, dict) else None
    if not isinstance(items, list) or set(data) - {"ignore"}:
        raise RuleError(f"{path}:1:1: expected a mapping with one key 'ignore' (a list of {{name, regex, why}})")
    from pydantic import ValidationError

    from aoti_trace.engine.validation import validate_ignore

    out: list[IgnoreEntry] = []
    for i, item in enumerate(items):
        node = _locate(root, ("ignore", i))
        try:
            entry = validate_ignore(item)
            check_regex(entry.regex)
        except ValidationError as exc:
            raise _schema_error(path, node, exc) from None
        except ValueError as exc:
            raise RuleError(f"{_mark(path, _child(node, 'regex'))}: {exc}") from None
        if re.compile(entry.regex).groups:
            raise RuleError(f"{_mark(path, _child(node, 'regex'))}: ignore patterns must not define capture groups")
        out.append(entry)
    return out


# ---------------------------------------------------------------------------------------------- rules


def rule_files(path: Path) -> list[Path]:
    """Rule files under ``path`` (a folder) or ``[path]`` (a file): every *.yaml / *.yml except the special files."""
    if path.is_file():
        return [path]
    return sorted(
        p
        for p in path.rglob("*")
        if p.suffix in (".yaml", ".yml") and p.is_file() and p.name not in SPECIAL_FILES
        and "guides" not in p.relative_to(path).parts
    )


def load_rule_file(path: Path, fragments: dict[str, str] | None = None) -> Rule:
    """Validate one rule file; raise :class:`RuleError` with ``file:line:column``."""
    data, root = _parse(path)
    if not isinstance(data, dict):
        raise RuleError(f"{path}:1:1: a rule file must be a YAML mapping")
    data = _interpolate(data, fragments or {}, path, root)
    from pydantic import ValidationError

    from aoti_trace.engine.validation import validate_rule

    try:
        return validate_rule(data)
    except ValidationError as exc:
        raise _schema_error(path, root, exc) from None


def _root_for(path: Path) -> Path:
    """The rules folder a path belongs to: nearest folder (itself or above) with fragments/ignore, else itself."""
    start = path if path.is_dir() else path.parent
    for d in (start, *start.parents):
        if any((d / f).is_file() for f in SPECIAL_FILES):
            return d
    return start


def load_rules(path: RulesSource = None) -> RuleSet:
    """Load every rule under ``path`` (default: :func:`default_rules_dir`); a :class:`RuleSet` is returned as it is
    (see :func:`load_library`). Raises :class:`RuleError`.

    The result comes from the on-disk cache (:mod:`aoti_trace.library.cache`) when these rule files were loaded
    before by this version of aoti-trace; a rule set with errors is never cached.
    """
    from aoti_trace.library import cache

    if isinstance(path, RuleSet):
        return path
    target = Path(path) if path is not None else default_rules_dir()
    if not target.exists():
        raise RuleError(f"{target}:1:1: no such rules file or folder")
    root = _root_for(target)
    return cache.cached([root], lambda: _load_rules(target, root), RuleSet, extra=str(target.resolve()))


def _load_rules(target: Path, root: Path) -> RuleSet:
    fragments = load_fragments(root / "fragments.yaml")
    ignore = load_ignore(root / "ignore.yaml")
    rs = RuleSet(root=root, fragments=fragments, ignore=ignore)
    names: dict[str, Path] = {}
    for file in rule_files(target):
        rule = load_rule_file(file, fragments)
        if rule.id in rs.paths:
            node = _locate(_parse(file)[1], ("id",))
            raise RuleError(f"{_mark(file, node)}: duplicate rule id {rule.id} (also in {rs.paths[rule.id]})")
        if rule.name in names:
            node = _locate(_parse(file)[1], ("name",))
            raise RuleError(f"{_mark(file, node)}: duplicate rule name {rule.name} (also in {names[rule.name]})")
        rs.rules.append(rule)
        rs.paths[rule.id] = file
        names[rule.name] = file
    rs.literals = {leaf.regex: required_literals(leaf.regex) for rule in rs.rules for leaf, _ in leaves(rule.match)
                   if leaf.regex is not None}
    return rs


def load_library(extra: Sequence[str | Path] = (), *, builtin: bool = True, env: bool = True) -> RuleSet:
    """The built-in library, plus the folders in ``$AOTI_TRACE_RULES`` (when ``env``), plus ``extra``: one
    :class:`RuleSet`. Each folder keeps its own fragments and guides; its ignore entries are added. A rule id or name
    defined in two folders is a :class:`RuleError` naming both files."""
    folders = [default_rules_dir()] if builtin else []
    if env:
        folders += [Path(p) for p in os.environ.get(RULES_ENV, "").split(os.pathsep) if p.strip()]
    folders += [Path(p) for p in extra]
    unique = list({(f.resolve() if f.exists() else f): f for f in folders}.values())
    if not unique:
        raise RuleError(f"no rules to load: --no-builtin-rules needs --rules DIR (or ${RULES_ENV})")
    first = load_rules(unique[0])
    if len(unique) == 1:
        return first
    # load_rules may hand out a shared (memoised) RuleSet: merge into a new one, never into it
    merged = RuleSet(rules=list(first.rules), root=first.root, paths=dict(first.paths), ignore=list(first.ignore),
                     fragments=dict(first.fragments), roots=dict(first.roots), literals=dict(first.literals))
    for folder in unique[1:]:
        rs = load_rules(folder)
        names = {r.name: merged.paths[r.id] for r in merged.rules}
        for rule in rs.rules:
            other = merged.paths.get(rule.id) or names.get(rule.name)
            if other is not None:
                what = f"id {rule.id}" if rule.id in merged.paths else f"name {rule.name}"
                raise RuleError(f"{rs.paths[rule.id]}: rule {what} is also defined in {other}")
            merged.rules.append(rule)
            merged.paths[rule.id] = rs.paths[rule.id]
            merged.roots[rule.id] = rs.root  # type: ignore[assignment]
        merged.literals.update(rs.literals)
        merged.ignore += [e for e in rs.ignore if e not in merged.ignore]
    return merged
