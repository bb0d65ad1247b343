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


# The projects a catalogue file is made of (``--project``): the Python and C++ scopes read, the prefix its paths get
# in the catalogue (ExecuTorch's tree has no top-level package directory), the git tree roots to list. ``torch`` is
# the AOTI path of ``messages.jsonl``; the others write their own file (``<project>.jsonl``), and also catalogue
# warnings (``warnings.warn``, ``log.warning``, ``TORCH_WARN``), flagged ``warning``, so that a log line that matches
# one is known not to be an error.
PROJECTS: dict[str, dict] = {
    "torch": {"py": PY_SCOPE, "cpp": CPP_SCOPE, "prefix": "", "roots": ("torch",)},
    # polyfills re-raise the texts of Python's builtins ("argument of type {} is not iterable"): not Dynamo's own
    "dynamo": {"py": ("torch/_dynamo/",), "cpp": (), "prefix": "", "roots": ("torch",),
               "skip": r"^torch/_dynamo/polyfills/"},
    "executorch": {"py": ("exir/", "extension/", "backends/xnnpack/", "runtime/"),
                   "cpp": ("runtime/", "kernels/", "extension/", "backends/xnnpack/runtime/", "codegen/"),
                   "prefix": "executorch/", "roots": ("runtime", "kernels", "extension", "backends", "exir", "codegen"),
                   # the LLM apps' tokenizers (shared with torchchat's runners): a missing tokenizer file is the
                   # app's input, not ExecuTorch's
                   "skip": r"^extension/llm/tokenizers?/"},
    "triton": {"py": ("triton/compiler/", "triton/backends/", "triton/runtime/", "triton/knobs.py"), "cpp": (),
               "prefix": "", "roots": ("python/triton",)},
    "c10_cuda": {"py": (), "cpp": ("c10/cuda/",), "prefix": "", "roots": ("c10/cuda",)},
}
PROJECT = "torch"


def normalise_path(name: str) -> str | None:
    """Map a source or wheel path to its path in the project's source tree (with the project's prefix), or None when
    it is out of scope."""
    scope = PROJECTS[PROJECT]
    if name.startswith("torch/include/torch/"):
        name = "torch/" + name[len("torch/include/torch/"):]
    if SKIP.search(name) or re.search(r"/third[-_]party/|/testing_util/", name) or \
            (scope.get("skip") and re.search(scope["skip"], name)):
        return None
    if name.endswith(".py") and scope["py"] and name.startswith(scope["py"]):
        return scope["prefix"] + name
    if name.endswith(CPP_EXT) and scope["cpp"] and name.startswith(scope["cpp"]):
        return scope["prefix"] + name
    return None


def wheel_files(path: str) -> tuple[str, dict[str, str]]:
    z = zipfile.ZipFile(path)
    names = set(z.namelist())
    version_file = next((n for n in ("torch/version.py", "triton/__init__.py") if n in names), None)
    m = re.search(r"__version__ = ['\"]([^'\"]+)['\"]", z.read(version_file).decode()) if version_file else None
    release = (m.group(1) if m else Path(path).name.split("-")[1]).split("+")[0]  # 2.14.1+cu130: the release
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

    names = git("ls-tree", "-r", "--name-only", tag, "--", *PROJECTS[PROJECT]["roots"]).decode().splitlines()
    wanted = [(n, normalise_path(n.removeprefix("python/"))) for n in names]
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


STRINGS: dict[str, dict[str, str]] = {}  # pseudo-path of a library -> its strings (see binary_strings)


def strings_files(spec: str) -> tuple[str, dict[str, str]]:
    """``RELEASE=FILE``: the C++ library ``FILE`` (or a torch wheel holding ``torch/lib/libc10_cuda.so``)."""
    release, _, file = spec.partition("=")
    lib = "libc10_cuda.so"
    if file.endswith(".whl"):
        import tempfile
        with zipfile.ZipFile(file) as z, tempfile.TemporaryDirectory() as tmp:
            z.extract(f"torch/lib/{lib}", tmp)
            strings = binary_strings(os.path.join(tmp, "torch", "lib", lib))
    else:
        strings = binary_strings(file)
    pseudo = f"c10/cuda/{lib}"
    STRINGS[pseudo] = strings
    return release, {pseudo: ""}


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
    warning: bool = False  # a warning or info text, not an error (projects other than torch only)


