"""Worker processes under several configurations, interleaved, one JSON line per process.

    python3 scripts/h200-precision/procs.py MODEL OUT.jsonl --until EPOCH [--seed N] [--stderr DIR]

Issue 31 items 1 and 3 on the GPU machine. Each round runs, in a seeded random order, the
built-in llama.cpp worker (capshim.bench.workloads.builtin_worker, no shim: the native arm)

- ``plain`` (twice a round): a fresh ``python3 -m ...builtin_worker`` process;
- ``template`` (twice a round): a child forked from a process template
  (capshim.bench.workloads.template; a new template every TEMPLATE_LIFE children, so the
  template's own address layout varies too);
- candidate causes of the process effect: ``noaslr`` (setarch -R: the same host addresses in
  every process), ``no-hostvis-vidmem`` (GGML_VK_DISABLE_HOST_VISIBLE_VIDMEM=1: another memory
  type for device buffers), ``mem-priority`` (GGML_VK_ENABLE_MEMORY_PRIORITY=1),
  ``no-async`` (GGML_VK_DISABLE_ASYNC=1: no transfer queue), ``perf-logger``
  (GGML_VK_PERF_LOGGER=1: per-op GPU times on stderr, kept);

until ``--until`` (a Unix time) leaves less than one round's cost. Each line: the config, the
pid (and template pid), wall seconds seen by this parent, the worker's ``capshim_phases``,
pp512 and tg samples (tok/s), start and end Unix times (to align with nvidia-smi's log), and
nvidia-smi's clocks, temperature and memory just before the process. table.py reads it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from capshim.bench.workloads.template import Template, TemplateError, worker_flags

MODULE = "capshim.bench.workloads.builtin_worker"
TEMPLATE_LIFE = 4
CONFIGS = {
    "plain": {},
    "template": {},
    "noaslr": {},
    "no-hostvis-vidmem": {"GGML_VK_DISABLE_HOST_VISIBLE_VIDMEM": "1"},
    "mem-priority": {"GGML_VK_ENABLE_MEMORY_PRIORITY": "1"},
    "no-async": {"GGML_VK_DISABLE_ASYNC": "1"},
    "perf-logger": {"GGML_VK_PERF_LOGGER": "1"},
}
ROUND = ["plain", "template", "plain", "template", "noaslr", "no-hostvis-vidmem", "mem-priority",
         "no-async", "perf-logger"]
SMI = "clocks.sm,clocks.mem,temperature.gpu,memory.used,power.draw,pstate"


def smi() -> dict:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={SMI}", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        return dict(zip(SMI.split(","), [v.strip() for v in out.split(",")]))
    except (OSError, subprocess.TimeoutExpired):
        return {}


def base_env() -> dict[str, str]:
    env = dict(os.environ)
    try:
        from capshim.bench.workloads.builtin import worker_env

        env.update(worker_env())
    except Exception as exc:  # noqa: BLE001 - the caches are an optimisation
        print(f"procs: no worker_env ({exc})", file=sys.stderr)
    env["GGML_VK_VISIBLE_DEVICES"] = "0"
    return env


def parse_rows(text: str) -> dict:
    try:
        rows = json.loads(text)
    except ValueError:
        return {}
    out = {}
    for row in rows:
        name = f"pp{row['n_prompt']}" if row["n_prompt"] else f"tg{row['n_gen']}"
        out[name] = row["samples_ts"]
        out["phases"] = row.get("capshim_phases")
    return out


class Templates:
    """One live template, replaced every TEMPLATE_LIFE children."""

    def __init__(self, argv, env, folder: Path):
        self.argv, self.env, self.folder, self.tpl, self.used = argv, env, folder, None, 0

    def get(self) -> Template:
        if self.tpl is None or self.used >= TEMPLATE_LIFE or not self.tpl.alive():
            if self.tpl is not None:
                self.tpl.close()
            log = open(self.folder / f"template-{int(time.time() * 1000)}.log", "wb")
            self.tpl = Template(self.argv, self.env, log)
            log.close()
            self.used = 0
        self.used += 1
        return self.tpl

    def close(self):
        if self.tpl is not None:
            self.tpl.close()


def one(config: str, argv: list[str], env: dict, templates: Templates, tmp: Path, timeout: float) -> dict:
    run_env = {**env, **CONFIGS[config]}
    rec = {"config": config, "smi_before": smi(), "t_start": time.time()}
    out_p, err_p = tmp / "out", tmp / "err"
    with open(out_p, "w+b") as out, open(err_p, "w+b") as err:
        t0 = time.monotonic()
        if config == "template":
            tpl = templates.get()
            rec["template_pid"] = tpl.proc.pid
            rc, timed_out, _why, pid = tpl.run(worker_flags(argv, MODULE), run_env, out.fileno(), err.fileno(),
                                                timeout)
        else:
            cmd = (["setarch", platform.machine(), "-R"] if config == "noaslr" else []) + argv
            proc = subprocess.Popen(cmd, env=run_env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
            pid, timed_out = proc.pid, False
            try:
                rc = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc, timed_out = proc.wait(), True
        rec.update(wall_s=round(time.monotonic() - t0, 4), t_end=time.time(), pid=pid, rc=rc, timed_out=timed_out)
    rec.update(parse_rows(out_p.read_text(errors="replace")))
    stderr = err_p.read_text(errors="replace")
    rec["stderr_tail"] = stderr[-400:] if rc else ""
    rec["_stderr"] = stderr
    return rec


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--until", type=float, required=True, help="Unix time to stop by")
    ap.add_argument("--seed", type=int, default=31)
    ap.add_argument("--stderr", default=None, help="folder for the perf-logger runs' stderr")
    ap.add_argument("--n-gen", type=int, default=32)
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--max-rounds", type=int, default=40)
    a = ap.parse_args()
    argv = [sys.executable, "-m", MODULE, "--model", a.model, "--n-prompt", "512", "--n-gen", str(a.n_gen),
            "--repetitions", str(a.repetitions), "--log-level", "info"]
    env = base_env()
    tmp = Path(tempfile.mkdtemp(prefix="procs-"))  # the runs' files and template logs: not in $OUT
    errdir = Path(a.stderr) if a.stderr else tmp
    errdir.mkdir(parents=True, exist_ok=True)
    templates = Templates(argv, env, tmp)
    rng = random.Random(a.seed)
    rounds = ROUND[:]
    try:  # setarch -R: personality(ADDR_NO_RANDOMIZE); a sandbox (gVisor) may refuse it
        subprocess.run(["setarch", platform.machine(), "-R", "true"], check=True, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"procs: no noaslr config here (setarch -R: {exc})", flush=True)
        rounds.remove("noaslr")
    costs: list[float] = []
    n = 0
    with open(a.out, "a") as fh:
        for rnd in range(a.max_rounds):
            order = rounds[:]
            rng.shuffle(order)
            round_cost = (statistics.median(costs) * len(order) if costs else 0) + 5
            if time.time() + round_cost > a.until:
                print(f"procs: stopping before round {rnd + 1}: {a.until - time.time():.0f} s left, "
                      f"a round takes about {round_cost:.0f} s", flush=True)
                break
            for config in order:
                try:
                    rec = one(config, argv, env, templates, tmp, timeout=120)
                except TemplateError as exc:
                    rec = {"config": config, "error": f"template: {exc}"}
                    templates.tpl = None
                stderr = rec.pop("_stderr", "")
                n += 1
                if config == "perf-logger" or n <= len(rounds):
                    (errdir / f"{n:03d}-{config}.txt").write_text(stderr)
                rec.update(round=rnd + 1, index=n)
                if "wall_s" in rec:
                    costs.append(rec["wall_s"])
                fh.write(json.dumps(rec) + "\n")
                fh.flush()
                pp = rec.get("pp512") or [0]
                print(f"[{n}] round {rnd + 1} {config}: rc {rec.get('rc')} {rec.get('wall_s', 0):.2f} s "
                      f"pp512 {statistics.median(pp):.0f} tok/s", flush=True)
    templates.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
