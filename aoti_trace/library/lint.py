"""``aoti-trace rules lint``: checks beyond what loading already enforces.

Loading (:func:`aoti_trace.library.loader.load_rules`) already rejects, with ``file:line:column``: schema errors, unknown
keys, bad families, regexes that do not compile in Rust (Polars) or Python, extract groups missing from the anchor
regex, placeholders that are not extract keys, duplicate ids and names. Lint adds the library-level checks:
guide exists, example coverage for test/stable rules, file location, supersedes / replaced_by targets, and each
rule's own examples (does the anchor regex match its ``match`` examples at all).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from aoti_trace.engine.ruleset import RuleSet
from aoti_trace.engine.schema import Leaf, Rule

TEMPLATE_LEFTOVER = re.compile(r"\bTODO\b|<fill in>")


@dataclass
class Problem:
    path: Path
    rule_id: str
    message: str
    level: str = "error"  # error | warning

    def __str__(self) -> str:
        return f"{self.path}: {self.rule_id}: {self.level}: {self.message}"


def lint(ruleset: RuleSet) -> list[Problem]:
    problems: list[Problem] = []
    from aoti_trace.engine.failure_rules import FAILURE_RULE_IDS

    ids = {r.id for r in ruleset.rules} | FAILURE_RULE_IDS  # the built-in failure rules are always loaded
    for rule in ruleset.rules:
        path = ruleset.paths.get(rule.id, Path("?"))

        def add(msg: str, level: str = "error") -> None:
            problems.append(Problem(path, rule.id, msg, level))

        if path.stem != rule.name:
            add(f"file name {path.name} should be {rule.name}.yaml")
        if path.parent.name != rule.family:
            add(f"file should live in {rule.family}/ (its family), not {path.parent.name}/")
        if rule.guide is None:
            add("no guide", "warning" if rule.status == "experimental" else "error")
        else:
            guide = ruleset.guide_path(rule)
            if guide is None or not guide.is_file():
                add(f"guide {rule.guide} does not exist")
            elif TEMPLATE_LEFTOVER.search(guide.read_text(encoding="utf-8")):
                add(f"guide {rule.guide} still has TODO placeholders")
        texts = [(rule.title, "title"), (rule.message, "message"), (rule.remedy, "remedy"),
                 (rule.description, "description")]
        texts += [(leaf.regex or "", "a regex") for leaf in _leaves(rule)]
        texts += [(f"{e.origin or ''} {e.lines or ''}", f"example {e.name}") for e in rule.examples]
        for text, where in texts:
            if TEMPLATE_LEFTOVER.search(text):
                add(f"{where} still has TODO placeholders")
        for target in rule.supersedes:
            if target not in ids:
                add(f"supersedes unknown rule {target}")
        if rule.replaced_by and rule.replaced_by not in ids:
            add(f"replaced_by unknown rule {rule.replaced_by}")
        if rule.status in ("test", "stable"):
            if not rule.examples_of("match"):
                add(f"a {rule.status} rule needs at least one `expect: match` example")
            if not rule.examples_of("no_match"):
                add(f"a {rule.status} rule needs at least one `expect: no_match` example")
        for example in rule.examples:
            if example.expect == "match" and not example.origin:
                add(f"example {example.name}: say where the text came from (`origin:`)", "warning")
        names = [e.name for e in rule.examples]
        for dup in sorted({n for n in names if names.count(n) > 1}):
            add(f"duplicate example name {dup}")
    problems += _supersede_cycles(ruleset)
    return problems


def _leaves(rule: Rule) -> list[Leaf]:
    from aoti_trace.engine.schema import leaves

    return [leaf for leaf, _ in leaves(rule.match)]


def _supersede_cycles(ruleset: RuleSet) -> list[Problem]:
    graph = {r.id: list(r.supersedes) for r in ruleset.rules}
    out: list[Problem] = []
    for start in graph:
        stack, seen = list(graph[start]), set()
        while stack:
            node = stack.pop()
            if node == start:
                out.append(Problem(ruleset.paths.get(start, Path("?")), start, "supersedes cycle"))
                break
            if node in seen:
                continue
            seen.add(node)
            stack.extend(graph.get(node, []))
    return out
