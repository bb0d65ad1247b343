"""Facts about a machine that runs (or ran) AOTI packages: this one, probed without importing torch
(:func:`host_info`), or the one a capture ran on, as its manifest records it (:func:`from_environment`).

Used to compare a package's compile-time device facts with the host that loads it. Every probe is best effort: a
probe that cannot run yields ``None`` (unknown), never an exception. Standard library only: ``aoti_trace.capture``
records the same facts (:func:`gpu_facts`, :func:`cpu_flags`) in the manifest wherever torch runs.

* torch: version from ``importlib.metadata`` (e.g. ``2.13.0+cpu``); the CUDA / HIP versions torch was built with,
  read as text from the installed ``torch/version.py`` (never imported).
* GPU: ``nvidia-smi -L`` (count and names), ``nvidia-smi --query-gpu=compute_cap`` (``9.0`` -> ``90``, the form
  ``AOTI_COMPUTE_CAPABILITY`` uses), else the presence of ``/proc/driver/nvidia/gpus/*``.
* CPU: ``platform.machine()``, ``sys.platform`` and the ISA flags of ``/proc/cpuinfo`` (``flags`` on x86,
  ``Features`` on ARM), mapped to the vocabulary of ``AOTI_CPU_ISA`` (``AVX2``, ``AVX512``, ``AVX512_VNNI``,
  ``AMX_TILE``, ``ASIMD``, ``SVE256``, ...).
"""

from __future__ import annotations

import platform as _platform
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

# AOTI_CPU_ISA word (upper case, as torch writes it) -> /proc/cpuinfo flags that must all be present.
# torch builds the string from its picked VecISA: "AVX2", "AVX512", "AVX512 AVX512_VNNI",
# "AVX512 AVX512_VNNI AMX_TILE", "ASIMD" (NEON and SVE both print asimd), "ZVECTOR", "VSX".
ISA_FLAGS: dict[str, tuple[str, ...]] = {
    "AVX2": ("avx2", "fma"),
    "AVX512": ("avx512f", "avx512dq", "avx512vl", "avx512bw"),
    "AVX512_VNNI": ("avx512_vnni",),
    "AMX_TILE": ("amx_tile",),
    "ASIMD": ("asimd",),
    "NEON": ("asimd",),
    "SVE128": ("sve",),
    "SVE256": ("sve",),
}
CPUINFO_FLAGS = ("avx2", "fma", "avx512f", "avx512dq", "avx512vl", "avx512bw", "avx512_vnni", "avx512_bf16",
                 "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve", "sve2")
PROBE_TIMEOUT_S = 10


@dataclass
class HostInfo:
    """What a machine offers for loading an AOTI package. ``None`` means unknown."""

    platform: str | None = sys.platform
    machine: str | None = field(default_factory=_platform.machine)
    torch_version: str | None = None
    torch_cuda_version: str | None = None
    torch_hip_version: str | None = None
    torch_cuda: bool | None = None  # torch built with CUDA or ROCm support
    gpu_count: int | None = None
    gpu_names: list[str] = field(default_factory=list)
    gpu_compute_capability: list[str] = field(default_factory=list)  # "90" per GPU, AOTI_COMPUTE_CAPABILITY form
    cpu_flags: list[str] | None = None  # the CPUINFO_FLAGS present; None if /proc/cpuinfo is unreadable

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _torch_version_file() -> tuple[str | None, str | None]:
    """(version, text of torch/version.py) of the installed torch distribution, without importing it."""
    from importlib import metadata

    try:
        dist = metadata.distribution("torch")
    except metadata.PackageNotFoundError:
        return None, None
    text = None
    try:
        text = Path(str(dist.locate_file("torch/version.py"))).read_text(encoding="utf-8", errors="replace")
    except OSError:
        pass
    return dist.version, text


def _version_field(text: str, name: str) -> str | None:
    m = re.search(r"(?m)^%s(?::[^=]*)?\s*=\s*(?P<v>'[^']*'|\"[^\"]*\"|None)" % name, text)
    if not m or m["v"] == "None":
        return None
    return m["v"][1:-1]


def gpu_facts(path: str | None = None) -> dict[str, list[str]] | None:
    """``{"gpus": nvidia-smi -L lines, "gpu_compute_capability": ['90', ...]}``, or None without ``nvidia-smi``
    (looked up on ``path``, default ``$PATH``). The one place that asks ``nvidia-smi``."""
    smi = shutil.which("nvidia-smi", path=path)
    if smi is None:
        return None
    listing = _run([smi, "-L"])
    if listing is None:
        return None
    caps = _run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"]) or ""
    return {"gpus": [line.strip() for line in listing.splitlines() if line.strip().startswith("GPU")],
            "gpu_compute_capability": [compute_capability(c) for c in caps.splitlines() if c.strip()]}


