"""torch-sdpa's worker for issue 31: its phase clock, its hashed inputs, and its process templates.

The template cases run the real CUDA shim (``capshim build``'s) over the stand-in CUDA runtime and
driver, with the stand-in ``torch`` (tests/fixtures/torch_standin) reading the capability through
that runtime, launched as the bench launches a run (the ``/bin/sh`` pid wrapper, ``LD_PRELOAD``):
a child forked from a template must be answered by the shim exactly like a plain process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from capshim import launch, profiles
from capshim.backends import cuda
from capshim.bench import templates
from capshim.bench.workloads import phases, template, torch_sdpa, torch_sdpa_worker as w
from tests.bench import cuda_fake
from tests.bench.test_torch_sdpa import SMALL, _bench, _worker

FLAGS = ["--shape", SMALL, "--repetitions", "2", "--warmup", "1"]


def _lowbias32(x: int) -> int:
    """The hash written out on Python ints (the reference the array version must equal)."""
    m = 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & m
    x ^= x >> 15
    x = (x * 0x846CA68B) & m
    return x ^ (x >> 16)


def test_hashed_inputs_equal_the_reference_hash_and_have_unit_variance():
    key = w.stream_key(0, 0)
    n = 1 << 16
    vals = w.hashed_uniform(np.arange(n, dtype=np.int64), lambda a: a.astype(np.float32), key)
    assert vals.dtype == np.float32 and vals.shape == (n,)
    for i in (0, 1, 2, 12345, n - 1):
        h = _lowbias32((_lowbias32(i ^ key) + key) & 0xFFFFFFFF)
        want = np.float32((np.float32(h >> 8) * np.float32(2.0 ** -24) - np.float32(0.5)) * np.float32(12 ** 0.5))
        assert vals[i] == want
    assert abs(float(vals.mean())) < 0.02 and abs(float(vals.var()) - 1.0) < 0.02
    assert float(vals.min()) >= -(3 ** 0.5) and float(vals.max()) < 3 ** 0.5
    again = w.hashed_uniform(np.arange(n, dtype=np.int64), lambda a: a.astype(np.float32), key)
    assert np.array_equal(vals, again)  # the same seed: the same bits


def test_each_tensor_and_seed_gets_its_own_stream():
    keys = {w.stream_key(seed, t) for seed in range(4) for t in range(6)}
    assert len(keys) == 24 and all(0 <= k < 1 << 32 for k in keys)
    a, b = (w.hashed_uniform(np.arange(4096, dtype=np.int64), lambda x: x.astype(np.float32), w.stream_key(0, t))
            for t in (0, 1))
    assert abs(float(np.corrcoef(a, b)[0, 1])) < 0.1


def test_the_worker_reports_its_phases_in_the_json_and_on_stderr():
    r = _worker("9.0", "--warmup", "1")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    rec = out["capshim_phases"]
    assert list(rec) == list(phases.TORCH_PHASES)
    assert all(rec[k] is not None and rec[k] >= 0 for k in phases.TORCH_PHASES[1:])
    line = next(ln for ln in r.stderr.splitlines() if ln.startswith("capshim-torch-sdpa: phases "))
    assert json.loads(line.split("phases ", 1)[1]) == {**rec, "forked": False}


def test_the_profiler_asks_for_cuda_activity_only_and_nothing_more():
    sys.path.insert(0, str(cuda_fake.STANDIN))
    try:
        import torch
        from torch import profiler

        names = w._kernels(torch, lambda: torch.nn.functional.scaled_dot_product_attention(
            *(torch.randn(1, 1, 8, 4) for _ in range(3))))
    finally:
        sys.path.remove(str(cuda_fake.STANDIN))
        for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
            del sys.modules[name]
    assert names and profiler.profile.last_options == {"record_shapes": False, "profile_memory": False,
                                                       "with_stack": False, "with_flops": False}


def test_a_phase_clock_keeps_its_own_names():
    ph = phases.Phases(names=phases.TORCH_PHASES)
    ph.mark("imports")
    rec = ph.record()
    assert list(rec) == list(phases.TORCH_PHASES) and rec["imports"] >= 0 and rec["profile"] is None


def test_gpu_state_takes_the_cuda_driver_not_the_runtime_torch_maps():
    hit = template.GPU_LIBRARIES.search
    assert hit("/usr/lib/x86_64-linux-gnu/libcuda.so.1") and hit("/usr/lib/libcuda.so.580.65.06")
    assert not hit("/site-packages/nvidia/cu13/lib/libcudart.so.13")
    assert not hit("/site-packages/nvidia/cudnn/lib/libcudnn.so.9") and not hit("/x/libcublas.so.13")
    assert hit("/usr/lib/libvulkan_lvp.so") and hit("/usr/lib/libnvidia-glcore.so.580.65")


def test_torch_sdpa_is_served_by_templates():
    flags = template.worker_flags([sys.executable, "-m", torch_sdpa.WORKER_MODULE, *FLAGS],
                                  torch_sdpa.WORKER_MODULE)
    assert torch_sdpa.WORKER_MODULE in templates.TEMPLATE_WORKERS and flags == FLAGS


# ---- the real CUDA shim in a template's children ------------------------------------------------

@pytest.fixture(scope="module")
def cuda_build():
    return cuda.build()


def _env(b: cuda.CudaBuild, tmp_path, status: str, config: str | None) -> dict[str, str]:
    """A run's environment as the bench makes it: the stand-ins, the shim and its configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPSHIM_") and k != "LD_PRELOAD"}
    env.update(cuda.standin_env(b))
    env.update({"PYTHONPATH": os.pathsep.join([str(cuda_fake.SRC), str(cuda_fake.STANDIN)]),
                "CAPSHIM_STATUS_FILE": str(tmp_path / status), "CAPSHIM_QUIET": "1"})
    if config is not None:
        cfg = tmp_path / f"{status}.cfg"
        cfg.write_text(config)
        env.update({"LD_PRELOAD": str(b.library), cuda.CONFIG_VAR: str(cfg)})
    return env


