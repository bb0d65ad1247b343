"""The message catalogue of torch's AOTI path, and how much of it the rules cover.

``rules/catalogue/messages.jsonl`` lists the error messages torch itself raises on the AOTI path (export,
Inductor, the AOTI C++ runtime, symbolic shapes), extracted from its source at every release from 2.3 on by
``rules/catalogue/extract.py``, each labelled with the family it belongs to. This module turns every message into
the log torch would print for it, analyses all of them in one batch through the normal pipeline (``ingest.text``
per message, one merged ``Frames``, one ``engine.evaluate``) and reports **coverage**: the share of messages whose
primary finding has the catalogue's family.

Two modes:

* ``message``: the log has no torch frame (a Python traceback with only the user's frame; a C++ error without its
  ``Exception raised from`` line): only the text of the message can route it.
* ``frame``: the traceback also has the innermost torch frame in the raising file (Python), or the
  ``Exception raised from <func> at <file>:<line>`` line (C++ checks), so a rule may route on the raising module.

Messages flagged ``internal`` (not a failure a user can hit), ``carrier`` (a wrapper whose family is that of the
message it carries: ``Error: {}``, ``... API call failed at {}, line {}``) or ``warning`` (a warning text) are
catalogued but not counted.

The same format holds the catalogues of the other code AOTI logs come from (``dynamo.jsonl``, ``c10_cuda.jsonl``,
``executorch.jsonl``, ``triton.jsonl``, ``platform.jsonl``; ``--catalogue`` measures one of them). ExecuTorch's
log and check lines (kinds ``et_log``, ``et_check``, ``et_return_false``) are built as ExecuTorch prints them: the bare
line in ``message`` mode, with its ``E``/``F`` log header naming the file in ``frame`` mode. ``platform.jsonl``'s
messages (kind ``platform``: CUDA/HIP runtime errors, NCCL, compilers, linkers, the dynamic loader, Python's import
system) have no torch frame: the text alone in ``message`` mode, the text as its tool prints it (``CUDA error: ``,
``ptxas fatal   : ``, ``/usr/bin/ld: ``) in ``frame`` mode, the prefix naming the tool (:data:`PLATFORM_PREFIX`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from aoti_trace.model.errors import InputError
from aoti_trace.model.vocabulary import FAMILIES
from aoti_trace.model.frames import Frames, conform

if TYPE_CHECKING:
    from aoti_trace.library.loader import RulesSource

Mode = Literal["message", "frame"]
MODES: tuple[Mode, ...] = ("message", "frame")
KINDS = ("python_raise", "assert", "torch_check", "aoti_check", "cpp_throw", "error_print", "et_log", "et_check",
         "et_return_false", "warning", "platform")
# 'unexplained' is for failures that are not torch's; catalogue labels never use it, but it is a valid family
CATALOGUE_FAMILIES = tuple(dict.fromkeys((*FAMILIES, "unexplained")))
USER_FILE = "/home/user/repro.py"
SITE = "/usr/lib/python3.11/site-packages/"
CPP_ROOT = "/pytorch/"
# C++ messages that the AOTI shim / model runtime print on stderr before Python sees them
SHIM = re.compile(r"^torch/csrc/inductor/aoti_torch/")
RUNTIME = re.compile(r"^torch/csrc/inductor/aoti_runtime/|^torch/_inductor/codegen/(?:aoti_runtime/|cpp_wrapper)")


class Message(BaseModel):
    """One line of ``messages.jsonl``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^M[0-9a-f]{10}$")
    template: str = Field(min_length=1, description="literal text; '{}' for each interpolated part")
    exc_type: str = Field(description="exception type the user sees; '' for a printed line")
    kind: Literal["python_raise", "assert", "torch_check", "aoti_check", "cpp_throw", "error_print", "et_log",
                  "et_check", "et_return_false", "warning", "platform"]
    files: list[str] = Field(min_length=1, description="'path:line' of the raising statement, per file")
    first_version: str
    last_version: str
    versions: int = Field(ge=1, description="how many of the scanned sources have it")
    family: str
    basis: Literal["path", "keyword", "manual"]
    internal: bool
    carrier: bool
    warning: bool = Field(default=False, description="a warning or info text, not an error (files other than "
                                                     "messages.jsonl)")

    @property
    def path(self) -> str:
        """The first raising file."""
        return self.files[0].rsplit(":", 1)[0]

    @property
    def line(self) -> int:
        """The line of the first raising statement; 0 where the file names no line (``platform.jsonl``'s
        ``cuda-runtime:cudaErrorAssert``, ``gcc:collect2``)."""
        tail = self.files[0].rsplit(":", 1)[-1]
        return int(tail) if tail.isdigit() else 0

    @property
    def counted(self) -> bool:
        """Counted in coverage: a failure a user can hit, with a family of its own."""
        return not self.internal and not self.carrier and not self.warning

    @property
    def is_cpp(self) -> bool:
        return self.kind in ("aoti_check", "cpp_throw", "error_print") or \
            (self.kind == "torch_check" and not self.path.endswith(".py"))


