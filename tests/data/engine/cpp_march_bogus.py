import torch, tempfile, os
class M(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x + 1)
ep = torch.export.export(M(), (torch.randn(3, 8),))
with tempfile.TemporaryDirectory() as d:
    torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(d, "m.pt2"))
