"""Load a package from make_packages.py and run it with one of several inputs.

python3 tests/data/text/run_package.py PKG {ok|nan|dtype|oob}
"""
import sys

import torch

pkg, mode = sys.argv[1], sys.argv[2]
model = torch._inductor.aoti_load_package(pkg)
x = torch.randn(8, 4)
idx = torch.tensor([1, 3])
if mode == "nan":
    x[2, 1] = float("nan")
elif mode == "dtype":
    x = x.double()
elif mode == "oob":
    idx = torch.tensor([1, 100])
print(model(x, idx))
