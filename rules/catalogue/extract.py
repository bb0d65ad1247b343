#!/usr/bin/env python3
"""Extract the catalogue of error messages that torch raises on the AOTInductor path.

Standard library only; not run by CI. It reads torch *source* at several releases and writes one JSON object per
line (``messages.jsonl``): the message template, the exception type a user sees, the kind of statement that raises
it, the files, the first and last release it was seen in, and a family label with the basis of that label.

Sources (any mix; each gives one release):

* ``--git-dir DIR TAG ...``  a pytorch git directory (bare is fine) and release tags (``v2.3.1`` -> ``2.3.1``);
* ``--wheel FILE ...``       a torch wheel (any platform: the Python sources and the C++ headers are the same);
                             the release is read from ``torch/version.py`` inside it;
* ``--tree RELEASE=DIR ...`` a directory laid out like the torch source tree (``DIR/torch/...``), e.g. C++ files
                             that wheels do not ship, copied from a checkout of that release.

Scope: ``torch/_export``, ``torch/export``, ``torch/_inductor`` (Python, and the C++ templates under
``torch/_inductor/codegen``), ``torch/fx/experimental/symbolic_shapes.py``, ``torch/csrc/inductor`` (C++; a wheel
ships its headers under ``torch/include/``, which is mapped back to ``torch/csrc/``) and
``torch/headeronly/util/shim_utils.h`` (where ``AOTI_TORCH_ERROR_CODE_CHECK``'s text lives in recent releases).

What counts as a message:

* Python: ``raise X(<msg>)`` and exception objects built outside a raise (``return SomeError(<msg>)``, for factory
  functions), ``assert cond, <msg>``, and ``torch._check*(cond, <msg or lambda>)``. ``<msg>`` may be a literal,
  an f-string, ``%``-formatting, ``.format``, ``+`` concatenation, ``textwrap.dedent(...)`` or a local variable
  assigned one of those earlier in the same function.
* C++ (in ``.cpp``/``.h`` files, and inside the C++ code that Inductor's Python code generators emit):
  ``TORCH_CHECK``/``STD_TORCH_CHECK`` (and the ``_VALUE``/``_INDEX``/``_TYPE``/``_NOT_IMPLEMENTED`` variants),
  ``AOTI_TORCH_CHECK``, ``AOTI_RUNTIME_CHECK``, ``throw std::...(<msg>)`` (also through a ``std::stringstream``),
  ``std::cerr``/``LOG(ERROR)`` prints of errors, and the use sites of ``AOTI_TORCH_ERROR_CODE_CHECK`` /
  ``AOTI_RUNTIME_ERROR_CODE_CHECK`` in C++ files (their text is ``<call> API call failed at <file>, line <n>``).

A template keeps the literal text and writes ``{}`` for every interpolated part. Templates with fewer than
``MIN_LITERAL`` letters of literal text are dropped (``raise RuntimeError(msg)`` with an unknown ``msg``).
Records are deduplicated on (whitespace-collapsed template, exception type) across releases.

Labels: see ``label()``; ``manual.tsv`` beside this script holds the hand-reviewed labels (id, family, internal,
carrier, note), which take precedence.

Usage::

    python3 rules/catalogue/extract.py --wheel wheels/torch-2.*.whl --tree 2.13.0=cpp-2.13 -o rules/catalogue/messages.jsonl
    python3 rules/catalogue/extract.py --git-dir pytorch.git v2.3.1 v2.13.0 -o messages.jsonl
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

MIN_LITERAL = 4
PY_SCOPE = ("torch/_export/", "torch/export/", "torch/_inductor/", "torch/fx/experimental/symbolic_shapes.py")
CPP_SCOPE = ("torch/csrc/inductor/", "torch/_inductor/codegen/", "torch/headeronly/util/shim_utils.h")
CPP_EXT = (".cpp", ".h", ".cc", ".hpp", ".cu")
# generated, message-free or not on the AOTI path
SKIP = re.compile(r"/generated/c_shim_|/fx_passes/serialized_patterns/|/__pycache__/|/test_|/tests?/|"
                  r"^torch/_export/db/")  # _export/db: example user programs, not torch's own checks
SENTINEL = "\x00"  # an interpolated value inside C++ text taken from a Python f-string
PH = "{}"


# --------------------------------------------------------------------------------------------------- sources
def _release_key(v: str) -> tuple:
    return tuple(int(x) if x.isdigit() else 0 for x in re.split(r"[.+]", v)[:3])


def normalise_path(name: str) -> str | None:
    """Map a source or wheel path to its path in the torch source tree, or None when it is out of scope."""
    if name.startswith("torch/include/torch/"):
        name = "torch/" + name[len("torch/include/torch/"):]
    if SKIP.search(name):
        return None
    if name.endswith(".py") and name.startswith(PY_SCOPE):
        return name
    if name.endswith(CPP_EXT) and name.startswith(CPP_SCOPE):
        return name
    return None


def wheel_files(path: str) -> tuple[str, dict[str, str]]:
    z = zipfile.ZipFile(path)
    m = re.search(r"__version__ = '([^']+)'", z.read("torch/version.py").decode())
    release = m.group(1) if m else Path(path).name.split("-")[1]
    files: dict[str, str] = {}
    for name in sorted(z.namelist()):
        norm = normalise_path(name)
        if norm and norm not in files:
            files[norm] = z.read(name).decode("utf-8", "replace")
    return release, files


def git_files(git_dir: str, tag: str) -> tuple[str, dict[str, str]]:
    def git(*args: str, data: bytes | None = None) -> bytes:
        return subprocess.run(["git", f"--git-dir={git_dir}", *args], input=data, check=True,
                              capture_output=True).stdout

    names = git("ls-tree", "-r", "--name-only", tag, "--", "torch").decode().splitlines()
    wanted = [(n, normalise_path(n)) for n in names]
    wanted = [(n, m) for n, m in wanted if m]
    out = git("cat-file", "--batch", data="".join(f"{tag}:{n}\n" for n, _ in wanted).encode())
    files: dict[str, str] = {}
    pos = 0
    for _, norm in wanted:
        header_end = out.index(b"\n", pos)
        size = int(out[pos:header_end].split()[2])
        files[norm] = out[header_end + 1:header_end + 1 + size].decode("utf-8", "replace")
        pos = header_end + 1 + size + 1
    return tag.lstrip("v"), files


def tree_files(spec: str) -> tuple[str, dict[str, str]]:
    release, _, root = spec.partition("=")
    files: dict[str, str] = {}
    for dirpath, _, names in sorted(os.walk(root)):
        for n in sorted(names):
            full = os.path.join(dirpath, n)
            norm = normalise_path(os.path.relpath(full, root).replace(os.sep, "/"))
            if norm:
                files[norm] = Path(full).read_text("utf-8", "replace")
    return release, files


# --------------------------------------------------------------------------------------------------- templates
def literal_letters(t: str) -> int:
    return sum(c.isalpha() for c in t.replace(PH, ""))


def collapse(t: str) -> str:
    return " ".join(t.split())


def percent_template(s: str) -> str:
    s = re.sub(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[diouxXeEfFgGcrsa]", PH, s)
    return s.replace("%%", "%")


def format_template(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        if s.startswith("{{", i) or s.startswith("}}", i):
            out.append(s[i]); i += 2
        elif s[i] == "{":
            j = s.find("}", i)
            if j < 0:
                out.append(s[i:]); break
            out.append(PH); i = j + 1
        else:
            out.append(s[i]); i += 1
    return "".join(out)


@dataclass
class Scope:
    """Assignments of one function body, for resolving ``raise X(msg)`` with a local ``msg``."""

    assigns: dict[str, list[tuple[int, str, ast.expr]]] = field(default_factory=dict)


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


class PyTemplater:
    def __init__(self, scope: Scope | None):
        self.scope = scope

    def of(self, node: ast.AST | None, lineno: int, depth: int = 0) -> str:
        """Template of a string expression ('{}' for anything not made of string literals)."""
        if node is None or depth > 6:
            return PH
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else PH
        if isinstance(node, ast.JoinedStr):
            return "".join(v.value if isinstance(v, ast.Constant) else PH for v in node.values)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            left = self.of(node.left, lineno, depth + 1)
            return percent_template(left) if left != PH else PH
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return _join(self.of(node.left, lineno, depth + 1), self.of(node.right, lineno, depth + 1))
        if isinstance(node, ast.Call):
            fn = _dotted(node.func) or ""
            if isinstance(node.func, ast.Attribute) and node.func.attr == "format":
                base = self.of(node.func.value, lineno, depth + 1)
                return format_template(base) if base != PH else PH
            if fn.endswith("dedent") and node.args:
                return textwrap.dedent(self.of(node.args[0], lineno, depth + 1)).strip()
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("strip", "rstrip", "lstrip") \
                    and not node.args:
                return self.of(node.func.value, lineno, depth + 1).strip()
            if isinstance(node.func, ast.Attribute) and node.func.attr == "join" and \
                    isinstance(node.func.value, ast.Constant) and node.args and \
                    isinstance(node.args[0], (ast.List, ast.Tuple)):
                sep = node.func.value.value
                return sep.join(self.of(e, lineno, depth + 1) for e in node.args[0].elts)
            return PH
        if isinstance(node, ast.Name) and self.scope is not None:
            return self._resolve(node.id, lineno, depth)
        return PH

    def _resolve(self, name: str, lineno: int, depth: int) -> str:
        items = [a for a in self.scope.assigns.get(name, []) if a[0] < lineno]  # type: ignore[union-attr]
        if not items:
            return PH
        start = max(i for i, a in enumerate(items) if a[1] == "=") if any(a[1] == "=" for a in items) else None
        if start is None:
            return PH
        out = self.of(items[start][2], items[start][0], depth + 1)
        for ln, op, expr in items[start + 1:]:
            if op == "+=":
                out = _join(out, self.of(expr, ln, depth + 1))
        return out


def _join(a: str, b: str) -> str:
    if a.endswith(PH) and b.startswith(PH):
        return a + b[len(PH):]
    return a + b


def _is_stringish(t: str) -> bool:
    return literal_letters(t) >= 1


# --------------------------------------------------------------------------------------------------- Python
CHECK_TYPES = {"_check": "RuntimeError", "_check_with": None, "_check_value": "ValueError",
               "_check_index": "IndexError", "_check_type": "TypeError", "_check_not_implemented":
               "NotImplementedError", "_check_is_size": "RuntimeError"}
EXC_NAME = re.compile(r"(?:Error|Exception|Unsupported|Violation|Failed|Failure|SymNode|Exit)$")
# exceptions torch raises and catches itself (cache bypass, fallbacks, tools): never what a user's run dies of
CONTROL_FLOW_EXC = {"BypassFxGraphCache", "BypassAOTAutogradCache", "CantChunk", "CannotStaticallyLaunchKernel",
                    "ParseException", "ArgumentTypeError", "SkipFrame", "NoTritonConfigsError"}
UNREACHABLE = re.compile(r"unreachable|should(?: not|n't| never) (?:be )?(?:reach|happen|get here|be possible)|"
                         r"impossible|not reached|this is a bug in|internal (?:compiler )?error|sanity check|"
                         r"^expected to be unreachable", re.IGNORECASE)


@dataclass
class Raw:
    template: str
    exc_type: str
    kind: str
    path: str
    line: int
    internal: bool = False


class PyExtractor(ast.NodeVisitor):
    def __init__(self, path: str, src: str):
        self.path = path
        self.module = path[:-3].replace("/", ".").removesuffix(".__init__")
        self.tree = ast.parse(src)
        self.imports: dict[str, str] = {}
        self.classes: set[str] = set()
        self.factories: dict[str, str] = {}  # function name -> the exception class its return annotation names
        self.out: list[Raw] = []
        self.fn_stack: list[ast.AST] = []
        self.scopes: list[Scope] = []
        self.raised_calls: set[int] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ClassDef):
                self.classes.add(node.name)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
                ret = _dotted(node.returns)
                if ret and EXC_NAME.search(ret):
                    self.factories[node.name] = ret
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.imports[a.asname] = a.name
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = self.module.split(".")
                    if not path.endswith("__init__.py"):
                        pkg = pkg[:-1]
                    pkg = pkg[:len(pkg) - (node.level - 1)] if node.level > 1 else pkg
                    base = ".".join(pkg + ([base] if base else []))
                for a in node.names:
                    self.imports[a.asname or a.name] = f"{base}.{a.name}"

    def qualify(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        if head in self.imports:
            full = self.imports[head] + ("." + rest if rest else "")
        elif head in self.classes and not rest:
            full = f"{self.module}.{head}"
        else:
            full = dotted
        return full

    def run(self) -> list[Raw]:
        self.scopes.append(_scope_of(self.tree))
        self.visit(self.tree)
        return self.out

    def visit_FunctionDef(self, node):
        self.fn_stack.append(node)
        self.scopes.append(_scope_of(node))
        self.generic_visit(node)
        self.scopes.pop()
        self.fn_stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def _add(self, template: str, exc_type: str, kind: str, line: int, internal: bool = False) -> None:
        template = template.strip()
        if literal_letters(template) < MIN_LITERAL:
            return
        self.out.append(Raw(template, exc_type, kind, self.path, line, internal or bool(UNREACHABLE.search(template))))

    def _message(self, args: list[ast.expr], kwargs: list[ast.keyword], line: int) -> str | None:
        t = PyTemplater(self.scopes[-1])
        for a in args:
            s = t.of(a.body if isinstance(a, ast.Lambda) else a, line)
            if _is_stringish(s):
                return s
        for k in kwargs:
            if k.arg in ("msg", "message", "reason"):
                s = t.of(k.value, line)
                if _is_stringish(s):
                    return s
        return None

    def _abstract(self) -> bool:
        """The enclosing function only raises (a docstring at most): an abstract method."""
        if not self.fn_stack:
            return False
        body = [b for b in self.fn_stack[-1].body
                if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
        return len(body) == 1 and isinstance(body[0], ast.Raise)

    def visit_Raise(self, node):
        exc = node.exc
        if isinstance(exc, ast.Call):
            self.raised_calls.add(id(exc))
            name = _dotted(exc.func)
            last = (name or "").rsplit(".", 1)[-1]
            if last and not last[0].isupper():  # a factory: its return annotation names the class, or skip it
                name = self.factories.get(last)
            if name:
                msg = self._message(exc.args, exc.keywords, node.lineno)
                if msg is not None:
                    qual = self.qualify(name)
                    internal = (qual.endswith("NotImplementedError") and self._abstract()) or \
                        qual.rsplit(".", 1)[-1] in CONTROL_FLOW_EXC
                    self._add(msg, qual, "python_raise", node.lineno, internal)
        self.generic_visit(node)

    def visit_Assert(self, node):
        if node.msg is not None:
            msg = PyTemplater(self.scopes[-1]).of(node.msg, node.lineno)
            self._add(msg, "AssertionError", "assert", node.lineno)
        self.generic_visit(node)

    def visit_Call(self, node):
        name = _dotted(node.func) or ""
        last = name.rsplit(".", 1)[-1]
        if id(node) not in self.raised_calls:
            qual = self.qualify(name) if name else ""
            if last in CHECK_TYPES and (qual.startswith("torch.") or name.startswith("torch.")):
                exc_type = CHECK_TYPES[last]
                args = node.args[1:]
                if exc_type is None and node.args:  # _check_with(ErrorType, cond, msg)
                    exc_type = self.qualify(_dotted(node.args[0]) or "RuntimeError")
                    args = node.args[2:]
                msg = self._message(args, node.keywords, node.lineno)
                if msg is not None:
                    self._add(msg, exc_type or "RuntimeError", "torch_check", node.lineno)
            elif last and last[0].isupper() and EXC_NAME.search(last) and not last.endswith("Warning"):
                msg = self._message(node.args, node.keywords, node.lineno)
                if msg is not None:
                    self._add(msg, qual, "python_raise", node.lineno, last in CONTROL_FLOW_EXC)
        self.generic_visit(node)


def _scope_of(fn: ast.AST) -> Scope:
    sc = Scope()
    body_nodes = []
    stack = list(ast.iter_child_nodes(fn))
    while stack:  # the function's own statements, not those of nested functions
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        body_nodes.append(n)
        stack.extend(ast.iter_child_nodes(n))
    for n in body_nodes:
        if isinstance(n, ast.Assign):
            for tgt in n.targets:
                if isinstance(tgt, ast.Name):
                    sc.assigns.setdefault(tgt.id, []).append((n.lineno, "=", n.value))
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None:
            sc.assigns.setdefault(n.target.id, []).append((n.lineno, "=", n.value))
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and isinstance(n.op, ast.Add):
            sc.assigns.setdefault(n.target.id, []).append((n.lineno, "+=", n.value))
    for v in sc.assigns.values():
        v.sort(key=lambda a: a[0])
    return sc


def python_cpp_text(tree: ast.AST) -> tuple[str, list[int]]:
    """The C++ that a Python code generator emits: its string literals and f-strings in source order, one per
    line block, interpolations written as SENTINEL. Returns the text and, per text line, the Python line."""
    parts: list[tuple[int, str]] = []
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            inner.update(id(v) for v in node.values)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts.append((node.lineno, "".join(v.value if isinstance(v, ast.Constant) else SENTINEL
                                               for v in node.values)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inner:
            parts.append((node.lineno, node.value))
    parts.sort(key=lambda p: p[0])
    text_lines: list[str] = []
    origin: list[int] = []
    for ln, s in parts:
        for k, piece in enumerate(s.split("\n")):
            text_lines.append(piece)
            origin.append(ln + k)
    return "\n".join(text_lines), origin


# --------------------------------------------------------------------------------------------------- C++
CHECK_MACROS = {
    "TORCH_CHECK": ("RuntimeError", "torch_check"), "STD_TORCH_CHECK": ("RuntimeError", "torch_check"),
    "TORCH_CHECK_VALUE": ("ValueError", "torch_check"), "TORCH_CHECK_INDEX": ("IndexError", "torch_check"),
    "TORCH_CHECK_TYPE": ("TypeError", "torch_check"),
    "TORCH_CHECK_NOT_IMPLEMENTED": ("NotImplementedError", "torch_check"),
    "AOTI_TORCH_CHECK": ("RuntimeError", "aoti_check"), "AOTI_RUNTIME_CHECK": ("RuntimeError", "aoti_check"),
}
CODE_CHECK_MACROS = ("AOTI_TORCH_ERROR_CODE_CHECK", "AOTI_RUNTIME_ERROR_CODE_CHECK")
THROW_TYPES = {"std::runtime_error": "RuntimeError", "std::invalid_argument": "ValueError",
               "std::out_of_range": "IndexError", "std::logic_error": "RuntimeError",
               "std::domain_error": "ValueError", "std::length_error": "ValueError",
               "c10::Error": "RuntimeError", "std::exception": "RuntimeError", "std::bad_alloc": "MemoryError"}
CPP_START = re.compile(
    r"\b(?P<macro>" + "|".join(sorted(list(CHECK_MACROS) + list(CODE_CHECK_MACROS), key=len, reverse=True))
    + r")\s*\(|\bthrow\s+(?P<throw>[A-Za-z_][\w:]*)\s*[({]|(?P<print>std::cerr|LOG\(ERROR\))\s*<<")
STRING = re.compile(r'(?:u8|u|U|L)?"(?:[^"\\\n]|\\.)*"')
NEUTRAL = re.compile(r"(?:\s|\+|<<|[(){}]|,|std::string|std::move|c10::str|\.str\(\)|\.c_str\(\)|\bss\b|"
                     r"std::endl|'\\n')+")


def strip_cpp_comments(text: str) -> str:
    """Blank out // and /* */ comments (keeping line breaks and string literals)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            m = STRING.match(text, i)
            j = m.end() if m else i + 1
            out.append(text[i:j]); i = j
        elif c == "'" and i + 2 < n:
            j = text.find("'", i + 1 + (text[i + 1] == "\\"))
            j = j + 1 if 0 < j < i + 5 else i + 1
            out.append(text[i:j]); i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j)); i = j
        else:
            out.append(c); i += 1
    return "".join(out)