def default_path() -> Path:
    from aoti_trace.library.loader import default_rules_dir

    return default_rules_dir() / "catalogue" / "messages.jsonl"


def load(path: Path | None = None) -> list[Message]:
    """The catalogue; a line that does not fit the schema is an ``InputError`` naming it."""
    path = path or default_path()
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"cannot read the message catalogue {path}: {exc.strerror}") from None
    out = []
    for n, ln in enumerate(text.splitlines(), 1):
        if not ln.strip():
            continue
        try:
            msg = Message.model_validate_json(ln)
        except ValueError as exc:
            raise InputError(f"{path}:{n}: not a catalogue line ({str(exc).splitlines()[0]})") from None
        if msg.family not in CATALOGUE_FAMILIES:
            raise InputError(f"{path}:{n}: unknown family {msg.family!r}")
        out.append(msg)
    return out


# ------------------------------------------------------------------------------------------------ the logs
NUMBER_BEFORE = re.compile(r"(?:size|dim|index|idx|got|expected|value|line|numel|ndim|count|len|rank|stride|offset|"
                           r"version|[<>=]=?|at|of|by|\(|\[|#)\W{0,3}$", re.IGNORECASE)


def fill(template: str) -> str:
    """The template with each ``{}`` replaced by a plausible value (a number after words like 'size' or 'got',
    a name after a quote, a device after 'device', else an identifier)."""
    parts = template.split("{}")
    out = [parts[0]]
    for i, nxt in enumerate(parts[1:]):
        before = "".join(out)[-24:]
        if nxt.startswith("[") and not before.strip():
            value = "input_handles"
        elif before.endswith("(") and "dtype" in template:
            value = "at::kFloat"
        elif before.endswith(("'", '"', "`")):
            value = "arg0_1"
        elif re.search(r"device\W{0,3}$", before, re.IGNORECASE):
            value = "cuda:0"
        elif re.search(r"dtype\W{0,3}$", before, re.IGNORECASE):
            value = "torch.float32"
        elif NUMBER_BEFORE.search(before):
            value = str(2 + i)
        else:
            value = f"x{i}" if i else "x"
        out += [value, nxt]
    return "".join(out)


def _qualified(exc_type: str) -> str:
    return exc_type or "RuntimeError"


def _cpp_function(msg: Message) -> str:
    stem = Path(msg.path).stem
    return f"torch::aot_inductor::{stem}"


