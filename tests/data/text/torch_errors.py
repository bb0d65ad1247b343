"""Python exceptions raised by torch ops (torch 2.13.0 CPU).

python3 tests/data/text/torch_errors.py {mm|chained|context}
"""
import sys

import torch


def matmul(a, b):
    return a @ b


def load_weights(path):
    try:
        return torch.load(path)
    except FileNotFoundError as exc:
        raise RuntimeError(f"could not load weights from {path}") from exc


def cleanup():
    try:
        matmul(torch.ones(2, 3), torch.ones(4, 5))
    except RuntimeError:
        torch.zeros(2).view(3)


mode = sys.argv[1]
if mode == "mm":
    matmul(torch.ones(2, 3), torch.ones(4, 5))
elif mode == "chained":
    load_weights("/nonexistent/weights.pt")
elif mode == "context":
    cleanup()
