"""Real kernel names of each forced SDPA backend on this GPU, classified by capshim's table."""
import json
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from capshim.bench import attest
from capshim.bench.workloads import torch_sdpa_worker as w

out = {"torch": torch.__version__, "capability": list(torch.cuda.get_device_capability())}
shape = tuple(int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "8x32x4096x128").split("x"))
b, h, s, d = shape
q, k, v = (torch.randn(b, h, s, d, dtype=torch.float16, device="cuda") for _ in range(3))
call = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)
ref = call().float()
for name in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH", "CUDNN_ATTENTION"):
    try:
        with sdpa_kernel(getattr(SDPBackend, name)):
            call(); torch.cuda.synchronize()
            kernels = w._kernels(torch, call)
            o = call().float()
        out[name] = {"kernels": kernels, "classified": attest.sdpa_backend(kernels),
                     "max_abs_vs_default": float((o - ref).abs().max().item())}
    except Exception as exc:  # noqa: BLE001
        out[name] = {"error": repr(exc)[:300]}
print(json.dumps(out, indent=1))