def balanced(text: str, open_pos: int) -> int:
    """Index just after the bracket closing the one at ``open_pos`` (or -1)."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack = [pairs[text[open_pos]]]
    i = open_pos + 1
    while i < len(text) and stack:
        c = text[i]
        if c == '"':
            m = STRING.match(text, i)
            i = m.end() if m else i + 1
            continue
        if c in pairs:
            stack.append(pairs[c])
        elif c in ")}]":
            if c != stack[-1]:
                return -1
            stack.pop()
        elif c == ";" and stack == [")"] and text[open_pos] == "(":
            return -1
        i += 1
    return i if not stack else -1


def split_args(inner: str) -> list[str]:
    args, depth, cur, i = [], 0, [], 0
    while i < len(inner):
        c = inner[i]
        if c == '"':
            m = STRING.match(inner, i)
            j = m.end() if m else i + 1
            cur.append(inner[i:j]); i = j
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            args.append("".join(cur)); cur = []
        else:
            cur.append(c)
        i += 1
    if cur:
        args.append("".join(cur))
    return [a.strip() for a in args]


def unescape(lit: str) -> str:
    body = lit[lit.index('"') + 1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}.get(m[1], m[0]), body)


def cpp_template(expr: str) -> str:
    """Literal text of a C++ message expression; '{}' for each run of non-literal code."""
    out, pos = [], 0
    for m in STRING.finditer(expr):
        if expr[:m.start()].rstrip().endswith("[") or expr[m.end():].lstrip().startswith("]"):
            continue  # a key, as in json["target"]: code, not text
        gap = expr[pos:m.start()]
        if NEUTRAL.sub("", gap):
            out.append(PH)
        out.append(unescape(m.group()).replace(SENTINEL, PH))
        pos = m.end()
    if NEUTRAL.sub("", expr[pos:]):
        out.append(PH)
    t = re.sub(r"(?:\{\})+", PH, "".join(out).replace(SENTINEL, PH))
    return t


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _in_define(text: str, pos: int) -> str | None:
    """Name of the #define whose (backslash-continued) body holds ``pos``, if any."""
    start = text.rfind("\n", 0, pos) + 1
    while True:
        line = text[start:text.find("\n", start) if text.find("\n", start) >= 0 else len(text)]
        m = re.match(r"\s*#\s*define\s+(\w+)", line)
        if m:
            return m.group(1)
        prev_end = start - 1
        if prev_end <= 0:
            return None
        prev_start = text.rfind("\n", 0, prev_end) + 1
        if not text[prev_start:prev_end].rstrip().endswith("\\"):
            return None
        start = prev_start