# Python calls that print a warning, not an error (caught only outside the torch project, see PROJECTS)
WARN_CALL = re.compile(r"^(?:warnings\.warn|warn|warn_once|(?:\w+\.)*(?:log|logger|_logger|LOG|perf_hint_log|"
                       r"recompiles_log|graph_break_log|unimplemented_log)\.(?:warning|warn|info))$")


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
        if PROJECT != "torch" and node.args and WARN_CALL.match(name):
            msg = PyTemplater(self.scopes[-1]).of(node.args[0], node.lineno)
            if len(node.args) > 1 and not name.endswith("warn"):  # logging's own %-formatting
                msg = percent_template(msg)
            if _is_stringish(msg) and literal_letters(msg) >= MIN_LITERAL:
                exc = ""
                if name.endswith("warn"):
                    cat = _dotted(node.args[1]) if len(node.args) > 1 else None
                    cat = cat or next((_dotted(k.value) for k in node.keywords if k.arg == "category"), None)
                    exc = (cat or "UserWarning").rsplit(".", 1)[-1]
                self.out.append(Raw(msg.strip(), exc, "warning", self.path, node.lineno, False, True))
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


# --------------------------------------------------------------------------------------------------- ExecuTorch
# ExecuTorch's runtime logs its errors (``ET_LOG(Error|Fatal, fmt, ...)``, printf-style) and its check macros log a
# fixed prefix before the message (runtime/platform/assert.h, runtime/core/error.h,
# runtime/core/exec_aten/util/tensor_util.h, identical from v0.4.0 to v1.4.1 where the macro exists); a log line is
# ``E 00:00:00.123 executorch:method.cpp:42] <text>``. Macro -> (index of the condition or None, index of the format
# or None, prefix; ``{cond}`` is the stringised condition, written literally).
ET_MACROS: dict[str, tuple[int | None, int | None, str]] = {
    "ET_CHECK_MSG": (0, 1, "In function {}(), assert failed ({cond}): "),
    "ET_DCHECK_MSG": (0, 1, "In function {}(), assert failed ({cond}): "),
    "ET_CHECK": (0, None, "In function {}(), assert failed: {cond}"),
    "ET_DCHECK": (0, None, "In function {}(), assert failed: {cond}"),
    "ET_CHECK_OR_RETURN_ERROR": (None, 2, ""),
    "ET_CHECK_OK_OR_RETURN_ERROR": (None, 1, ""),
    "ET_CHECK_OR_RETURN_FALSE": (0, 1, "Check failed ({cond}): "),
    "ET_LOG_MSG_AND_RETURN_IF_FALSE": (0, 1, "Check failed ({cond}): "),
    "ET_LOG_AND_RETURN_IF_FALSE": (0, None, "Check failed ({cond}): "),
    "ET_KERNEL_CHECK": (1, None, "Check failed ({cond}): "),
    "ET_KERNEL_CHECK_MSG": (1, 4, "Check failed ({cond}): "),
    "THROW_IF_ERROR": (None, 1, ""),  # extension/pybindings: a RuntimeError with the formatted text
    "THROW_INDEX_IF_ERROR": (None, 1, ""),
}
ET_SOFT = ("ET_CHECK_OR_RETURN_FALSE", "ET_LOG_MSG_AND_RETURN_IF_FALSE", "ET_LOG_AND_RETURN_IF_FALSE")
ET_START = re.compile(r"\b(?P<macro>ET_LOG|" + "|".join(sorted(ET_MACROS, key=len, reverse=True)) + r")\s*\(")
PRI_MACRO = re.compile(r'"\s*(?:ET_)?PRI[A-Za-z0-9_]+\s*(")?')  # '"%" PRIu32 " more"' or '"%" PRIu32,'


def printf_template(fmt: str) -> str:
    """Template of a printf format: every conversion (``%zu``, ``%" PRIu32 "``, ``%.*s``) is ``{}``."""
    s = re.sub(r"%[-#0 +']*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|z|j|t|L|q)?[diouxXeEfFgGaAcspn]", PH, fmt)
    return s.replace("%%", "%")


