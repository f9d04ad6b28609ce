"""H200 experiment 1: where the per-process spread of pp512/tg128 comes from, and where a process's seconds go.
Runs the builtin worker directly (no shim: the spread is the workload's), configs interleaved in rounds."""
import json, os, random, re, subprocess, sys, time
model, out, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
base = [sys.executable, "-m", "capshim.bench.workloads.builtin_worker", "--model", model,
        "--n-prompt", "512", "--n-gen", "128", "--repetitions", "5", "--ngl", "99", "--seed", "0"]
CONFIGS = {
    "t16": ([], base),
    "t1": ([], base + ["--threads", "1"]),
    "t4": ([], base + ["--threads", "4"]),
    "t1pin": (["taskset", "-c", "5"], base + ["--threads", "1"]),
    "t4pin": (["taskset", "-c", "4-7"], base + ["--threads", "4"]),
}
rng = random.Random(7)
res = []
deadline = time.time() + float(sys.argv[4])
for r in range(rounds):
    order = list(CONFIGS); rng.shuffle(order)
    for name in order:
        if time.time() > deadline: break
        pre, cmd = CONFIGS[name]
        t0 = time.perf_counter()
        p = subprocess.run(pre + cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        rec = {"config": name, "round": r, "wall": wall, "rc": p.returncode}
        notes = [l for l in p.stderr.splitlines() if "ready in" in l or "warm-up" in l or "load time" in l
                 or "llama_context:" in l and "time" in l]
        rec["notes"] = notes[-6:]
        try:
            rows = json.loads(p.stdout)
            rec["pp"] = rows[0]["samples_ts"]; rec["tg"] = rows[1]["samples_ts"]
        except Exception as e:
            rec["err"] = p.stderr[-2000:]
        res.append(rec)
        print(name, r, f"{wall:.2f}s", rec.get("pp", [0])[-1] if "pp" in rec else rec.get("err", "")[-300:], flush=True)
json.dump(res, open(out, "w"), indent=0)