def stream_template(text: str, throw_pos: int, var: str) -> str | None:
    """Template of ``throw X(var.str())``: the ``var << ...;`` statements before it, back to ``var``'s declaration."""
    window_start = max(0, throw_pos - 3000)
    window = text[window_start:throw_pos]
    decl = None
    for m in re.finditer(r"std::(?:o?string)?stringstream\s+" + re.escape(var) + r"\b", window):
        decl = m
    body = window[decl.end():] if decl else window[-1200:]
    parts = []
    for m in re.finditer(r"(?<![\w.])" + re.escape(var) + r"\s*<<(?P<chain>(?:[^;\"]|\"(?:[^\"\\\n]|\\.)*\")*);",
                         body):
        parts.append(cpp_template(m.group("chain")))
    if not parts:
        return None
    t = "".join(parts)
    return re.sub(r"(?:\{\})+", PH, t)


def cpp_messages(path: str, text: str, origin: list[int] | None = None) -> list[Raw]:
    """Messages of C++ ``text``; ``origin`` maps text lines to Python lines for generated code."""
    text = strip_cpp_comments(text) if origin is None else text
    out: list[Raw] = []
    generated = origin is not None

    def add(t: str | None, exc: str, kind: str, pos: int, internal: bool = False) -> None:
        if t is None:
            return
        t = t.strip()
        if literal_letters(t) < MIN_LITERAL:
            return
        ln = _line_of(text, pos)
        if origin is not None:
            ln = origin[min(ln, len(origin)) - 1]
        out.append(Raw(t, exc, kind, path, ln, internal or bool(UNREACHABLE.search(t))))

    for m in CPP_START.finditer(text):
        macro, throw, printer = m.group("macro"), m.group("throw"), m.group("print")
        define = _in_define(text, m.start()) if not generated else None
        if define and macro:  # the macro's own definition or a macro built on it
            continue
        if macro:
            end = balanced(text, m.end() - 1)
            if end < 0:
                continue
            args = split_args(text[m.end():end - 1])
            if macro in CODE_CHECK_MACROS:
                if generated or not args:
                    continue
                call = " ".join(args[0].split()) if len(args) == 1 else " ".join(", ".join(args).split())
                call = re.sub(r"\(\s+", "(", call)
                add(call.replace("{", "{{").replace("}", "}}").replace("{{}}", "{}") +
                    " API call failed at {}, line {}", "RuntimeError", "aoti_check", m.start())
                continue
            exc, kind = CHECK_MACROS[macro]
            if not args:
                continue
            if len(args) == 1:
                if macro in ("AOTI_RUNTIME_CHECK",):
                    continue
                cond = " ".join(args[0].split())
                add(f"Expected {cond} to be true, but got false.", exc, kind, m.start())
            else:
                add("".join(cpp_template(a) for a in args[1:]), exc, kind, m.start())
        elif throw:
            open_pos = m.end() - 1
            end = balanced(text, open_pos)
            if end < 0:
                continue
            arg = text[open_pos + 1:end - 1].strip()
            exc = THROW_TYPES.get(throw, "RuntimeError")
            kind = "aoti_check" if define and define.startswith("AOTI") else "cpp_throw"
            sm = re.fullmatch(r"(?:std::move\()?(\w+)\)?\.str\(\)(?:\.c_str\(\))?", arg)
            if sm:
                add(stream_template(text, m.start(), sm.group(1)), exc, kind, m.start())
            elif STRING.search(arg):
                add(cpp_template(arg), exc, kind, m.start())
        elif printer:
            end = text.find(";", m.end())
            if end < 0:
                continue
            t = cpp_template(text[m.end():end])
            if printer == "std::cerr" and not re.search(r"error|exception|fail", t, re.IGNORECASE):
                continue
            add(t, "", "error_print", m.start())
    return out