def et_messages(path: str, text: str) -> list[Raw]:
    """Messages of ExecuTorch's C++ log and check macros (see ``ET_MACROS``)."""
    text = strip_cpp_comments(text)
    out: list[Raw] = []
    for m in ET_START.finditer(text):
        macro = m.group("macro")
        define = _in_define(text, m.start())
        if define in ET_MACROS or (define or "").startswith(("ET_INTERNAL_", "ET_ASSERT_", "ET_LOG")):
            continue  # a check macro's own definition
        end = balanced(text, m.end() - 1)
        if end < 0:
            continue
        args = split_args(text[m.end():end - 1])
        if macro == "ET_LOG":
            if len(args) < 2 or args[0] not in ("Error", "Fatal"):
                continue
            cond_i, fmt_i, prefix = None, 1, ""
        else:
            cond_i, fmt_i, prefix = ET_MACROS[macro]
        cond = ""
        if cond_i is not None:
            if len(args) <= cond_i:
                continue
            cond = PH if define else " ".join(args[cond_i].split())
        fmt = ""
        if fmt_i is not None:
            if len(args) <= fmt_i:
                if macro in ("ET_CHECK_OK_OR_RETURN_ERROR", "ET_CHECK_OR_RETURN_ERROR"):
                    continue
            else:
                expr = PRI_MACRO.sub(lambda pm: "d" if pm.group(1) else 'd"', args[fmt_i])
                fmt = printf_template(cpp_template(expr)) if STRING.search(expr) else PH
        t = (prefix.replace("{cond}", cond if define else cond.replace("{}", "( )")) + fmt).strip()
        if literal_letters(t.replace("In function {}(), assert failed", "").replace("Check failed (", "")) < MIN_LITERAL:
            continue
        exc = "RuntimeError" if macro.startswith("THROW") else ""
        # a check that returns false to its caller (a dtype/shape utility the caller may try again with another
        # dtype, executorch#7170): the caller's own check says whether the run failed
        kind = "et_log" if macro == "ET_LOG" else "et_return_false" if macro in ET_SOFT else "et_check"
        out.append(Raw(t, exc, kind, path, _line_of(text, m.start()), bool(UNREACHABLE.search(t))))
    return out


# --------------------------------------------------------------------------------------------------- c10 binaries
# c10/cuda's allocator sources are not in wheels, and the public code index holds old copies only; the CUDA wheel's
# libc10_cuda.so holds their text. A C++ message is one string literal per piece between its streamed values, so
# each printable string of the library that reads as a sentence is one template: a piece that starts or ends with
# a blank had a value streamed next to it there ('{}'). Strings of INTERNAL ASSERTs are internal (they name the
# raising file and line, kept as the record's file). Used for ``--project c10_cuda`` only.
SENTENCE = re.compile(r"^[ A-Za-z(][\x20-\x7e]*$")


def binary_strings(path: str, minimum: int = 20) -> dict[str, str]:
    data = Path(path).read_bytes()
    out: dict[str, str] = {}
    for m in re.finditer(rb"[\x20-\x7e\n]{%d,}" % minimum, data):
        s = m.group().decode("ascii")
        if SENTENCE.match(s.split("\n", 1)[0]) and len(s.split()) >= 4:
            out.setdefault(s, "")
    return out


