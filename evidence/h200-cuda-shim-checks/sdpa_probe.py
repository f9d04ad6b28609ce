import torch, json, sys, time
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
r = {"torch": torch.__version__, "cuda": torch.version.cuda, "cap": torch.cuda.get_device_capability(),
     "name": torch.cuda.get_device_name(), "props": str(torch.cuda.get_device_properties(0))}
q = torch.randn(8, 32, 4096, 128, device="cuda", dtype=torch.float16); k = torch.randn_like(q); v = torch.randn_like(q)
def t(backends):
    try:
        with sdpa_kernel(backends):
            F.scaled_dot_product_attention(q, k, v); torch.cuda.synchronize()
            s = time.perf_counter()
            for _ in range(5): F.scaled_dot_product_attention(q, k, v)
            torch.cuda.synchronize(); return (time.perf_counter() - s) / 5 * 1e3
    except Exception as e:
        return "ERR " + str(e).splitlines()[0][:200]
for b in ["FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH", "CUDNN_ATTENTION"]:
    r[b] = t([getattr(SDPBackend, b)])
r["default_ms"] = t([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH, SDPBackend.CUDNN_ATTENTION])
# which one does default choose? use profiler
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CUDA]) as p:
    F.scaled_dot_product_attention(q, k, v); torch.cuda.synchronize()
r["default_kernels"] = sorted({e.name[:120] for e in p.events() if e.device_type.name == "CUDA"})[:8]
try:
    import torch.backends.cuda as bc
    r["flash_enabled"] = bc.flash_sdp_enabled()
except Exception as e:
    r["flash_enabled"] = str(e)
print(json.dumps(r, default=str))
