"""H200 experiment 2 (one process): does the SM clock during a rep explain its speed; does a new context change it."""
import json, sys, threading, time, os
import pynvml
from capshim.bench.workloads import builtin_worker as W
out = sys.argv[1]
args = W._parse_args(["--model", sys.argv[2], "--repetitions", "1"] + sys.argv[3:])
if args.threads is None: args.threads = 4
pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0)
samples = []; stop = False
def sampler():
    while not stop:
        samples.append((time.perf_counter(), pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                        pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)))
        time.sleep(0.001)
th = threading.Thread(target=sampler, daemon=True); th.start()
def clk(t0, t1):
    v = [s[1] for s in samples if t0 <= s[0] <= t1]
    return (sum(v) / len(v), len(v)) if v else (None, 0)
rec = {"pid": os.getpid(), "ctx": []}
t0 = time.perf_counter(); r = W._Runner(args); rec["load_s"] = time.perf_counter() - t0
t0 = time.perf_counter(); r.correctness_pass(); rec["warm_s"] = time.perf_counter() - t0
for c in range(1):
    if c:
        del r.ctx
        cp = r.cy.LlamaContextParams(); cp.n_ctx = 1024; cp.n_batch = 2048; cp.n_ubatch = 512
        cp.n_threads = args.threads; cp.n_threads_batch = args.threads; cp.no_perf = False
        r.ctx = r.cy.LlamaContext(r.model, cp); r.test_prompt()
    reps = []
    r.test_prompt()
    for i in range(12):
        a = time.perf_counter(); ns = r.test_prompt(); b = time.perf_counter()
        reps.append(("pp", 512e9 / ns, *clk(a, b)))
    r.test_gen()
    for i in range(3):
        a = time.perf_counter(); ns = r.test_gen(); b = time.perf_counter()
        reps.append(("tg", 128e9 / ns, *clk(a, b), b - a))
    rec["ctx"].append(reps)
stop = True
json.dump(rec, open(out, "w"))