# --------------------------------------------------------------------------------------------------- one release
def extract_release(files: dict[str, str]) -> tuple[list[Raw], list[str]]:
    raws: list[Raw] = []
    problems: list[str] = []
    for path in sorted(files):
        text = files[path]
        if path.endswith(".py"):
            try:
                ex = PyExtractor(path, text)
            except SyntaxError as exc:
                problems.append(f"{path}: not parsed ({exc.msg} at line {exc.lineno})")
                continue
            raws.extend(ex.run())
            if path.startswith(("torch/_inductor/", "torch/_export/", "torch/export/")) and \
                    re.search(r"runtime_error|TORCH_CHECK|AOTI_RUNTIME_CHECK|std::cerr|LOG\(ERROR\)", text):
                cpp, origin = python_cpp_text(ex.tree)
                raws.extend(cpp_messages(path, cpp, origin))
        else:
            raws.extend(cpp_messages(path, text))
    return raws, problems


# --------------------------------------------------------------------------------------------------- labels
FAMILIES = ("triton_index_oob", "device_mismatch", "constant_loading", "deprecated_api", "shape_mismatch",
            "dtype_mismatch", "dynamic_shape_violation", "nan_assert", "illegal_memory_access",
            "cpp_compile_error", "missing_custom_op", "package_error", "cuda_version_mismatch", "out_of_memory",
            "segfault", "lowering_error", "export_error", "autotune_error", "environment", "log_damage",
            "unexplained")