def _argv() -> list[str]:
    return ["/bin/sh", "-c", launch.PID_WRAPPER, "capshim-run", sys.executable, "-m", torch_sdpa.WORKER_MODULE,
            *FLAGS]


def _events(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _forked(tpl: template.Template, env: dict, tmp_path, name: str) -> tuple[int, dict, str, int]:
    with open(tmp_path / f"{name}.out", "wb") as out, open(tmp_path / f"{name}.err", "wb") as err:
        rc, timed_out, why, pid = tpl.run(FLAGS, env, out.fileno(), err.fileno(), 120.0)
    assert not timed_out and why is None
    stderr = (tmp_path / f"{name}.err").read_text()
    assert rc == 0, stderr
    return rc, json.loads((tmp_path / f"{name}.out").read_text()), stderr, pid


@pytest.mark.parametrize("profile, cap, backend", [("t4-class", [7, 5], "mem-efficient"), (None, [9, 0], "cudnn")])
def test_a_forked_child_is_shimmed_like_a_plain_process(cuda_build, tmp_path, profile, cap, backend):
    config = cuda.render_config(profiles.load(profile)) if profile else None
    with open(tmp_path / "template.log", "wb") as log:
        tpl = template.Template(_argv(), _env(cuda_build, tmp_path, "template.jsonl", config), log, 120.0)
    try:
        assert tpl.gpu_state == []  # torch imported, no libcuda, no /dev/nvidia*
        children = [_forked(tpl, _env(cuda_build, tmp_path, f"run-{n}.jsonl", config), tmp_path, f"run-{n}")
                    for n in (1, 2)]
    finally:
        tpl.close()
    plain = subprocess.run(_argv(), env=_env(cuda_build, tmp_path, "plain.jsonl", config), capture_output=True,
                           text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    ref = json.loads(plain.stdout)
    assert ref["capability"] == cap and ref["sdpa_backend"] == backend
    assert children[0][3] != children[1][3] and tpl.proc.pid not in (children[0][3], children[1][3])
    for n, (_, out, stderr, pid) in enumerate(children, 1):
        assert out["capability"] == cap and out["sdpa_backend"] == backend
        assert out["output"] == ref["output"] and out["checksum"] == ref["checksum"]  # the same inputs
        assert '"forked": true' in stderr
        events = _events(tmp_path / f"run-{n}.jsonl")
        if profile is None:
            assert events == []
            continue
        # the child's own decision, in its own run's status file: loaded, target, lowered
        assert {e["pid"] for e in events} == {pid}
        assert [e["event"] for e in events][:2] == ["loaded", "config"] and events[1]["accepted"]
        assert {(e["key"], e["reported"]) for e in events if e["event"] == "changed"} >= {("computeCapability", 75)}
        assert not [e for e in events if e["event"] == "skipped"]
    if profile is not None:
        plain_changes = {(e["key"], e["stock"], e["reported"]) for e in _events(tmp_path / "plain.jsonl")
                         if e["event"] == "changed"}
        child_changes = {(e["key"], e["stock"], e["reported"]) for e in _events(tmp_path / "run-1.jsonl")
                         if e["event"] == "changed"}
        assert child_changes == plain_changes
    # the template decided nothing: of the shim, only its `loaded` events in template mode (its own and its
    # sh wrapper's), none in a run's status file (the children write theirs to their own)
    tevents = _events(tmp_path / "template.jsonl")
    assert all(e["event"] == "loaded" and e["template"] is True for e in tevents)
    assert {e["pid"] for e in tevents} == ({tpl.proc.pid} if profile else set()) and len(tevents) == (2 if profile else 0)


def test_the_bench_forks_torch_sdpa_runs_from_templates(tmp_path, monkeypatch):
    cuda_fake.install(monkeypatch)
    monkeypatch.setenv("CAPSHIM_BENCH_LAUNCH", "template")
    t4 = cuda_fake.profile_file(tmp_path, "t4-class", 75)
    _, res = _bench(tmp_path, "native", f"t4=profile:{t4}", aa=False)
    arms = res.summary["arms"]
    assert {n: a["state"] for n, a in arms.items()} == {"native": "native", "t4": "active"}
    assert {r["launch"] for a in arms.values() for r in a["runs"]} == {"template"}
    assert arms["t4"]["path"]["cuda"]["capability"] == "7.5" and arms["t4"]["output_check"] == "same output as native"


def test_a_run_never_inherits_a_template_variable(monkeypatch):
    """Set in a run's environment, CAPSHIM_TEMPLATE_FD would keep the CUDA shim stock in it."""
    import random
    from types import SimpleNamespace

    from capshim.bench import runs

    monkeypatch.setenv(template.FD_VAR, "7")
    lc = SimpleNamespace(env_delta={"CAPSHIM_STATUS_FILE": "s.jsonl"}, argv=["prog"], exec_argv=["prog"])
    exec_argv, env, _ = runs.Launcher(["CAPSHIM_STATUS_FILE"], 0, random.Random(0)).build(lc, {})
    assert template.FD_VAR not in env and env["CAPSHIM_STATUS_FILE"] == "s.jsonl"
    assert exec_argv[:3] == ["/bin/sh", "-c", launch.PID_WRAPPER]


def test_run_and_probe_never_inherit_a_template_variable(monkeypatch, tmp_path):
    """`capshim run` (launch.prepare's environment) and `capshim probe --api cuda` (the probe's)
    drop a stray CAPSHIM_TEMPLATE_FD as the bench does: one list (contracts.environ.NOT_INHERITED)."""
    from capshim.contracts import environ

    monkeypatch.setenv(template.FD_VAR, "7")
    lc = launch.prepare(["true"], run_dir=tmp_path)
    assert template.FD_VAR not in lc.env() and template.FD_VAR not in cuda.probe_env()
    assert template.FD_VAR == environ.TEMPLATE_FD_VAR and template.FD_VAR in environ.NOT_INHERITED


@pytest.mark.parametrize("mode", ["plain", "template"])
def test_capshim_bench_with_the_real_shim_lowers_the_arm_either_way(cuda_build, tmp_path, mode):
    """`capshim bench --workload torch-sdpa` end to end over the stand-in runtime: the real CUDA
    backend and shim, each launch mode; the a100-class arm answers 8.0 in every process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPSHIM_") and k != "LD_PRELOAD"}
    env.update(cuda.standin_env(cuda_build))
    env.update({"PYTHONPATH": os.pathsep.join([str(cuda_fake.SRC), str(cuda_fake.STANDIN)]),
                "CAPSHIM_BENCH_LAUNCH": mode, "CAPSHIM_MESSAGE_WIDTH": "0"})
    out = tmp_path / "b"
    r = subprocess.run([sys.executable, "-m", "capshim.cli", "bench", "--workload", "torch-sdpa", "--arm", "native",
                        "--arm", "a100-class", "--aa", "--shape", SMALL, "-r", "2", "--out", str(out)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    s = json.loads((out / "summary.json").read_text())
    arms = s["arms"]
    assert {n: a["state"] for n, a in arms.items()} == {"native": "native", "a100-class": "active", "aa": "active"}
    assert {n: a["path"]["cuda"]["capability"] for n, a in arms.items()} == \
        {"native": "9.0", "a100-class": "8.0", "aa": "9.0"}
    assert {r["launch"] for a in arms.values() for r in a["runs"]} == {mode}
    assert arms["a100-class"]["output_check"] == "same output as native"


def test_multi_gpu_arms_are_judged_by_the_device_the_run_reported(cuda_build, tmp_path):
    """Two stand-in devices; the worker runs on device 0 (review finding 1). An arm placing a100-class
    on device 0 (t4-class on 1) answers 8.0 there and is active, not struck by the first placement's
    7.5; an arm lowering only device 1 ran on a device it leaves stock: active, with a note, never
    "the shim did not reach the application"."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPSHIM_") and k not in ("LD_PRELOAD",
                                                                                             "CUDA_VISIBLE_DEVICES")}
    env.update(cuda.standin_env(cuda_build))
    env.update({"PYTHONPATH": os.pathsep.join([str(cuda_fake.SRC), str(cuda_fake.STANDIN)]),
                "CAPSHIM_STANDIN_DEVICES": "2", "CAPSHIM_MESSAGE_WIDTH": "0"})
    out = tmp_path / "b"
    r = subprocess.run([sys.executable, "-m", "capshim.cli", "bench", "--workload", "torch-sdpa", "--arm", "native",
                        "--arm", "x=profile:t4-class@1,profile:a100-class@0", "--arm", "y=profile:t4-class@1",
                        "--shape", SMALL, "-r", "1", "--out", str(out)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "did not reach" not in r.stderr
    arms = json.loads((out / "summary.json").read_text())["arms"]
    assert {n: a["state"] for n, a in arms.items()} == {"native": "native", "x": "active", "y": "active"}
    assert {n: a["path"]["cuda"]["capability"] for n, a in arms.items()} == {"native": "9.0", "x": "8.0", "y": "9.0"}
    assert "reach_check" not in arms["x"] and "reach_note" not in arms["x"]
    assert arms["y"]["reach_note"] == "ran on device 0, which this arm leaves stock" and "reach_check" not in arms["y"]
    assert "ran on device 0, which this arm leaves stock" in arms["y"]["flags"]
    assert not any("did not reach" in f or "path unchanged" in f for f in arms["y"]["flags"])
