"""torch.compile and AOTI compile of an indexing model, run with TORCH_LOGS="+inductor,output_code" (torch 2.13.0 CPU).

TORCH_LOGS="+inductor,output_code" python3 tests/data/text/compile_logs.py {jit|aoti} OUT_DIR
"""
import sys

import torch


def f(x, idx):
    return (x[idx] * 2).relu() + x.sum()


class M(torch.nn.Module):
    def forward(self, x, idx):
        return f(x, idx)


args = (torch.randn(8, 4), torch.tensor([1, 3]))
if sys.argv[1] == "jit":
    print(torch.compile(f)(*args))
else:
    ep = torch.export.export(M(), args)
    torch._inductor.aoti_compile_and_package(ep, package_path=f"{sys.argv[2]}/logs.pt2")
