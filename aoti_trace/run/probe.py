"""The environment probe: run by :func:`aoti_trace.run.capture.probe_python` with the captured command's own Python
(its source passed to ``python -c``: that interpreter need not have aoti-trace installed), so it uses the standard library
only. Prints one JSON object: python, torch, triton, CUDA/HIP, whether CUDA is available, the configured C++
compiler, the loaded libstdc++, and (with ``AOTI_TRACE_PROBE_LOGS``) whether torch accepts that TORCH_LOGS value."""

import json
import os
import platform
import sys


def main() -> None:
    out: dict[str, object] = {"python": platform.python_version(), "python_executable": sys.executable, "platform": platform.platform()}
    try:
        from importlib import metadata
        for dist in ("torch", "triton", "pytorch-triton"):
            try:
                out[dist.replace("pytorch-", "") + "_dist"] = metadata.version(dist)
            except Exception:
                pass
    except Exception:
        pass
    logs = os.environ.pop("AOTI_TRACE_PROBE_LOGS", None)
    try:
        import torch
        out["torch"] = torch.__version__
        out["cuda"] = torch.version.cuda
        out["hip"] = getattr(torch.version, "hip", None)
        try:
            out["cuda_available"] = bool(torch.cuda.is_available())
            out["cuda_device_count"] = torch.cuda.device_count() if out["cuda_available"] else 0
        except Exception:
            out["cuda_available"] = None
        try:
            import torch._inductor.config as ic
            cxx = ic.cpp.cxx
            cxx = [c for c in (cxx if isinstance(cxx, (list, tuple)) else (cxx,)) if c]
            out["cxx_configured"] = cxx[0] if cxx else None
        except Exception as e:
            out["cxx_error"] = repr(e)[:300]
        if logs is not None:
            try:
                from torch._logging._internal import _parse_log_settings
                _parse_log_settings(logs)
                out["logs_ok"] = True
            except Exception as e:
                out["logs_ok"] = False
                out["logs_error"] = str(e).strip().splitlines()[0].split(",")[0] if str(e).strip() else repr(e)
                try:
                    from torch._logging._internal import log_registry as r
                    out["logs_valid"] = sorted(["all", *r.log_alias_to_log_qnames, *r.artifact_names])
                except Exception:
                    pass
        try:
            with open("/proc/self/maps") as fh:
                libs = sorted({l.split()[-1] for l in fh if "libstdc++.so" in l and "/" in l})
            if libs:
                out["libstdcxx_path"] = libs[0]
        except OSError:
            pass
    except Exception as e:
        out["torch_error"] = (type(e).__name__ + ": " + str(e))[:300]
    try:
        import triton
        out["triton"] = triton.__version__
    except Exception:
        pass
    print(json.dumps(out))


if __name__ == "__main__":
    main()
