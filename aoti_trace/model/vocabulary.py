"""The vocabulary every layer shares: families, severities, roles, precisions, phases, and what counts as user code.

Each term is defined here once; the finding contract (:mod:`aoti_trace.model.findings`), the rule schema
(:mod:`aoti_trace.engine.schema`), ingest and the reports import it from this module.

Phases and their routing come from the generalization notes (docs/design/generalization.md): the module that
raised an error says which stage of AOTI failed, across torch versions, even when the message wording changed.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[str, ...] = get_args(Severity)  # most severe first

Role = Literal["cause", "symptom", "carrier", "noise"]
ROLES: tuple[str, ...] = get_args(Role)  # strongest first
# the roles whose error finding says why a run failed (a carrier says only how it died; noise, nothing)
EXPLAINING_ROLES: frozenset[str] = frozenset({"cause", "symptom"})

Precision = Literal["very-high", "high", "medium", "low"]
PRECISIONS: tuple[str, ...] = get_args(Precision)  # strongest first

# The closed family vocabulary. It is part of the JSON contract: add, never rename.
Family = Literal[
    "triton_index_oob",
    "device_mismatch",
    "constant_loading",
    "deprecated_api",
    "shape_mismatch",
    "dtype_mismatch",
    "dynamic_shape_violation",
    "nan_assert",
    "illegal_memory_access",
    "cpp_compile_error",
    "missing_custom_op",
    "package_error",
    "cuda_version_mismatch",
    "out_of_memory",
    "segfault",
    "lowering_error",
    "export_error",
    "autotune_error",
    "environment",
    "log_damage",
    "unexplained",
    "distributed",
]
FAMILIES: tuple[str, ...] = get_args(Family)
# Families that say how a process died, not why (the ladder keeps climbing past a finding of these).
CARRIER_FAMILIES: frozenset[str] = frozenset({"segfault", "log_damage"})

# Log levels of a line (or a logged traceback) that torch, or ExecuTorch, wrote and went on from: not an error.
HANDLED_LEVELS: tuple[str, ...] = ("V", "I", "W", "D")

# Where in the life of an AOTI model a failure happened.
Phase = Literal["export", "compile", "lowering", "autotune", "build", "package", "load", "run", "user", "unknown"]
PHASES: tuple[str, ...] = get_args(Phase)

PHASE_TEXT: dict[str, str] = {
    "export": "torch.export (tracing the model)",
    "compile": "the AOTInductor compile",
    "lowering": "Inductor lowering / code generation",
    "autotune": "autotuning kernel choices",
    "build": "the C++/CUDA build of the generated code",
    "package": "writing the .pt2 package",
    "load": "loading the compiled model",
    "run": "running the compiled model",
    "user": "your own code (outside torch)",
    "unknown": "an unknown phase",
}

# The family of a failure that no rule explains, by the phase it happened in: a failure inside an AOTI phase belongs
# to that phase's family; one in user code, at run time with no cause, or with no evidence at all is `unexplained`.
PHASE_FAMILY: dict[str, str] = {
    "export": "export_error",
    "compile": "lowering_error",
    "lowering": "lowering_error",
    "autotune": "autotune_error",
    "build": "cpp_compile_error",
    "package": "package_error",
    "load": "package_error",
    "run": "unexplained",
    "user": "unexplained",
    "unknown": "unexplained",
}

# ---------------------------------------------------------------------------------------------- user code
# Paths are matched with Python `re` on a bounded prefix (a path parsed from one frame line), never on a whole line.
MAX_PATH = 1024
_TORCH_FILE = re.compile(r"(?:^|[/\\])(?:torch|functorch|torchgen)[/\\]")
_STDLIB_FILE = re.compile(
    r"[/\\][Ll]ib[/\\]python\d+(?:\.\d+)?[/\\](?!site-packages|dist-packages)|^<frozen |^<frozen>"
    # Windows: '<python>\Lib\x.py' of an installed Python (C:\Python311\Lib) or of a conda env (...\envs\X\Lib)
    r"|^[A-Za-z]:\\(?:[^\\]+\\)*?Lib\\(?!site-packages)"
)
# code generated at run time: Triton launchers ('<string>'), Inductor's cache, FX graph modules
_GENERATED_FILE = re.compile(r"^<string>$|^<eval_with_key>|[/\\]torchinductor_[^/\\]*[/\\]|^<fx-")
_SITE = re.compile(r"(?:site|dist)-packages[/\\](.*)$")
# Triton, the compiler under Inductor: its files are never the user's code (a user's own @triton.jit kernels live in
# the user's files)
_TRITON_FILE = re.compile(r"(?:site|dist)-packages[/\\]triton[/\\]|(?:^|[/\\])triton[/\\](?:compiler|backends|runtime|language)[/\\]")


def is_torch(path: str) -> bool:
    """The file belongs to torch (installed, or a source checkout)."""
    return bool(_TORCH_FILE.search(path[:MAX_PATH]))


def is_user(path: str) -> bool:
    """The file is the user's code or a third-party library: outside torch, Triton, the standard library and generated
    code.

    This is the one definition of "user code" (a library such as transformers that calls torch counts as user code:
    it is the caller's side of the torch API; Triton, which torch calls to compile its kernels, does not)."""
    p = path[:MAX_PATH]
    return not (_TORCH_FILE.search(p) or _STDLIB_FILE.search(p) or _GENERATED_FILE.search(p) or _TRITON_FILE.search(p))


def torch_relative(path: str) -> str:
    """``.../site-packages/torch/x.py`` -> ``torch/x.py``; a checkout path -> from its last ``torch/``; Windows
    separators become ``/``."""
    p = path[:MAX_PATH].replace("\\", "/")
    m = _SITE.search(p)
    if m:
        return m.group(1)
    i = p.rfind("/torch/")
    return p[i + 1:] if i >= 0 else p


# ---------------------------------------------------------------------------------------------- phase routing
# (phase, function regex or None, file regex or None): tried on each frame from the innermost outwards; the first
# frame that matches a route decides. Files are matched on the '/'-separated path (see torch_relative()).
_ROUTES: list[tuple[str, str | None, str | None]] = [
    # the package API: calling, loading, writing a compiled model
    ("run", r"^(?:__call__|boxed_run|run|optimized|forward)$",
     r"(?:_inductor/package/package|export/pt2_archive/_package|_export/__init__|_inductor/aoti_runner\w*)\.py$"),
    ("load", r"^(?:aoti_load_package|load_package|load_pt2|_load_aoti|aot_load|load|<dictcomp>|__init__)$",
     r"(?:_inductor/__init__|_inductor/package/package|export/pt2_archive/_package|_export/__init__)\.py$"),
    # torch.export.save writes a .pt2 too
    ("package", r"^save$", r"(?:^|/)torch/(?:_export|export)/__init__\.py$"),
    ("package", r"^(?:package_aoti|_package_aoti_files|package_pt2|_package_\w+|save_pt2|compile_so)$",
     r"(?:_inductor/package/package|export/pt2_archive/_package|_inductor/package/\w+)\.py$"),
    ("package", None, r"(?:_inductor/package/|export/pt2_archive/)"),
    # torch.export's serde: encoding the program for a .pt2 is writing the package, decoding it is loading one
    ("load", r"^(?:deserialize\w*|_deserialize\w*|load)$", r"_export/serde/serialize\.py$"),
    ("package", None, r"_export/serde/serialize\.py$"),
    # a Triton kernel launched by Inductor's Python runtime (torch.compile; AOTI launches from C++)
    ("run", r"^(?:run|launcher|__call__|_launch\w*)$", r"_inductor/runtime/triton_heuristics\.py$"),
    # the C++/CUDA/Triton build of the generated code
    ("build", None, r"(?:_inductor/(?:cpp_builder|codecache|async_compile|compile_worker/\w+|runtime/compile_tasks)"
                    r"|utils/cpp_extension|triton/compiler/\w+|triton/backends/\w+/compiler)\.py$"),
    # a template kernel's code generation in select_algorithm is lowering, not the benchmark of its choices
    ("lowering", r"^(?:def_kernel|generate|make_kernel_render|render|store_output|load_input|modification)$",
     r"_inductor/select_algorithm\.py$"),
    # a Triton kernel's configs built when its module is loaded (the heuristics' decorators and their checks): code
    # generation of the compile, not the benchmark of choices
    ("lowering", r"^(?:triton_config\w*|check_config|check_max_block|pointwise|reduction|persistent_reduction"
                 r"|cooperative_reduction|split_scan|foreach|template|_\w*reduction_configs)$",
     r"_inductor/runtime/triton_heuristics\.py$"),
    # autotuning: Inductor's Python runtime runs only to benchmark kernel choices under AOTI
    ("autotune", None, r"(?:_inductor/(?:select_algorithm|autotune_process|runtime/\w+)|triton/runtime/autotuner)\.py$"),
    # Inductor lowering, scheduling, code generation
    ("lowering", None, r"_inductor/(?:lowering|graph|scheduler|ir|decomposition|sizevars|dependencies"
                       r"|mkldnn_lowerings|quantized_lowerings|pattern_matcher|virtualized)\.py$"),
    ("lowering", None, r"_inductor/(?:codegen|fx_passes|kernel)/"),
    # the rest of Inductor: the compile as a whole
    ("compile", None, r"(?:^|/)torch/_inductor/"),
    # tracing: torch.export, its non-strict tracer, Dynamo, AOTAutograd; and the ONNX exporter, which translates
    # the traced graph (docs/families.md: an exporter rejecting the graph is an export error)
    ("export", None, r"(?:^|/)torch/(?:export|_export|_dynamo|onnx)/"),
    # ExecuTorch's lowering of the exported program (to_edge, partitioners, backend passes, the emitter): an exporter
    # rejecting the traced graph (a log may elide the path's start: '.../backends/qualcomm/partition/x.py')
    ("export", None, r"(?:^|/)executorch/(?:exir|backends)/|(?:^|/)backends/\w+/(?:partition|_passes|builders)/\w+\.py$"),
    ("export", r"^(?:export|_export|export_for_training|_export_for_training|draft_export|trace_export)$",
     r"(?:^|/)torch/"),
]
_COMPILED_ROUTES = [(p, re.compile(f) if f else None, re.compile(g) if g else None) for p, f, g in _ROUTES]

# The torch API a user line calls, when the traceback has no torch frame (an error raised at the call itself).
_CALL_ROUTES: list[tuple[str, re.Pattern[str]]] = [
    ("load", re.compile(r"\b(?:aoti_load_package|aot_load|load_package|AOTIModelPackageLoader|AOTIModelContainerRunner\w*)\s*\(")),
    ("compile", re.compile(r"\b(?:aoti_compile_and_package|aot_compile|compile_fx_aot)\s*\(")),
    ("export", re.compile(r"\b(?:torch\.export\.export|export_for_training|draft_export|torch\.export\.load|export)\s*\(")),
]


def _route(func: str, path: str) -> str | None:
    for phase, fre, file_re in _COMPILED_ROUTES:
        if (fre is None or fre.search(func[:200])) and (file_re is None or file_re.search(path)):
            return phase
    return None


def route_phase(frames: list[tuple[str, str]]) -> tuple[str, int | None]:
    """``(phase, index)`` from ``(file, function)`` frames listed innermost first: the first frame that matches a
    route, else ``("user", None)`` when every frame is user code, else ``("unknown", None)``.

    Autotuning generates and launches each candidate kernel, so a lowering, compile or kernel-launch error with an
    autotuning frame further out happened while autotuning."""
    paths = [torch_relative(f) if is_torch(f) or "triton" in f else f.replace("\\", "/") for f, _ in frames]
    routes = [_route(func, path) for (_, func), path in zip(frames, paths)]
    for i, phase in enumerate(routes):
        if phase is None:
            continue
        if phase in ("lowering", "compile", "run") and "autotune" in routes[i + 1:]:
            j = routes.index("autotune", i + 1)
            return "autotune", j
        return phase, i
    if frames and all(is_user(f) for f, _ in frames):
        return "user", None
    return "unknown", None


# The AOTI C++ runtime, by the source file of a c10 error ('Exception raised from <func> at <file>:<line>').
_CPP_ROUTES: list[tuple[str, re.Pattern[str]]] = [
    # the package loader and the runner's construction (its run-time errors come wrapped in run_func_(...))
    ("load", re.compile(r"torch/csrc/inductor/(?:aoti_package|aoti_runner)/")),
    ("compile", re.compile(r"torch/csrc/inductor/aoti_eager/")),
    ("run", re.compile(r"torch/csrc/inductor/")),
]
CPP_ORIGIN = re.compile(r"Exception raised from (?P<func>\S+) at (?P<file>\S+?):\d+")

# Raising modules whose failures belong to a family whatever the phase (the symbolic-shape engine raises during
# export and during the compile alike; the proxy executor runs custom/extern ops).
_MODULE_FAMILIES: list[tuple[str, re.Pattern[str]]] = [
    ("dynamic_shape_violation", re.compile(r"(?:^|/)torch/fx/experimental/")),
    ("missing_custom_op", re.compile(r"torch/csrc/inductor/aoti_torch/oss_proxy_executor")),
]
DATA_DEPENDENT = re.compile(r"GuardOnDataDependentSymNode|data[- ]dependent", re.IGNORECASE)


def route_cpp(path: str | None) -> str | None:
    """The phase of a C++ source file of torch's AOTI runtime, if it is one."""
    if not path:
        return None
    p = path[:MAX_PATH].replace("\\", "/")
    return next((phase for phase, pattern in _CPP_ROUTES if pattern.search(p)), None)


def module_family(path: str | None, text: str = "") -> str | None:
    """The family a failure raised in ``path`` (a torch-relative Python file or a C++ source) belongs to whatever its
    phase, if the module decides it; ``text`` (the exception type and message) tells data-dependent failures apart."""
    if not path:
        return None
    p = path[:MAX_PATH].replace("\\", "/")
    family = next((fam for fam, pattern in _MODULE_FAMILIES if pattern.search(p)), None)
    if family == "dynamic_shape_violation" and DATA_DEPENDENT.search(text[:MAX_PATH]):
        return "export_error"
    return family


def route_call(code: str | None) -> str | None:
    """The phase of the torch API that a line of user code calls (``aoti_load_package(...)`` -> load), if any."""
    if not code:
        return None
    head = code[:MAX_PATH]
    return next((phase for phase, pattern in _CALL_ROUTES if pattern.search(head)), None)