# Section 8 of the AOTI signatures reference: the raising module routes the phase.
PATH_FAMILY: list[tuple[str, str]] = [
    (r"^torch/csrc/inductor/aoti_torch/oss_proxy_executor", "missing_custom_op"),
    (r"^torch/_inductor/package/|^torch/export/pt2_archive/|^torch/csrc/inductor/aoti_package/", "package_error"),
    (r"^torch/_inductor/(?:codecache|cpp_builder)\.py$|^torch/_inductor/codegen/aoti_runtime/|"
     r"^torch/_inductor/compile_worker/|^torch/_inductor/async_compile\.py$", "cpp_compile_error"),
    (r"^torch/_inductor/(?:select_algorithm|autotune_process)\.py$|^torch/_inductor/runtime/|"
     r"^torch/_inductor/autoheuristic/|coordinate_descent|^torch/_inductor/codegen/cuda/cuda_env",
     "autotune_error"),
    (r"^torch/fx/experimental/symbolic_shapes\.py$", "dynamic_shape_violation"),
    (r"^torch/_export/|^torch/export/", "export_error"),
    (r"^torch/_inductor/codegen/cpp_wrapper|^torch/csrc/inductor/aoti_runtime/|^torch/csrc/inductor/aoti_runner/|"
     r"^torch/csrc/inductor/aoti_torch/|^torch/csrc/inductor/|^torch/headeronly/", "package_error"),
    (r"^torch/_inductor/", "lowering_error"),
]