# how each platform source prints its message (frame mode of a ``platform`` message): by the first file of the
# entry, else by its source tag; ``{}`` is the message
PLATFORM_PREFIX = {
    "cuda-runtime": "RuntimeError: CUDA error: {}",
    "hip-runtime": "RuntimeError: HIP error: {}",
    "nccl": "torch.distributed.DistBackendError: NCCL error in: "
            "/pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:1, {}",
    "nvcc": "nvcc fatal   : {}",
    "ptxas": "ptxas fatal   : {}",
    "cuda-headers": "/usr/local/cuda/include/crt/host_config.h:137:2: error: #error -- {}",
    "glibc": "ImportError: /usr/lib/python3/site-packages/example/_C.so: {}",  # dlerror(): "<object>: <message>"
    "binutils": "/usr/bin/ld: {}",
    "lld": "ld.lld: error: {}",
    "gcc": "g++: error: {}",
    "gcc:libcpp/files.cc": "/tmp/torchinductor_user/ab/cabc.cpp:2:10: {}",
    "gcc:collect2": "collect2: error: {}",
    "gcc:gcc/diagnostic.cc": "{}",
    "cpython": "ImportError: {}",
    "cpython:Lib/importlib/_bootstrap.py:1117": "ModuleNotFoundError: {}",
    "numpy": "{}",
    "ninja": "ninja: {}",
    "cmake": "CMake Error at CMakeLists.txt:1 (find_package):\n  {}",
    "msvc:C1083": "C:\\tmp\\torchinductor_user\\ab\\cabc.cpp(2): fatal error C1083: {}",
    "msvc:LNK2019": "cabc.obj : error LNK2019: {}",
    "msvc:LNK1120": "cabc.pyd : fatal error LNK1120: {}",
    "msvc": "LINK : fatal error {code}: {}",
}


def platform_line(msg: Message, text: str) -> str:
    """``text`` (a filled ``platform`` template) as the tool of ``msg`` prints it."""
    first = msg.files[0]
    tag, _, rest = first.partition(":")
    form = PLATFORM_PREFIX.get(first) or PLATFORM_PREFIX.get(tag) or "{}"
    return form.replace("{code}", rest).replace("{}", text, 1)