def gpu_names(lines: list[str]) -> list[str]:
    """GPU names from ``nvidia-smi -L`` lines (``GPU 0: NVIDIA H200 (UUID: ...)`` -> ``NVIDIA H200``)."""
    return [m["name"] for line in lines
            if (m := re.match(r"GPU \d+: (?P<name>.+?)(?: \(UUID: [^)]*\))?$", line.strip()))]


ARCH_IN_PLATFORM = re.compile(r"-(x86_64|aarch64|arm64|AMD64|ppc64le|s390x|riscv64|i686)(?:-|$)")


def from_environment(env: dict[str, object]) -> HostInfo:
    """The machine a capture ran on, from its manifest's ``environment`` (what ``aoti_trace.capture`` recorded:
    torch and its CUDA/HIP versions, ``nvidia-smi`` GPUs and compute capabilities, CPU flags, machine). Facts an older
    capture did not record are None (unknown), so nothing is compared on them."""
    plat = str(env.get("platform") or "")
    osname = next((v for k, v in (("Linux", "linux"), ("Windows", "win32"), ("macOS", "darwin"), ("Darwin", "darwin"))
                   if plat.startswith(k)), None)
    arch = ARCH_IN_PLATFORM.search(plat)
    info = HostInfo(platform=osname, machine=str(env["machine"]) if env.get("machine") else (arch[1] if arch else None))
    if env.get("torch"):
        info.torch_version = str(env["torch"])
        info.torch_cuda_version = str(env["cuda"]) if env.get("cuda") else None
        info.torch_hip_version = str(env["hip"]) if env.get("hip") else None
        info.torch_cuda = bool(info.torch_cuda_version or info.torch_hip_version)
    if isinstance(listed := env.get("gpus"), list):
        info.gpu_names = gpu_names([str(g) for g in listed])
        info.gpu_count = len(info.gpu_names)
    if isinstance(listed := env.get("gpu_compute_capability"), list):
        info.gpu_compute_capability = [str(c) for c in listed]
    if isinstance(listed := env.get("cpu_flags"), list):
        info.cpu_flags = [str(f) for f in listed]
    return info


def read_cpu_flags() -> list[str] | None:
    """:func:`cpu_flags` of this machine's ``/proc/cpuinfo`` (None where it is unreadable)."""
    try:
        return cpu_flags(Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def _run(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout if res.returncode == 0 else None


def cpu_flags(cpuinfo: str) -> list[str]:
    """The flags of :data:`CPUINFO_FLAGS` that the first CPU of a ``/proc/cpuinfo`` text reports."""
    m = re.search(r"(?m)^(?:flags|Features)\s*:(?P<f>.*)$", cpuinfo)
    have = set(m["f"].split()) if m else set()
    return [f for f in CPUINFO_FLAGS if f in have]


def isa_missing(packaged_isa: str, flags: list[str]) -> list[str]:
    """Words of a packaged ``AOTI_CPU_ISA`` string whose CPU flags this host lacks (unknown words are skipped)."""
    have = set(flags)
    out = []
    for word in packaged_isa.upper().split():
        need = ISA_FLAGS.get(word)
        if need and not all(f in have for f in need):
            out.append(word)
    return out


def compute_capability(text: str) -> str:
    """``nvidia-smi`` compute_cap ``9.0`` -> ``90``; other text is returned stripped."""
    text = text.strip()
    m = re.fullmatch(r"(\d+)\.(\d+)", text)
    return f"{m[1]}{m[2]}" if m else text


@lru_cache(maxsize=1)
def host_info() -> HostInfo:
    """Probe this machine once (cached)."""
    info = HostInfo()
    version, text = _torch_version_file()
    info.torch_version = version
    if text is not None:
        info.torch_cuda_version = _version_field(text, "cuda")
        info.torch_hip_version = _version_field(text, "hip")
        info.torch_cuda = bool(info.torch_cuda_version or info.torch_hip_version)
    elif version is not None and version.endswith("+cpu"):
        info.torch_cuda = False
    gpus = gpu_facts()
    if gpus is not None:
        info.gpu_names = gpu_names(gpus["gpus"])
        info.gpu_count = len(info.gpu_names)
        info.gpu_compute_capability = list(gpus["gpu_compute_capability"])
    else:
        gpu_dir = Path("/proc/driver/nvidia/gpus")
        try:
            info.gpu_count = len(list(gpu_dir.iterdir())) if gpu_dir.is_dir() else 0
        except OSError:
            info.gpu_count = None
    info.cpu_flags = read_cpu_flags()
    return info