def strings_messages(release_path: str, strings: dict[str, str]) -> list[Raw]:
    out: list[Raw] = []
    for s in sorted(strings):
        if not re.search(r"[a-z]{3,} [a-z]{2,}", s) or re.search(r"[_A-Za-z]\w*::\w+\(|^_Z|%s|\{\}", s):
            continue
        if not re.search(r"not|cannot|can't|fail|invalid|unknown|unrecogni[sz]ed|out of memory|error|must|"
                         r"expected|exceed|only|requires?|unsupported|does not|doesn't|too (?:large|small|many)|"
                         r"should|please|unable|illegal|mismatch|no effect|ignores", s, re.IGNORECASE):
            continue
        internal = "INTERNAL ASSERT FAILED" in s or bool(re.search(r"std::|basic_string|max_size\(\)", s))
        where = re.search(r'at "[^"]*/(c10/[\w/]+\.\w+)":(\d+)', s)
        t = s.strip("\n")
        if internal:
            t = t.split(" INTERNAL ASSERT FAILED")[0] + " INTERNAL ASSERT FAILED at {}, please report a bug to PyTorch. {}"
        else:
            t = (PH if t.startswith(" ") else "") + t + (PH if t.endswith(" ") else "")
        file = where.group(1) if where else release_path
        exc = "torch.OutOfMemoryError" if "out of memory" in t else "RuntimeError"
        out.append(Raw(t, exc, "torch_check", file, int(where.group(2)) if where else 0, internal))
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
        elif path.endswith(".so"):
            raws.extend(strings_messages(path, STRINGS[path]))
        else:
            raws.extend(cpp_messages(path, text))
            if PROJECT == "executorch":
                raws.extend(et_messages(path, text))
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
    # the other projects (PROJECTS)
    (r"^torch/_dynamo/", "export_error"),
    (r"^c10/", "environment"),
    (r"^executorch/runtime/core/memory_allocator|^executorch/runtime/executor/memory_manager|"
     r"^executorch/runtime/core/hierarchical_allocator|^executorch/extension/memory_allocator/", "out_of_memory"),
    (r"^executorch/runtime/kernel/|^executorch/kernels/prim_ops/|^executorch/codegen/", "missing_custom_op"),
    (r"^executorch/kernels/", "shape_mismatch"),
    (r"^executorch/runtime/platform/", "environment"),
    (r"^executorch/runtime/core/(?:exec_aten|portable_type)/", "shape_mismatch"),  # tensor utilities
    (r"^executorch/exir/", "export_error"),
    (r"^executorch/backends/xnnpack/(?!runtime/)", "export_error"),
    (r"^executorch/", "package_error"),
    (r"^triton/runtime/autotuner", "autotune_error"),
    (r"^triton/(?:compiler/|backends/|runtime/build\.py)", "cpp_compile_error"),
    (r"^triton/", "lowering_error"),
]
NEW_PROJECT_PATHS = r"^(?:torch/_dynamo/|c10/cuda/|executorch/|triton/)"

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
# Keywords of the other projects (PROJECTS), tried before the ones above on their paths only.
KEYWORDS_MORE: list[tuple[str, str, str | None]] = [
    (r"out of memory|OutOfMemoryError|Memory allocation failed|[Ff]ailed to allocate|[Nn]ot enough memory|"
     r"MemoryAllocationFailed|[Oo]ut of (?:planned )?memory|exceed allowed memory", "out_of_memory", None),
    (r"[Rr]esize|static tensor|shape mismatch|[Ss]izes? (?:do not|don't) match|[Ii]ncompatible shape|broadcast",
     "shape_mismatch", r"^executorch/(?:runtime|kernels|extension)/"),
    (r"[Dd]type|ScalarType|scalar_type|[Ss]calar ?type", "dtype_mismatch", r"^executorch/(?:runtime|kernels)/"),
    (r"[Tt]ensor rank|rank which is immutable|[Ss]hape|[Nn]umber of dimensions", "shape_mismatch",
     r"^executorch/runtime/(?:core|executor)/"),
    (r"[Mm]issing operator|[Oo]perator .*(?:not found|missing)|out variant|can't be found|[Nn]o kernel|"
     r"[Kk]ernel .*not (?:found|registered)|not registered|operator registered|[Uu]nsupported operator|OpOverload",
     "missing_custom_op", r"^executorch/"),
    (r"[Dd]ynamic (?:shapes?|dim)|dynamic_shapes|\bSymInt\b|symbolic (?:value|integer|expression|shape)|"
     r"upper bound|[Uu]nbacked|\b[Cc]onstraints?\b|\bspeciali[sz]ed?\b", "dynamic_shape_violation",
     r"^torch/_dynamo/(?!exc)|^executorch/exir/"),
    (r"[Cc]ompiler|CC environment|[Cc]annot find|[Cc]ould not find|not found|No such file|CUDA_HOME|ROCM|"
     r"cuobjdump|nvdisasm|libcuda|ld\.lld|[Ii]nstall|Python\.h|TRITON_\w+_PATH", "environment",
     r"^triton/(?:runtime/build|backends/|compiler/|knobs)"),
    (r"ptxas|PTXAS|[Cc]ompilation (?:failed|error)|[Ff]ailed to compile", "cpp_compile_error", r"^triton/"),
    (r"[Ff]ailed to (?:open|read|load|mmap)|[Ii]nvalid (?:program|magic|header|flatbuffer)|[Cc]orrupt|"
     r"[Pp]rogram|[Mm]ethod .*(?:not found|failed)|\.pte\b", "package_error", r"^executorch/(?:runtime|extension)/"),
]
WARNING_WORDS = re.compile(r"has no effect|ignores|may be benign|technically allowed|is unnecessary|"
                           r"will be ignored|[Ff]alling back|[Dd]eprecated", re.IGNORECASE)

# wrappers that only carry another message: their family is the wrapped message's
CARRIER = re.compile(r"^(?:(?:Error|Exception in aoti_torch|Runtime error|\{\}CUDA (?:driver )?error|"
                     r"\{\}HIP error|L0 runtime error): \{\}|.*\) API call failed at \{\}, line \{\}|"
                     r"\{\} API call failed at \{\}, line \{\})$", re.DOTALL)
# API-call carriers that do name their cause
NOT_CARRIER = re.compile(r"constant_buffer|const_fold|load_constants|inf_and_nan")
# the other projects: a call that failed with an error code or status whose cause an earlier line says
# (ExecuTorch's 'method->execute() failed with error 0x12', 'KernelCall failed at instruction 0:0 in operator {}: 0x{}')
CARRIER_MORE = re.compile(r"(?:\b(?:[Ee]rror|[Ss]tatus|[Cc]ode|err)(?: code)?[:=]? ?(?:0x)?:?\{\}|: 0x\{\})\.?$")


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
    if any(re.search(NEW_PROJECT_PATHS, f) for f in files):
        return label_more(template, exc_type, files, kind)
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


