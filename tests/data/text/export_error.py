"""torch.export with a dynamic dim the model specialises (torch 2.13.0 CPU).

python3 tests/data/text/export_error.py
"""
import torch


class M(torch.nn.Module):
    def forward(self, x):
        return x.reshape(8, -1) if x.shape[0] == 8 else x


batch = torch.export.Dim("batch", min=2, max=64)
torch.export.export(M(), (torch.randn(8, 4),), dynamic_shapes={"x": {0: batch}})