# Keywords refine the path family. First match wins; each is (regex on the template, family, paths it applies to
# or None for all).
KEYWORDS: list[tuple[str, str, str | None]] = [
    (r"out of memory|\bOOM\b|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|failed to allocate|mmap\(\) failed",
     "out_of_memory", None),
    (r"illegal memory access|misaligned address|cudaErrorIllegalAddress", "illegal_memory_access", None),
    (r"device-side assert|index out of bounds|indirect indexing", "triton_index_oob",
     r"^torch/csrc/|^torch/_inductor/(?:codegen|runtime)/"),
    (r"\bNaN\b|\bINF\b|inf_and_nan", "nan_assert", None),
    (r"deprecat", "deprecated_api", None),
    (r"CUDA driver version|driver version is insufficient|requires (?:NVIDIA )?SM\d+|no kernel image|"
     r"compute capability", "cuda_version_mismatch", None),
    (r"compiler|\bnvcc\b|\bmsvc\b|MSVC|cl\.exe|clang-cl|icx-cl|CUDA_HOME|ROCM_HOME|not installed|No such file|"
     r"OpenMP|Python\.h|ninja|[Pp]lease install|vcvars|Jinja2 required",
     "environment", r"^torch/_inductor/(?:codecache|cpp_builder|compile_worker|async_compile|"
     r"codegen/cuda|codegen/rocm|codegen/cutedsl|runtime/compile_tasks)|^torch/_inductor/(?:select_algorithm|"
     r"autotune_process)"),
    (r"custom op|custom_op|proxy executor|ProxyExecutor|extern kernel|torch\.ops\.|is not registered|"
     r"no kernel registered|Could not find schema", "missing_custom_op",
     r"^torch/csrc/inductor/|^torch/_inductor/codegen/cpp_wrapper"),
    (r"[Cc]onstants?\b|[Ww]eights?\b|folded|constants_map|mmap'd", "constant_loading",
     r"^torch/csrc/inductor/(?:aoti_runtime|aoti_runner|aoti_package)/|^torch/_inductor/codegen/aoti_runtime/"),
    (r"unmatched dtype|expected dtype|must have the same dtype", "dtype_mismatch",
     r"^torch/csrc/inductor/|^torch/_inductor/codegen/cpp_wrapper|^torch/_inductor/codegen/aoti_runtime"),
    (r"unmatched device|[Dd]evice mismatch|same device|different device|[Ii]ncorrect device|Invalid device|"
     r"Unsupported device|does not match device|No interface for device|device key", "device_mismatch", None),
    (r"dim value is too|unbacked|[Cc]onstraint|[Ss]peciali[sz]|CANNOT be dynamic|to be of the form|"
     r"not in range|out of range|range_constraints|[Gg]uard|[Dd]erived dim|DerivedDim|Expected input at .*shape",
     "dynamic_shape_violation",
     r"^torch/_export/(?!serde/)|^torch/export/|^torch/fx/experimental/|^torch/csrc/inductor/aoti_runtime/|"
     r"^torch/_inductor/codegen/cpp_wrapper"),
    (r"unmatched dim|unmatched stride|inputs vector size|expected ndim|inputs but got|outputs but got|"
     r"shapes cannot be multiplied|expected size", "shape_mismatch",
     r"^torch/csrc/inductor/|^torch/_inductor/codegen/cpp_wrapper|^torch/_inductor/codegen/aoti_runtime"),
    (r"data.dependent|GuardOnDataDependent", "export_error", r"^torch/fx/experimental/"),
    (r"\.pt2|archive|load_package|[Pp]ackage", "package_error",
     r"^torch/export/|^torch/_export/|^torch/csrc/inductor/|^torch/_inductor/(?:codecache|cpp_builder)"),
    (r"dlopen|\.so\b|shared library|Failed to load model|dlsym", "package_error",
     r"^torch/csrc/inductor/|^torch/_inductor/(?:codecache|cpp_builder)"),
    (r"[Cc]ompilation (?:failed|error)|compile failed|CppCompileError|fatal error|linker|undefined reference",
     "cpp_compile_error", r"^torch/_inductor/(?:codecache|cpp_builder|codegen/cpp)|^torch/csrc/"),
    (r"[Aa]utotun|benchmark", "autotune_error", r"^torch/_inductor/(?:codegen|kernel|select_algorithm)"),
]

