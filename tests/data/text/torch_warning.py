"""A torch UserWarning (torch 2.13.0 CPU): python3 tests/data/text/torch_warning.py"""
import torch

x = torch.ones(2)
y = torch.tensor(x)
