"""Two ranks under torchrun that fail with different torch errors (torch 2.13.0 CPU, gloo).

torchrun --nproc-per-node 2 tests/data/text/ranks_error.py
"""
import os

import torch

rank = int(os.environ["RANK"])
if rank == 0:
    torch.ones(2, 3) @ torch.ones(4, 5)
else:
    torch.zeros(2).view(3)