# wrappers that only carry another message: their family is the wrapped message's
CARRIER = re.compile(r"^(?:(?:Error|Exception in aoti_torch|Runtime error|\{\}CUDA (?:driver )?error|"
                     r"\{\}HIP error|L0 runtime error): \{\}|.*\) API call failed at \{\}, line \{\}|"
                     r"\{\} API call failed at \{\}, line \{\})$", re.DOTALL)
# API-call carriers that do name their cause
NOT_CARRIER = re.compile(r"constant_buffer|const_fold|load_constants|inf_and_nan")


def path_family(path: str) -> str:
    for rx, fam in PATH_FAMILY:
        if re.search(rx, path):
            return fam
    return "lowering_error"


def label(template: str, exc_type: str, files: list[str], kind: str = "python_raise") -> tuple[str, str]:
    """(family, basis) from the raising file (path), refined by keywords in the message (keyword).

    Python code under ``codegen/cpp_wrapper*`` runs at compile time (lowering); the C++ it emits runs in the
    model (load/run). An ``assert`` / ``AssertionError`` in Python is an internal invariant of the phase it runs
    in: it keeps its path family, keywords do not move it."""
    python = kind in ("python_raise", "assert") or (kind == "torch_check" and files[0].endswith(".py"))
    fams = ["lowering_error" if python and f.startswith("torch/_inductor/codegen/cpp_wrapper") else path_family(f)
            for f in files]
    fam = max(set(fams), key=lambda f: (fams.count(f), f))
    if python and exc_type == "AssertionError":
        return fam, "path"
    text = f"{exc_type}: {template}"
    for rx, kfam, where in KEYWORDS:
        if where is not None and not any(re.search(where, f) for f in files):
            continue
        if re.search(rx, text):
            if kfam != fam:
                return kfam, "keyword"
            break
    if "ConstraintViolationError" in exc_type:
        return "dynamic_shape_violation", "keyword" if fam != "dynamic_shape_violation" else "path"
    if "GuardOnDataDependentSymNode" in exc_type or "DataDependent" in exc_type:
        return "export_error", "keyword" if fam != "export_error" else "path"
    return fam, "path"


