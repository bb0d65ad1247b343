"""Write ``rules/catalogue/platform.jsonl``: the messages of the platform under AOTI/Inductor (CUDA/HIP runtimes,
NCCL, compilers, linkers, the dynamic loader, Python's import system, build tools), hand-picked, each from a source
that was read (see ``rules/catalogue/README.md``, *Platform*).

Standard library only; not run by CI. ``python3 rules/catalogue/platform.py -o rules/catalogue/platform.jsonl``.
``--verify`` checks every entry whose source is a binary or file on this machine (``LOCAL``) against that source:
the literal pieces of the template must all be in its strings, in order, in one string or in adjacent ones.

A template is the message as its source writes it, ``{}`` for each interpolated part (``%s``, ``%d``, ``%R``,
``%qs``, ``'%s'`` with its quotes, a concatenated or streamed value). The messages of a runtime's error table
(``cudaGetErrorString``, ``hipGetErrorString``, ``ncclGetErrorString``) are printed inside their caller's wrapper
(``CUDA error: {}``, ``HIP error: {}``, ``NCCL error in: ..., {}``); a compiler's or linker's message after its
location or program name (``x.cpp:3:10: fatal error: ``, ``/usr/bin/ld: ``): failure detection therefore matches a
``platform`` template anywhere in a line (``aoti_trace/ingest/text/known_messages.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

# source tag -> (version, where it was read)
SOURCES: dict[str, tuple[str, str]] = {
    "cuda-runtime": ("13.0", "strings of /usr/local/cuda-13.0/lib/libcudart.so.13 (the cudaGetErrorString table; the "
                             "enum name is the entry's file)"),
    "hip-runtime": ("clr@f9f995c6", "github:ROCm/clr hipamd/src/hip_error.cpp, ihipGetErrorString"),
    "nccl": ("nccl@5067397c", "github:NVIDIA/nccl src/init.cc ncclGetErrorString, src/include/checks.h"),
    "nvcc": ("13.0", "strings of /usr/local/cuda-13.0/bin/nvcc"),
    "ptxas": ("13.0", "strings of /usr/local/cuda-13.0/bin/ptxas"),
    "cuda-headers": ("13.0", "/usr/local/cuda-13.0/targets/x86_64-linux/include/crt/host_config.h #error lines"),
    "glibc": ("glibc@04e750e7", "github:bminor/glibc elf/*.c (and the strings of Debian's ld-linux-x86-64.so.2, 2.36)"),
    "binutils": ("2.40", "strings of Debian's /usr/bin/ld.bfd and libbfd (GNU ld 2.40)"),
    "gcc": ("12.2.0", "strings of Debian's gcc-12 driver, cc1plus and collect2"),
    "lld": ("public logs", "the text of ld.lld's and rust-lld's message in public build logs (code index)"),
    "cpython": ("3.11.7", "strings of libpython3.11.so.1.0; Lib/importlib/_bootstrap.py"),
    "cpython-win": ("cpython@003b808e", "Python/dynload_win.c of github:python/cpython (code index)"),
    "setuptools": ("84.2.1", "setuptools/_distutils of the installed setuptools 84.2.1; Lib/distutils of "
                             "Python 3.11.7"),
    "numpy": ("2.4.6", "numpy/core/_multiarray_umath.py of the installed numpy"),
    "ninja": ("1.11", "strings of Debian's /usr/bin/ninja"),
    "cmake": ("3.25", "strings of Debian's /usr/bin/cmake"),
    "msvc": ("docs", "Microsoft's linker/compiler error pages and public build logs"),
    "torch": ("2.13.0", "torch/utils/cpp_extension.py of the installed torch 2.13.0+cpu"),
}

# sources that can be checked on this machine: tag -> command printing the text to check against
LOCAL: dict[str, list[str]] = {
    "cuda-runtime": ["strings", "-n", "4", "/usr/local/cuda-13.0/lib/libcudart.so.13"],
    "nvcc": ["strings", "-n", "4", "/usr/local/cuda-13.0/bin/nvcc"],
    "ptxas": ["strings", "-n", "4", "/usr/local/cuda-13.0/bin/ptxas"],
    "cuda-headers": ["cat", "/usr/local/cuda-13.0/targets/x86_64-linux/include/crt/host_config.h"],
    "glibc": ["strings", "-n", "4", "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"],
    "binutils": ["sh", "-c", "strings -n 4 /usr/bin/x86_64-linux-gnu-ld.bfd /usr/lib/x86_64-linux-gnu/libbfd*.so"],
    "gcc": ["sh", "-c", "strings -n 4 /usr/bin/x86_64-linux-gnu-gcc-12 /usr/lib/gcc/x86_64-linux-gnu/12/cc1plus "
                        "/usr/lib/gcc/x86_64-linux-gnu/12/collect2"],
    "cpython": ["sh", "-c", "strings -n 4 /root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0"],
    "numpy": ["sh", "-c", 'd=$(python3 -c "import numpy, os; print(os.path.dirname(numpy.__file__))"); '
                          'cat "$d/_core/include/numpy/__multiarray_api.h" "$d/core/_multiarray_umath.py"'],
    "setuptools": ["sh", "-c", 'd=$(python3 -c "import setuptools, os; print(os.path.dirname(setuptools.__file__))"); '
                               'cat "$d/_distutils/compilers/C/msvc.py" "$d/_distutils/spawn.py" '
                               "/root/.pyenv/versions/3.11.7/lib/python3.11/distutils/_msvccompiler.py"],
    "ninja": ["strings", "-n", "4", "/usr/bin/ninja"],
    "cmake": ["strings", "-n", "4", "/usr/bin/cmake"],
}

ENV, CVM, IMA, OOM, CCE, DIST, OOB = ("environment", "cuda_version_mismatch", "illegal_memory_access", "out_of_memory",
                                      "cpp_compile_error", "distributed", "triton_index_oob")

# (template, family, files, options); options: carrier, warning, exc_type, composed (the message is put together
# from several strings of its source, said how; --verify skips it)
E = tuple[str, str, list[str], dict]


def cuda(enum: str, template: str, family: str, hip: str | None = None, **opt: object) -> E:
    files = [f"cuda-runtime:{enum}"] + ([f"hip-runtime:{hip}"] if hip else [])
    return (template, family, files, dict(opt))


ENTRIES: list[E] = [
    # ---- CUDA runtime (cudaGetErrorString), with HIP's identical texts (hipGetErrorString) ------------------------
    cuda("cudaErrorNoKernelImageForDevice", "no kernel image is available for execution on the device", CVM,
         "hipErrorNoBinaryForGpu"),
    cuda("cudaErrorUnsupportedPtxVersion", "the provided PTX was compiled with an unsupported toolchain.", CVM),
    cuda("cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version", CVM),
    cuda("cudaErrorSystemDriverMismatch", "system has unsupported display driver / cuda driver combination", CVM),
    cuda("cudaErrorCompatNotSupportedOnDevice", "forward compatibility was attempted on non supported HW", CVM),
    cuda("cudaErrorCallRequiresNewerDriver", "API call is not supported in the installed CUDA driver", CVM),
    cuda("cudaErrorInvalidKernelImage", "device kernel image is invalid", CVM, "hipErrorInvalidImage"),
    cuda("cudaErrorInvalidPtx", "a PTX JIT compilation failed", CVM),
    cuda("cudaErrorJitCompilationDisabled", "PTX JIT compilation was disabled", CVM),
    cuda("cudaErrorUnsupportedDevSideSync", "the provided PTX contains unsupported call to cudaDeviceSynchronize", CVM),
    cuda("cudaErrorInvalidDeviceFunction", "invalid device function", CVM, "hipErrorInvalidDeviceFunction"),
    cuda("cudaErrorSymbolNotFound", "named symbol not found", CVM, "hipErrorNotFound"),
    cuda("cudaErrorJitCompilerNotFound", "PTX JIT compiler library not found", ENV),
    cuda("cudaErrorStubLibrary", "CUDA driver is a stub library", ENV),
    cuda("cudaErrorNoDevice", "no CUDA-capable device is detected", ENV),
    cuda("cudaErrorDevicesUnavailable", "CUDA-capable device(s) is/are busy or unavailable", ENV),
    cuda("cudaErrorInvalidDevice", "invalid device ordinal", ENV, "hipErrorInvalidDevice"),
    cuda("cudaErrorInitializationError", "initialization error", ENV, "hipErrorNotInitialized"),
    cuda("cudaErrorCudartUnloading", "driver shutting down", ENV, "hipErrorDeinitialized"),
    cuda("cudaErrorOperatingSystem", "OS call failed or operation not supported on this OS", ENV,
         "hipErrorOperatingSystem"),
    cuda("cudaErrorSharedObjectSymbolNotFound", "shared object symbol not found", ENV,
         "hipErrorSharedObjectSymbolNotFound"),
    cuda("cudaErrorSharedObjectInitFailed", "shared object initialization failed", ENV,
         "hipErrorSharedObjectInitFailed"),
    cuda("cudaErrorECCUncorrectable", "uncorrectable ECC error encountered", ENV, "hipErrorECCNotCorrectable"),
    cuda("cudaErrorNvlinkUncorrectable", "uncorrectable NVLink error detected during the execution", ENV),
    cuda("cudaErrorPeerAccessUnsupported", "peer access is not supported between these two devices", ENV,
         "hipErrorPeerAccessUnsupported"),
    cuda("cudaErrorMpsConnectionFailed",
         "MPS client failed to connect to the MPS control daemon or the MPS server", ENV),
    cuda("cudaErrorDeviceNotLicensed", "device doesn't have valid Grid license", ENV),
    cuda("cudaErrorMemoryAllocation", "out of memory", OOM, "hipErrorOutOfMemory"),
    cuda("cudaErrorIllegalAddress", "an illegal memory access was encountered", IMA, "hipErrorIllegalAddress"),
    cuda("cudaErrorMisalignedAddress", "misaligned address", IMA),
    cuda("cudaErrorInvalidAddressSpace", "operation not supported on global/shared address space", IMA),
    cuda("cudaErrorInvalidPc", "invalid program counter", IMA),
    cuda("cudaErrorIllegalInstruction", "an illegal instruction was encountered", IMA),
    cuda("cudaErrorHardwareStackError", "hardware stack error", IMA),
    cuda("cudaErrorLaunchFailure", "unspecified launch failure", IMA, "hipErrorLaunchFailure"),
    cuda("cudaErrorPriorLaunchFailure", "unspecified launch failure in prior launch", IMA,
         "hipErrorPriorLaunchFailure"),
    cuda("cudaErrorInvalidDevicePointer", "invalid device pointer", IMA, "hipErrorInvalidDevicePointer"),
    cuda("cudaErrorAssert", "device-side assert triggered", OOB, "hipErrorAssert"),
    cuda("cudaErrorLaunchOutOfResources", "too many resources requested for launch", OOM,
         "hipErrorLaunchOutOfResources"),
    cuda("cudaErrorCooperativeLaunchTooLarge", "too many blocks in cooperative launch", OOM,
         "hipErrorCooperativeLaunchTooLarge"),
    # ---- HIP's own wordings ----------------------------------------------------------------------------------------
    ("no ROCm-capable device is detected", ENV, ["hip-runtime:hipErrorNoDevice"], {}),
    ("driver version is insufficient for runtime version", CVM, ["hip-runtime:hipErrorInsufficientDriver"], {}),
    ("invalid kernel file", CVM, ["hip-runtime:hipErrorInvalidKernelFile"], {}),
    # ---- NCCL (ncclGetErrorString; checks.h) -----------------------------------------------------------------------
    ("unhandled cuda error (run with NCCL_DEBUG=INFO for details)", DIST, ["nccl:src/init.cc:3420"], {}),
    ("unhandled system error (run with NCCL_DEBUG=INFO for details)", DIST, ["nccl:src/init.cc:3422"], {}),
    ("internal error - please report this issue to the NCCL developers", DIST, ["nccl:src/init.cc:3424"], {}),
    ("invalid argument (run with NCCL_DEBUG=WARN for details)", DIST, ["nccl:src/init.cc:3426"], {}),
    ("invalid usage (run with NCCL_DEBUG=WARN for details)", DIST, ["nccl:src/init.cc:3428"], {}),
    ("remote process exited or there was a network error", DIST, ["nccl:src/init.cc:3430"], {}),
    ("Cuda failure {}", DIST, ["nccl:src/include/checks.h:18"], {"carrier": True}),
    # ---- nvcc, ptxas, the CUDA headers -----------------------------------------------------------------------------
    ("Unsupported gpu architecture {}", CVM, ["nvcc:nvcc"], {}),
    ("Value {} is not defined for option {}", CVM, ["nvcc:nvcc", "ptxas:ptxas"], {}),
    ("Cannot find any real profile for virtual profile {}", CVM, ["nvcc:nvcc"], {}),
    ("Compiling in the 32-bit mode for device architecture {} is not supported", CVM, ["nvcc:nvcc"], {}),
    ("The version ({}.{}) of the host compiler ({}) is not supported", ENV, ["nvcc:nvcc"], {}),
    ("Unsupported host compiler {}", ENV, ["nvcc:nvcc"], {}),
    ("Cannot find compiler {} in PATH", ENV, ["nvcc:nvcc"], {}),
    ("nvcc cannot find a supported version of Microsoft Visual Studio. Only the versions between {} and {} "
     "(inclusive) are supported!", ENV, ["nvcc:nvcc"], {}),
    ("libcudart_static.a not found in the expected location", ENV, ["nvcc:nvcc"], {}),
    ("Cannot find valid GPU for '-arch=native', default arch is used", CVM, ["nvcc:nvcc"], {"warning": True}),
    ("unsupported GNU version! gcc versions later than {} are not supported!", ENV,
     ["cuda-headers:crt/host_config.h:137"], {}),
    ("unsupported clang version! clang version must be less than {} and greater than 3.2 .", ENV,
     ["cuda-headers:crt/host_config.h:151"], {}),
    ("unsupported Microsoft Visual Studio version! Only the versions between {} and {} (inclusive) are supported!",
     ENV, ["cuda-headers:crt/host_config.h:164"], {}),
    ("Unsupported .version {}; current version is {}", CVM, ["ptxas:ptxas"], {}),
    ("Unsupported .target {}", CVM, ["ptxas:ptxas"], {}),
    ("SM version specified by .target is higher than default SM version assumed", CVM, ["ptxas:ptxas"], {}),
    ("Feature {} requires PTX ISA .version {} or later", CVM, ["ptxas:ptxas"], {}),
    ("Modifier {} requires PTX ISA .version {} or later", CVM, ["ptxas:ptxas"], {}),
    ("Feature {} requires .target {} or higher", CVM, ["ptxas:ptxas"], {}),
    ("Modifier {} requires .target {} or higher", CVM, ["ptxas:ptxas"], {}),
    ("Instruction {} requires PTX ISA .version {}.{} or later", CVM, ["ptxas:ptxas"], {}),
    ("Feature {} cannot be compiled for architecture {}", CVM, ["ptxas:ptxas"], {}),
    ("Instruction {} cannot be compiled for architecture {}", CVM, ["ptxas:ptxas"], {}),
    ("Unsupported instruction {} used when compiling for {} target architecture", CVM, ["ptxas:ptxas"], {}),
    ("Target architecture not defined at start of file {}", CVM, ["ptxas:ptxas"], {}),
    ("Missing .version directive at start of file {}", CVM, ["ptxas:ptxas"], {}),
    ("Entry function {} uses too much shared data ({} bytes, {} max)", OOM, ["ptxas:ptxas"], {}),
    ("Entry function {} uses too much shared data ({} bytes + {} bytes system, {} max)", OOM, ["ptxas:ptxas"], {}),
    ("Entry function {} uses too much local data ({} bytes, {} max)", OOM, ["ptxas:ptxas"], {}),
    ("Entry function {} uses too much parameter space ({} bytes, {} max).", OOM, ["ptxas:ptxas"], {}),
    ("Ptx assembly aborted due to errors", CCE, ["ptxas:ptxas"], {"carrier": True}),
    # ---- the dynamic loader (glibc) --------------------------------------------------------------------------------
    ("error while loading shared libraries", ENV, ["glibc:elf/dl-catch.c:85"], {"carrier": True}),
    ("cannot open shared object file", ENV, ["glibc:elf/dl-load.c:2183"], {}),
    ("version `{}' not found (required by {})", ENV, ["glibc:elf/dl-version.c:144"], {}),
    ("weak version `{}' not found (required by {})", ENV, ["glibc:elf/dl-version.c:135"], {}),
    ("undefined symbol: {}", ENV, ["glibc:elf/dl-lookup.c:806"], {}),
    ("symbol lookup error", ENV, ["glibc:elf/dl-lookup.c:808"], {"carrier": True}),
    ("wrong ELF class: ELFCLASS32", ENV, ["glibc:elf/dl-load.c:2180"], {}),
    ("wrong ELF class: ELFCLASS64", ENV, ["glibc:elf/dl-load.c:2179"], {"composed": "not in an x86-64 build"}),
    ("invalid ELF header", ENV, ["glibc:elf/dl-load.c:1628"], {}),
    ("file too short", ENV, ["glibc:elf/dl-load.c:1594"], {}),
    ("failed to map segment from shared object", ENV, ["glibc:elf/dl-load.h:126"], {}),
    ("cannot enable executable stack as shared object requires", ENV, ["glibc:elf/dl-load.c:1324"], {}),
    ("cannot allocate memory in static TLS block", ENV, ["glibc:elf/dl-reloc.c:141"], {}),
    ("cannot restore segment prot after reloc", ENV, ["glibc:elf/dl-reloc.c:328"], {}),
    ("no version information available (required by {})", ENV, ["glibc:elf/dl-version.c:80"], {"warning": True}),
    # ---- GNU ld, lld -----------------------------------------------------------------------------------------------
    ("cannot find {}: {}", ENV, ["binutils:ld/ldfile.c"], {}),
    ("cannot find -l{}: No such file or directory", ENV, ["binutils:ld/ldfile.c"],
     {"composed": "'%P: cannot find %s: %E', %s = -l<name>, %E = strerror(ENOENT)"}),
    ("skipping incompatible {} when searching for {}", ENV, ["binutils:ld/ldfile.c"], {"warning": True}),
    ("undefined reference to `{}'", ENV, ["binutils:ld/ldmisc.c"], {}),
    ("undefined reference to symbol '{}'", ENV, ["binutils:bfd/elflink.c"], {}),
    ("DSO missing from command line", ENV, ["binutils:bfd/elflink.c"], {}),
    ("error adding symbols: {}", ENV, ["binutils:ld/ldlang.c"], {"carrier": True}),
    ("file format not recognized", ENV, ["binutils:bfd/format.c"], {}),
    ("ld returned {} exit status", CCE, ["gcc:collect2"], {"carrier": True}),
    ("{} returned {} exit status", CCE, ["gcc:collect2"], {"carrier": True}),
    ("unable to find library -l{}", ENV, ["lld:ld.lld"], {}),
    # ---- GCC -------------------------------------------------------------------------------------------------------
    ("unrecognized command-line option {}", ENV, ["gcc:gcc/opts-common.cc"], {}),
    ("unrecognized command-line option {}; did you mean {}?", ENV, ["gcc:gcc/opts-common.cc"], {}),
    ("fatal error: {}: No such file or directory", ENV, ["gcc:libcpp/files.cc"],
     {"composed": "diagnostic kind 'fatal error: ', libcpp's '%s: %s', strerror(ENOENT)"}),
    ("cannot execute {}: {}", ENV, ["gcc:gcc/gcc.cc"], {}),
    ("compilation terminated.", CCE, ["gcc:gcc/diagnostic.cc"], {"carrier": True}),
    # ---- Python's import system, numpy's ABI guard -----------------------------------------------------------------
    ("No module named {}", ENV, ["cpython:Lib/importlib/_bootstrap.py:1117", "cpython:Python/import.c"], {}),
    ("cannot import name {} from {} ({})", ENV, ["cpython:Python/ceval.c"], {}),
    ("cannot import name {} from partially initialized module {} (most likely due to a circular import) ({})", ENV,
     ["cpython:Python/ceval.c"], {}),
    ("initialization of {} did not return an extension module", ENV, ["cpython:Python/importdl.c"], {}),
    ("dynamic module does not define module export function ({}_{})", ENV, ["cpython:Python/importdl.c"], {}),
    ("A module that was compiled using NumPy 1.x cannot be run in NumPy {} as it may crash.", ENV,
     ["numpy:numpy/core/_multiarray_umath.py:25"], {"composed": "the first sentence of a dedented multi-line string"}),
    ("numpy._core.multiarray failed to import", ENV, ["numpy:numpy/_core/include/numpy/__multiarray_api.h:1601"], {}),
    ("DLL load failed while importing {}: {}", ENV, ["cpython-win:Python/dynload_win.c"], {}),
    ("DLL load failed with error code {} while importing {}", ENV, ["cpython-win:Python/dynload_win.c"], {}),
    ("Module use of {} conflicts with this version of Python.", ENV, ["cpython-win:Python/dynload_win.c"], {}),
    # ---- setuptools/distutils (the build of C++/CUDA extensions) ---------------------------------------------------
    ("Microsoft Visual C++ 14.0 or greater is required. Get it with \"Microsoft C++ Build Tools\": "
     "https://visualstudio.microsoft.com/visual-cpp-build-tools/", ENV,
     ["setuptools:setuptools/_distutils/compilers/C/msvc.py:153"], {"composed": "three adjacent string literals"}),
    ("Unable to find vcvarsall.bat", ENV, ["setuptools:Lib/distutils/_msvccompiler.py:122"], {}),
    ("command {} failed with exit code {}", CCE, ["setuptools:setuptools/_distutils/spawn.py:29"], {"carrier": True}),
    ("command {} failed: {}", ENV, ["setuptools:setuptools/_distutils/spawn.py:27"], {"carrier": True}),
    # ---- ninja, CMake ----------------------------------------------------------------------------------------------
    ("build stopped: subcommand failed.", CCE, ["ninja:src/ninja.cc"],
     {"carrier": True, "composed": "'build stopped: %s.' with 'subcommand failed'"}),
    ("Could NOT find {} (missing: {})", ENV, ["cmake:Modules/FindPackageHandleStandardArgs.cmake"], {}),
    ("Could not find a package configuration file provided by {}", ENV, ["cmake:Source/cmFindPackageCommand.cxx"],
     {}),
    # ---- MSVC ------------------------------------------------------------------------------------------------------
    ("Cannot open include file: {}: No such file or directory", ENV, ["msvc:C1083"], {}),
    ("cannot open file {}", ENV, ["msvc:LNK1104"], {}),
    ("cannot open input file {}", ENV, ["msvc:LNK1181"], {}),
    ("unresolved external symbol {} referenced in function {}", ENV, ["msvc:LNK2019"], {}),
    ("{} unresolved externals", ENV, ["msvc:LNK1120"], {"carrier": True}),
]

# torch's cpp_extension (torch/utils is not in messages.jsonl): Python raises, matched like the other files
TORCH: list[tuple[str, str, str, int]] = [  # template, exc_type, family, line in 2.13.0
    ("CUDA_HOME environment variable is not set. Please set it to your CUDA install root.", "OSError", ENV, 3302),
    ("ROCM_HOME environment variable is not set. Please set it to your ROCm install root.", "OSError", ENV, 241),
    ("CUDA was not found on the system, please set the CUDA_HOME or the CUDA_PATHenvironment variable or add NVCC "
     "to your system PATH. The extension compilation will fail.", "RuntimeError", ENV, 624),
    ("The detected CUDA version ({}) mismatches the version that was used to compilePyTorch ({}). Please make sure "
     "to use the same CUDA versions.", "RuntimeError", CVM, 646),
    ("The current installed version of {} ({}) is less than the minimum required version by CUDA {} ({}). Please "
     "make sure to use an adequate version of {} ({}).", "RuntimeError", ENV, 669),
    ("The current installed version of {} ({}) is greater than the maximum required version by CUDA {}. Please "
     "make sure to use an adequate version of {} ({}).", "RuntimeError", ENV, 675),
    ("Ninja is required to load C++ extensions (pip install ninja to get it)", "RuntimeError", ENV, 2562),
    ("MSVC is required to load C++ extensions", "RuntimeError", ENV, 3271),
]
# cpp_extension's wrappers of the build tool's output (the cause is in that output): carriers
TORCH_CARRIERS: list[tuple[str, str, str, int]] = [
    ("Error building extension {}", "RuntimeError", CCE, 2546),
    ("Error compiling objects for extension", "RuntimeError", CCE, 2480),
]


def collapse(text: str) -> str:
    return " ".join(text.split())


def ident(exc_type: str, template: str) -> str:
    return "M" + hashlib.sha1(f"{exc_type}\0{collapse(template)}".encode()).hexdigest()[:10]


def records() -> list[dict]:
    out = []
    for template, family, files, opt in ENTRIES:
        tag = files[0].split(":", 1)[0]
        version = SOURCES[tag][0]
        exc_type = str(opt.get("exc_type", ""))
        out.append({"id": ident(exc_type, template), "template": template, "exc_type": exc_type, "kind": "platform",
                    "files": files, "first_version": version, "last_version": version, "versions": 1,
                    "family": family, "basis": "manual", "internal": False, "carrier": bool(opt.get("carrier")),
                    "warning": bool(opt.get("warning"))})
    for carrier, rows in ((False, TORCH), (True, TORCH_CARRIERS)):
        for template, exc_type, family, line in rows:
            out.append({"id": ident(exc_type, template), "template": template, "exc_type": exc_type,
                        "kind": "python_raise", "files": [f"torch/utils/cpp_extension.py:{line}"],
                        "first_version": "2.13.0", "last_version": "2.13.0", "versions": 1, "family": family,
                        "basis": "manual", "internal": False, "carrier": carrier, "warning": False})
    ids = [r["id"] for r in out]
    if len(ids) != len(set(ids)):
        raise SystemExit("duplicate template")
    return out


def verify() -> int:
    """Check the entries of local sources against them; print and count the ones not found."""
    texts: dict[str, str] = {}
    bad = 0
    for template, _family, files, opt in ENTRIES:
        if opt.get("composed"):  # put together from several strings (said where): checked by reading, not here
            continue
        for f in files:
            tag = f.split(":", 1)[0]
            if tag not in LOCAL:
                continue
            if tag not in texts:
                texts[tag] = subprocess.run(LOCAL[tag], capture_output=True, text=True, errors="replace").stdout
            pieces = [p.strip() for p in template.split("{}") if p.strip().strip("'\"")]
            if not all(p.strip("'\"") in texts[tag] for p in pieces):
                print(f"not in {tag}: {template}")
                bad += 1
    return bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--out", type=Path)
    ap.add_argument("--verify", action="store_true")
    args = ap.parse_args()
    if args.verify:
        sys.exit(1 if verify() else 0)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records())
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