def build_log(msg: Message, mode: Mode) -> str:
    """The minimal log torch prints when it raises ``msg``: a traceback whose outermost frame is the user's
    ``repro.py``; in ``frame`` mode the innermost torch frame (Python) or the ``Exception raised from`` line (C++
    checks) names the raising file."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    text = fill(msg.template)
    head = ["Traceback (most recent call last):",
            f'  File "{USER_FILE}", line 12, in <module>',
            "    main()"]
    if msg.kind == "error_print":  # a line printed on stderr (std::cerr, LOG(ERROR)); no exception of its own
        return text + "\n"
    if msg.kind == "platform":  # a runtime's, compiler's, linker's or loader's message: the text alone, or (frame
        if mode == "message":   # mode) as its tool prints it, the prefix naming the tool
            return text + "\n"
        return platform_line(msg, text) + "\n"
    if msg.kind in ("et_log", "et_check", "et_return_false"):  # ExecuTorch's log line; its header names the file in frame mode
        if mode == "message":
            return text + "\n"
        level = "F" if text.startswith("In function ") else "E"
        return f"{level} 00:00:00.000000 executorch:{Path(msg.path).name}:{msg.line}] {text}\n"
    if not msg.is_cpp:
        frames = head[:]
        if mode == "frame":
            fn = "raising_function"  # the catalogue does not record the function: a name no route keys on
            frames += [f'  File "{SITE}{msg.path}", line {msg.line}, in {fn}',
                       f"    raise {msg.exc_type.rsplit('.', 1)[-1]}(...)" if msg.kind != "assert" else "    assert ..."]
        return "\n".join([*frames, f"{_qualified(msg.exc_type)}: {text}"]) + "\n"
    # C++: RuntimeError: <msg>, and for c10 checks the 'Exception raised from' line
    lines: list[str] = []
    if SHIM.search(msg.path):
        lines.append(f"Exception in aoti_torch: {text}")
    elif RUNTIME.search(msg.path):
        lines.append(f"Error: {text}")
    lines += head
    lines.append(f"{_qualified(msg.exc_type)}: {text}")
    if mode == "frame" and msg.kind in ("torch_check", "aoti_check"):
        where = msg.path if not msg.path.endswith(".py") else "torch/csrc/inductor/aoti_torch/shim_common.cpp"
        lines.append(f"Exception raised from {_cpp_function(msg)} at {CPP_ROOT}{where}:{msg.line} "
                     "(most recent call first):")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ coverage
@dataclass
class Result:
    """One message in one mode: what the analysis made of its log."""

    message: Message
    mode: str
    family: str | None  # family of the primary finding; None when there is none
    rule_id: str | None

    @property
    def covered(self) -> bool:
        return self.family == self.message.family


@dataclass
class Coverage:
    mode: str
    results: list[Result] = field(default_factory=list)

    @property
    def counted(self) -> list[Result]:
        return [r for r in self.results if r.message.counted]

    @property
    def covered(self) -> int:
        return sum(r.covered for r in self.counted)

    @property
    def share(self) -> float:
        return self.covered / len(self.counted) if self.counted else 0.0

    def by_family(self) -> dict[str, tuple[int, int]]:
        """family -> (covered, counted)."""
        out: dict[str, list[int]] = {}
        for r in self.counted:
            c = out.setdefault(r.message.family, [0, 0])
            c[0] += r.covered
            c[1] += 1
        return {k: (v[0], v[1]) for k, v in sorted(out.items())}

    def misses(self) -> list[Result]:
        return [r for r in self.counted if not r.covered]


def analyse(messages: list[Message], modes: tuple[Mode, ...] = MODES, rules_path: RulesSource = None
            ) -> dict[str, Coverage]:
    """Build every message's log in every mode, read them all into one ``Frames`` (one run per message and
    mode) and evaluate the rules once."""
    from aoti_trace import engine, library
    from aoti_trace.ingest.text.reader import read_text_bytes

    parts: dict[str, list[pl.DataFrame]] = {}
    run_of: dict[str, tuple[Message, Mode]] = {}
    for mode in modes:
        for msg in messages:
            run_id = f"{mode}:{msg.id}"
            run_of[run_id] = (msg, mode)
            fr = read_text_bytes(build_log(msg, mode).encode(), "stderr", run_id, f"catalogue/{msg.id}.txt")
            for name, df in fr.tables.items():
                parts.setdefault(name, []).append(conform(name, df))
    frames = Frames()
    for name, dfs in parts.items():
        frames.add(name, pl.concat(dfs, how="diagonal_relaxed"))
    # the failure rules must not read the catalogue they are measured against
    from aoti_trace.ingest.text.failure import failures_frame

    frames.add("failures", failures_frame(frames, catalogue=False))
    findings = engine.evaluate(library.load_rules(rules_path), frames)
    primary: dict[str, tuple[str, str]] = {}
    for f in findings:  # ranked; per run the first error (else warning cause) is that run's primary
        if f.run_id in primary:
            continue
        if f.severity == "error" or (f.severity == "warning" and f.role == "cause"):
            primary[f.run_id] = (f.family, f.rule_id)
    out: dict[str, Coverage] = {mode: Coverage(mode) for mode in modes}
    for run_id, (msg, mode) in run_of.items():
        fam, rule = primary.get(run_id, (None, None))
        out[mode].results.append(Result(msg, mode, fam, rule))
    return out


def cluster_key(msg: Message) -> str:
    """Messages that one rule would plausibly cover together: the first four literal words of the template."""
    words = re.findall(r"[A-Za-z_][\w.]*", msg.template.replace("{}", " "))
    return " ".join(words[:4]) or msg.template[:40]


def miss_clusters(cov: Coverage) -> list[dict[str, Any]]:
    """Misses grouped by (family, exception type, cluster key), largest first."""
    groups: dict[tuple[str, str, str], list[Result]] = {}
    for r in cov.misses():
        key = (r.message.family, r.message.exc_type.rsplit(".", 1)[-1], cluster_key(r.message))
        groups.setdefault(key, []).append(r)
    out: list[dict[str, Any]] = []
    for (fam, exc, cluster), rs in groups.items():
        got = Counter(r.family or "none" for r in rs).most_common(1)[0][0]
        out.append({"family": fam, "exc_type": exc, "cluster": cluster, "count": len(rs), "got": got,
                    "example": rs[0].message.template[:160], "example_id": rs[0].message.id,
                    "files": sorted({r.message.path for r in rs})[:3]})
    out.sort(key=lambda c: (-c["count"], c["family"], c["cluster"]))
    return out


def _module(path: str) -> str:
    """``torch/_inductor/codegen/cpp.py`` -> ``torch/_inductor/codegen/``; top-level modules keep their name."""
    parts = path.split("/")
    return "/".join(parts[:3]) + "/" if len(parts) > 3 else path


def miss_groups(cov: Coverage) -> list[dict[str, Any]]:
    """Misses grouped by (family, exception type, raising module): what one routing rule would cover."""
    groups: dict[tuple[str, str, str], list[Result]] = {}
    for r in cov.misses():
        key = (r.message.family, r.message.exc_type.rsplit(".", 1)[-1] or "(printed)", _module(r.message.path))
        groups.setdefault(key, []).append(r)
    out: list[dict[str, Any]] = [{"family": f, "exc_type": e, "module": m, "count": len(rs),
            "got": Counter(r.family or "none" for r in rs).most_common(1)[0][0],
            "example": rs[0].message.template[:160]} for (f, e, m), rs in groups.items()]
    out.sort(key=lambda g: (-g["count"], g["family"], g["module"], g["exc_type"]))
    return out


def report(covs: dict[str, Coverage], family: str | None = None, misses: bool = False, limit: int = 30) -> dict[str, Any]:
    """The JSON form of a coverage run (what ``aoti-trace rules coverage -f json`` prints)."""
    out: dict[str, Any] = {"schema": "aoti-trace.coverage/v1", "modes": {}}
    for mode, cov in covs.items():
        fams = cov.by_family()
        if family:
            fams = {k: v for k, v in fams.items() if k == family}
        counted = sum(v[1] for v in fams.values())
        covered = sum(v[0] for v in fams.values())
        entry: dict[str, Any] = {
            "counted": counted, "covered": covered, "share": round(covered / counted, 4) if counted else 0.0,
            "families": {k: {"covered": c, "counted": n} for k, (c, n) in fams.items()},
        }
        if misses:
            cl = [c for c in miss_clusters(cov) if not family or c["family"] == family]
            entry["miss_clusters"] = cl[:limit]
            gr = [g for g in miss_groups(cov) if not family or g["family"] == family]
            entry["miss_groups"] = gr[:limit]
        out["modes"][mode] = entry
    return out


def render_text(rep: dict[str, Any]) -> str:
    lines = []
    for mode, e in rep["modes"].items():
        lines.append(f"mode {mode}: {e['covered']}/{e['counted']} catalogued messages routed to their family "
                     f"({100 * e['share']:.1f}%)")
        for fam, v in e["families"].items():
            share = 100 * v["covered"] / v["counted"] if v["counted"] else 0.0
            lines.append(f"  {fam:<26} {v['covered']:>5}/{v['counted']:<5} {share:5.1f}%")
        if "miss_groups" in e:
            lines.append(f"  largest miss groups ({mode}): count  family  exc_type  raising module")
            for g in e["miss_groups"]:
                lines.append(f"    {g['count']:>4}  {g['family']}  {g['exc_type']}  {g['module']}  (got {g['got']})")
        if "miss_clusters" in e:
            lines.append(f"  top miss clusters ({mode}): count  family  got  exc_type  example")
            for c in e["miss_clusters"]:
                lines.append(f"    {c['count']:>4}  {c['family']}  got {c['got']}  {c['exc_type']}: {c['example']!r}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def dumps(rep: dict[str, Any]) -> str:
    return json.dumps(rep, indent=2)
