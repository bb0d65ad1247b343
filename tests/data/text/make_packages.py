"""Compile the small AOTI packages the text samples are produced with (torch 2.13.0 CPU).

python3 tests/data/text/make_packages.py /tmp/aotitext
writes plain.pt2 (printer off), p2.pt2 (printer level 2), p3.pt2 (printer level 3).
"""
import sys
from pathlib import Path

import torch


class M(torch.nn.Module):
    def forward(self, x, idx):
        return (x[idx] * 2).relu() + x.sum()


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    ep = torch.export.export(M(), (torch.randn(8, 4), torch.tensor([1, 3])))
    for name, level in (("plain", "0"), ("p2", "2"), ("p3", "3")):
        with torch._inductor.config.patch({"aot_inductor.debug_intermediate_value_printer": level}):
            torch._inductor.aoti_compile_and_package(ep, package_path=str(out / f"{name}.pt2"))
        print("wrote", out / f"{name}.pt2")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
