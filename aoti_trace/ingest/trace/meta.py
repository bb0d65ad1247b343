"""Decoding of the few TORCH_TRACE records whose JSON matters: ``str`` tables, stacks, ``compilation_metrics``.

Everything here is tolerant: a value of an unexpected type becomes null and is reported as ``schema_drift``;
text that does not decode (including JSON nested too deeply, see :mod:`aoti_trace.ingest.safe_json`) is reported
as ``bad_json``. Nothing raises on bad input.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from aoti_trace.ingest import safe_json
from aoti_trace.model.vocabulary import is_user

# Event names torch 2.13 can emit (grep of trace_structured/dtrace_structured calls) plus tlparse's Envelope keys.
KNOWN_EVENTS = frozenset(
    """str artifact graph_dump chromium_event compilation_metrics bwd_compilation_metrics
    aot_autograd_backward_compilation_metrics compilation_metrics_runtime bwd_compilation_metrics_runtime
    dynamo_start dynamo_output_graph dynamo_guards dynamo_cpp_guards_str guard_added_fast guard_added
    optimize_ddp_split_graph optimize_ddp_split_child compiled_autograd_graph aot_forward_graph aot_backward_graph
    aot_inference_graph aot_joint_graph inductor_pre_grad_graph inductor_post_grad_graph inductor_output_code
    inductor_input_graph link dump_file symbolic_shape_specialization describe_storage describe_tensor
    describe_source create_symbol create_unbacked_symbol expression_created missing_fake_kernel
    mismatched_fake_kernel propagate_real_tensors propagate_real_tensors_provenance guard_on_data_dependent_error
    exported_program export""".split()
)

# user-facing APIs: export family (phase 0) runs before the compile family (phase 1) in one compile session
EXPORT_APIS = frozenset({"export", "_export", "export_for_training", "_export_for_training", "draft_export",
                         "_draft_export", "export_for_inference", "_trace"})
AOTI_APIS = frozenset({"aoti_compile_and_package", "aot_compile", "aoti_compile", "compile_fx_aot",
                       "_aoti_compile_and_package_inner", "aot_load"})

# A frame is torch / library / stdlib (not user code) when its file matches this.
@dataclass
class Problems:
    """Damage collected while decoding: kind -> [count, first lineno, first detail]."""

    rows: dict[str, list[Any]] = field(default_factory=dict)

    def add(self, kind: str, lineno: int | None, detail: str, count: int = 1) -> None:
        if kind in self.rows:
            self.rows[kind][0] += count
        else:
            self.rows[kind] = [count, lineno, detail]


def parse_str_record(text: str, lineno: int, problems: Problems) -> tuple[int, str] | None:
    """``{"str": [path, id]}`` -> (id, path)."""
    try:
        env = safe_json.loads(text[text.index("] {") + 2:])
        path, sid = env["str"]
        if not isinstance(path, str) or not isinstance(sid, int):
            raise TypeError
        return sid, path
    except (ValueError, KeyError, TypeError):
        problems.add("bad_json", lineno, f"line {lineno}: interned string record does not decode")
        return None


def parse_stack(stack_tail: str) -> list[Any] | None:
    """The stack list from the text that follows ``"stack": [`` (the rest of the line is ignored)."""
    try:
        value, _ = safe_json.raw_decode("[" + stack_tail)
    except ValueError:
        return None
    return value if isinstance(value, list) else None


@dataclass
class Frame:
    depth: int
    filename: str | None
    line: int | None
    function: str | None
    code: str | None
    is_user: bool


def resolve_stack(raw: list[Any], strings: dict[int, str], lineno: int, problems: Problems) -> list[Frame]:
    """Stack frames (outermost first) with interned file names resolved through this file's ``str`` table."""
    frames = []
    for depth, fr in enumerate(raw):
        if not isinstance(fr, dict):
            problems.add("schema_drift", lineno, f"line {lineno}: stack frame is {type(fr).__name__}, not an object")
            continue
        fid = fr.get("filename")
        if isinstance(fid, int):
            filename = strings.get(fid)
            if filename is None:
                problems.add("schema_drift", lineno, f"line {lineno}: stack names interned string {fid}, never defined")
                filename = f"<str {fid}>"
        elif isinstance(fid, str):
            filename = fid
        else:
            filename = None
        line = fr.get("line")
        frames.append(Frame(
            depth=depth, filename=filename, line=line if isinstance(line, int) else None,
            function=fr.get("name") if isinstance(fr.get("name"), str) else None,
            code=fr.get("loc") if isinstance(fr.get("loc"), str) else None,
            is_user=filename is not None and is_user(filename),
        ))
    return frames


def user_call(frames: list[Frame], event: str | None) -> tuple[str | None, str | None]:
    """(api, 'file:line' of the user frame that called it).

    The first (outermost) step from user code into torch/library code: user code that torch calls back (a model's
    ``forward`` traced by export) sits deeper in the stack and is not the caller of the API.
    """
    for i in range(len(frames) - 1):
        if frames[i].is_user and not frames[i + 1].is_user:
            return frames[i + 1].function, f"{frames[i].filename}:{frames[i].line}"
    users = [f for f in frames if f.is_user]
    if not users:
        return None, None
    where = f"{users[-1].filename}:{users[-1].line}"
    return ("compile" if event == "dynamo_start" else None), where  # dynamo_start: stack ends in the compiled fn


ENTRY_APIS = EXPORT_APIS | AOTI_APIS | {"compile"}


def api_phase(api: str | None) -> int:
    return 0 if api in EXPORT_APIS else 1


# compilation_metrics fields read into `compiles`, with the JSON types they may have (None = null allowed).
METRIC_TYPES: dict[str, tuple[type, ...]] = {
    "compile_id": (str,),
    "fail_type": (str,),
    "fail_reason": (str,),
    "start_time_us": (int,),
    "end_time_us": (int,),
    "duration_us": (int,),
    "pytorch_version": (str,),
    "python_version": (str,),
    "cuda_version": (str,),
    "triton_version": (str,),
    "inductor_config": (str,),
}


def _typed(cm: dict[str, Any], key: str, lineno: int, problems: Problems) -> Any:
    value = cm.get(key)
    if value is None:
        return None
    types = METRIC_TYPES[key]
    if isinstance(value, bool) or not isinstance(value, types):
        problems.add("schema_drift", lineno,
                     f"line {lineno}: compilation_metrics.{key} is {type(value).__name__}, expected "
                     + "/".join(t.__name__ for t in types))
        return None
    return value


def decode_metrics(text: str, lineno: int, problems: Problems) -> dict[str, Any] | None:
    """Typed columns of a ``compilation_metrics`` header; None when its JSON does not decode."""
    try:
        env = safe_json.loads(text[text.index("] {") + 2:])
    except ValueError:
        return None  # the caller reports truncation / bad JSON
    cm = env.get("compilation_metrics") if isinstance(env, dict) else None
    if not isinstance(cm, dict):
        problems.add("schema_drift", lineno, f"line {lineno}: compilation_metrics is not an object")
        return {}
    out = {k: _typed(cm, k, lineno, problems) for k in METRIC_TYPES}
    if out["duration_us"] is not None:
        out["duration_s"] = out["duration_us"] / 1e6
    elif out["start_time_us"] is not None and out["end_time_us"] is not None:
        out["duration_s"] = (out["end_time_us"] - out["start_time_us"]) / 1e6
    else:
        out["duration_s"] = None
    out.update(inductor_facts(out.pop("inductor_config"), lineno, problems))
    return out


def _as_str(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, (list, tuple)):  # cpp.cxx is (None, 'g++')
        vals = [x for x in v if x is not None]
        return str(vals[-1]) if vals else None
    return str(v)


def inductor_facts(config: str | None, lineno: int, problems: Problems) -> dict[str, Any]:
    """AOTI metadata, compiler and debug flags from the ``inductor_config`` JSON string."""
    if not config:
        return dict.fromkeys(FACT_COLUMNS)
    facts, issues = _config_facts(config)
    for kind, what in issues:
        problems.add(kind, lineno, f"line {lineno}: {what}")
    return dict(facts)


FACT_COLUMNS = ("device_key", "aoti_platform", "aoti_machine", "cpu_isa", "compute_capability", "cxx", "nan_asserts",
                "debug_printer")


@functools.lru_cache(maxsize=64)
def _config_facts(config: str) -> tuple[dict[str, Any], tuple[tuple[str, str], ...]]:
    """(facts, ((damage kind, detail), ...)) of one config string; cached: a process logs the same inductor
    config (~25 KB of JSON) in every compilation_metrics record unless the user changes the config between
    compiles. Callers copy the dict."""
    facts = dict.fromkeys(FACT_COLUMNS)
    try:
        cfg = safe_json.loads(config)
    except ValueError:
        return facts, (("bad_json", "compilation_metrics.inductor_config is not valid JSON"),)
    if not isinstance(cfg, dict):
        return facts, (("schema_drift", "compilation_metrics.inductor_config is not an object"),)
    issues = []
    meta = cfg.get("aot_inductor.metadata")
    if isinstance(meta, dict):
        for col, key in (("device_key", "AOTI_DEVICE_KEY"), ("aoti_platform", "AOTI_PLATFORM"),
                         ("aoti_machine", "AOTI_MACHINE"), ("cpu_isa", "AOTI_CPU_ISA"),
                         ("compute_capability", "AOTI_COMPUTE_CAPABILITY")):
            facts[col] = _as_str(meta.get(key))
    elif meta is not None:
        issues.append(("schema_drift", f"inductor_config aot_inductor.metadata is {type(meta).__name__}"))
    facts["cxx"] = _as_str(cfg.get("cpp.cxx"))
    nan = cfg.get("nan_asserts")
    facts["nan_asserts"] = nan if isinstance(nan, bool) else None
    facts["debug_printer"] = _as_str(cfg.get("aot_inductor.debug_intermediate_value_printer"))
    return facts, tuple(issues)
