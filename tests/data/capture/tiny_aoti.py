"""Tiny real AOTI repro used by tests/run/test_capture.py and tests/run/test_ladder.py.

    python tiny_aoti.py compile PKG.pt2    compile Linear(8, 4) for inputs of shape (2, 8) and package it
    python tiny_aoti.py compile-run PKG.pt2  both: compile, then load and run (works)
    python tiny_aoti.py run PKG.pt2        load the package and run it on a (2, 8) input (works)
    python tiny_aoti.py bad-shape PKG.pt2  load the package and run it on a (3, 9) input (wrong static shape)
"""

import sys

import torch


def compile_package(path: str) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4).eval()
    ep = torch.export.export(model, (torch.randn(2, 8),))
    out = torch._inductor.aoti_compile_and_package(ep, package_path=path)
    print(f"packaged {out}")


def run(path: str, shape: tuple[int, int]) -> None:
    runner = torch._inductor.aoti_load_package(path)
    out = runner(torch.randn(*shape))
    print(f"output shape {tuple(out.shape)}")


if __name__ == "__main__":
    mode, pkg = sys.argv[1], sys.argv[2]
    if mode == "compile":
        compile_package(pkg)
    elif mode == "compile-run":
        compile_package(pkg)
        run(pkg, (2, 8))
    elif mode == "run":
        run(pkg, (2, 8))
    elif mode == "bad-shape":
        run(pkg, (3, 9))
    else:
        raise SystemExit(f"unknown mode {mode}")