def load_manual(path: Path) -> dict[str, dict]:
    """manual.tsv: id, family, internal (y/n/-), carrier (y/n/-), note; '-' keeps the automatic value."""
    out: dict[str, dict] = {}
    if not path.is_file():
        return out
    for ln in path.read_text().splitlines():
        if not ln.strip() or ln.startswith("#"):
            continue
        cols = ln.split("\t")
        mid, fam, internal, carrier = cols[:4]
        if fam != "-" and fam not in FAMILIES:
            raise SystemExit(f"manual.tsv: unknown family {fam!r} for {mid}")
        out[mid] = {"family": fam, "internal": internal, "carrier": carrier, "note": cols[4] if len(cols) > 4 else ""}
    return out


# --------------------------------------------------------------------------------------------------- main
def message_id(template: str, exc_type: str) -> str:
    return "M" + hashlib.sha1(f"{exc_type}\0{collapse(template)}".encode()).hexdigest()[:10]


def build(releases: list[tuple[str, dict[str, str]]], manual: dict[str, dict]) -> tuple[list[dict], list[str]]:
    releases = sorted(releases, key=lambda r: _release_key(r[0]))
    recs: dict[tuple[str, str], dict] = {}
    problems: list[str] = []
    for release, files in releases:
        raws, probs = extract_release(files)
        problems += [f"{release}: {p}" for p in probs]
        for r in raws:
            key = (collapse(r.template), r.exc_type)
            rec = recs.get(key)
            if rec is None:
                rec = recs[key] = {"template": r.template, "exc_type": r.exc_type, "kinds": {}, "files": {},
                                   "releases": set(), "internal": r.internal}
            rec["kinds"][r.kind] = rec["kinds"].get(r.kind, 0) + 1
            rec["files"].setdefault(r.path, r.line)
            rec["releases"].add(release)
            rec["internal"] = rec["internal"] and r.internal
            rec["template"] = r.template  # the newest wording of the same collapsed text
    out = []
    for (_, exc_type), rec in recs.items():
        files = sorted(rec["files"])
        rels = sorted((r for r in rec["releases"] if r[:1].isdigit()), key=_release_key) or \
            sorted(rec["releases"])  # only seen in source snapshots (commit:<sha>), not in a release
        kind = max(sorted(rec["kinds"]), key=lambda k: rec["kinds"][k])
        mid = message_id(rec["template"], exc_type)
        family, basis = label(rec["template"], exc_type, files, kind)
        internal = rec["internal"]
        carrier = bool(CARRIER.match(collapse(rec["template"]))) and not NOT_CARRIER.search(rec["template"])
        m = manual.get(mid)
        if m:
            if m["family"] != "-":
                family, basis = m["family"], "manual"
            if m["internal"] in ("y", "n"):
                internal = m["internal"] == "y"
            if m["carrier"] in ("y", "n"):
                carrier = m["carrier"] == "y"
        out.append({
            "id": mid, "template": rec["template"], "exc_type": exc_type, "kind": kind,
            "files": [f"{f}:{rec['files'][f]}" for f in files],
            "first_version": rels[0], "last_version": rels[-1], "versions": len(rels),
            "family": family, "basis": basis, "internal": internal, "carrier": carrier,
        })
    out.sort(key=lambda r: (r["files"][0], r["template"], r["exc_type"]))
    return out, problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--git-dir", help="pytorch git directory; the positional arguments are its release tags")
    ap.add_argument("tags", nargs="*", help="release tags (with --git-dir)")
    ap.add_argument("--wheel", nargs="*", default=[], help="torch wheels")
    ap.add_argument("--tree", nargs="*", default=[], help="RELEASE=DIR source trees")
    ap.add_argument("--manual", default=str(Path(__file__).with_name("manual.tsv")))
    ap.add_argument("-o", "--output", default="-")
    args = ap.parse_args(argv)
    if args.tags and not args.git_dir:
        ap.error("tags need --git-dir")
    releases = [git_files(args.git_dir, t) for t in args.tags]
    releases += [wheel_files(w) for w in args.wheel]
    releases += [tree_files(t) for t in args.tree]
    if not releases:
        ap.error("no sources: give --git-dir with tags, --wheel or --tree")
    recs, problems = build(releases, load_manual(Path(args.manual)))
    for p in problems:
        print(p, file=sys.stderr)
    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=False) + "\n" for r in recs)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
    print(f"{len(recs)} messages from {len(releases)} source(s): "
          + ", ".join(sorted({r for r, _ in releases}, key=lambda r: (_release_key(r), r))), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