def label_more(template: str, exc_type: str, files: list[str], kind: str) -> tuple[str, str]:
    """``label`` for the projects other than torch's AOTI path: the path family, refined by ``KEYWORDS_MORE``. A
    Python assert keeps its path family, as in ``label``."""
    fams = [path_family(f) for f in files]
    fam = max(set(fams), key=lambda f: (fams.count(f), f))
    if kind == "assert" or exc_type == "AssertionError":
        return fam, "path"
    text = f"{exc_type.rsplit('.', 1)[-1]}: {template}"  # the class, not its module's words
    for rx, kfam, where in KEYWORDS_MORE:
        if where is not None and not any(re.search(where, f) for f in files):
            continue
        if re.search(rx, text):
            return kfam, "keyword" if kfam != fam else "path"
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
        out[mid] = {"family": fam, "internal": internal, "carrier": carrier, "note": cols[4] if len(cols) > 4 else "",
                    "warning": cols[5] if len(cols) > 5 else "-"}
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
                                   "releases": set(), "internal": r.internal, "warning": r.warning}
            rec["kinds"][r.kind] = rec["kinds"].get(r.kind, 0) + 1
            rec["files"].setdefault(r.path, r.line)
            rec["releases"].add(release)
            rec["internal"] = rec["internal"] and r.internal
            rec["warning"] = rec["warning"] and r.warning
            rec["template"] = r.template  # the newest wording of the same collapsed text
    out = []
    for (_, exc_type), rec in recs.items():
        files = sorted(rec["files"])
        rels = sorted((r for r in rec["releases"] if r[:1].isdigit()), key=_release_key) or \
            sorted(rec["releases"])  # only seen in source snapshots (commit:<sha>), not in a release
        kinds = sorted(rec["kinds"])
        if "et_return_false" in kinds and len(kinds) > 1:  # soft only where every site is (a kernel's hard check
            kinds.remove("et_return_false")                # with the same text makes the line evidence)
        kind = max(kinds, key=lambda k: rec["kinds"][k])
        mid = message_id(rec["template"], exc_type)
        family, basis = label(rec["template"], exc_type, files, kind)
        internal = rec["internal"]
        # a library's strings do not say whether TORCH_WARN or TORCH_CHECK printed them: the words do
        warning = rec["warning"] or bool(all(f.endswith(".so") for f in files) and WARNING_WORDS.search(rec["template"]))
        carrier = bool(CARRIER.match(collapse(rec["template"]))) and not NOT_CARRIER.search(rec["template"])
        own = re.sub(r"^(?:In function \{\}\(\), assert failed|Check failed) \(.*?\): ", "", collapse(rec["template"]))
        if PROJECT != "torch" and CARRIER_MORE.search(own) and re.search(r"[Ff]ail", own):
            carrier = True
        m = manual.get(mid)
        if m:
            if m["family"] != "-":
                family, basis = m["family"], "manual"
            if m["internal"] in ("y", "n"):
                internal = m["internal"] == "y"
            if m["carrier"] in ("y", "n"):
                carrier = m["carrier"] == "y"
            if m["warning"] in ("y", "n"):
                warning = m["warning"] == "y"
        if PROJECT != "torch":  # messages.jsonl (torch) predates the key: all its records are errors
            out.append({"id": mid, "template": rec["template"], "exc_type": exc_type, "kind": kind,
                        "files": [f"{f}:{rec['files'][f]}" for f in files],
                        "first_version": rels[0], "last_version": rels[-1], "versions": len(rels),
                        "family": family, "basis": basis, "internal": internal, "carrier": carrier,
                        "warning": warning})
            continue
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
    ap.add_argument("--strings", nargs="*", default=[], help="RELEASE=FILE: a C++ library or a torch wheel holding "
                    "it (--project c10_cuda)")
    ap.add_argument("--project", default="torch", choices=sorted(PROJECTS),
                    help="which sources to read (default: torch's AOTI path, messages.jsonl)")
    ap.add_argument("--manual", default=str(Path(__file__).with_name("manual.tsv")))
    ap.add_argument("-o", "--output", default="-")
    args = ap.parse_args(argv)
    if args.tags and not args.git_dir:
        ap.error("tags need --git-dir")
    global PROJECT
    PROJECT = args.project
    releases = [git_files(args.git_dir, t) for t in args.tags]
    releases += [strings_files(s) for s in args.strings]
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
