"""relu(x) * 2 + 1 compiled with AOTInductor (5 graph nodes); argv[1] picks Inductor's injected failure.

    python3 tiny_relu.py compile_error|runtime_error|accuracy|none
"""
import sys
import tempfile

import torch


class M(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0 + 1.0


bug = sys.argv[1] if len(sys.argv) > 1 else "none"
if bug != "none":
    torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = bug
x = torch.randn(8)
ep = torch.export.export(M(), (x,))
with tempfile.TemporaryDirectory() as tmp:
    path = torch._inductor.aoti_compile_and_package(ep, package_path=f"{tmp}/m.pt2")
    out = torch._inductor.aoti_load_package(path)(x)
print("max abs diff vs eager:", (out - M()(x)).abs().max().item())
