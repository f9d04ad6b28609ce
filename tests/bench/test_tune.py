"""capshim tune: the search space from a probe, the candidate sample, halving, end to end on lavapipe."""

from __future__ import annotations

import json

import pytest

from capshim import profiles
from capshim.bench import ablate, tune
from tests.bench.test_ablate import GPU_STOCK
from tests.conftest import run_capshim

H200_LIKE = {**GPU_STOCK, "capabilities": {**GPU_STOCK["capabilities"], "subgroupSizeControl": True,
                                           "cooperativeMatrixWorkgroupScope": True},
             "extensions": {**GPU_STOCK["extensions"], "VK_NV_cooperative_matrix2": 1}}


def test_dimensions_only_lower_what_the_device_has(tmp_path):
    dims = tune.dimensions(H200_LIKE)
    assert [o.label for o in dims["shmem"]] == ["49152", "36864", "24576"]
    assert [o.label for o in dims["coopmat"]] == ["stock", "coopmat1", "none"]
    assert dims["coopmat"][1].exts == {"VK_NV_cooperative_matrix2": False}
    assert dims["coopmat"][2].caps["cooperativeMatrix"] is False
    assert set(dims) == {"shmem", "fp16", "bf16", "intdot", "subgroup-size-control", "coopmat"}
    # every option of every dimension is a valid lower profile that answers nothing above the device
    for d, opts in dims.items():
        for i in range(1, len(opts)):
            prof = tune.write_candidate(dims, {d: i}, tmp_path / f"{d}{i}.toml", "t", "dev")
            assert prof.direction == "lower"
            for key, v in prof.capabilities.items():
                real = H200_LIKE["capabilities"][key]
                assert v <= int(real)
            assert all(e in H200_LIKE["extensions"] for e in prof.extensions)


def test_dimensions_of_a_device_without_coopmat_or_fp16():
    stock = {"capabilities": {"maxComputeSharedMemorySize": 16384, "shaderFloat16": False}, "extensions": {}}
    assert tune.dimensions(stock) == {}


def test_candidates_are_seeded_unique_and_never_stock():
    dims = tune.dimensions(H200_LIKE)
    a = tune.candidates(dims, 12, seed=3)
    assert a == tune.candidates(dims, 12, seed=3)
    assert len(a) == 12
    keys = [tuple(sorted(c.items())) for c in a]
    assert len(set(keys)) == 12 and all(any(c.values()) for c in a)
    singles = [c for c in a if sum(1 for v in c.values() if v) == 1]
    assert len(singles) == 8 and a[:8] == singles  # 2 shmem, fp16, bf16, intdot, subgroup, 2 coopmat: singles first
    small = tune.candidates(dims, 2, seed=3)
    assert len(small) == 2 and all(sum(1 for v in c.values() if v) == 1 for c in small)


def test_halve_keeps_the_faster_half_that_passes_the_gate():
    R = ablate.Ratio
    rs = {"a": R(1.05, 1.0, 1.1, "active", True), "b": R(1.10, 1.0, 1.2, "wrong-output", False),
          "c": R(0.90, 0.8, 1.0, "active", True), "d": R(1.02, 1.0, 1.1, "active", True)}
    assert tune.halve(list(rs), rs) == ["a", "d"]
    assert tune.halve(["b"], rs) == []


def test_tune_end_to_end_on_lavapipe(tmp_path, stock_probe):
    out = tmp_path / "tune"
    r = run_capshim("tune", "--json", "--budget", "2", "-r", "1", "--confirm-runs", "2", "-p", "16", "-n", "4",
                    "--dims", "shmem,fp16", "--out", str(out), timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert len(res["candidates"]) == 2
    assert res["only"] == ["shmem", "fp16"] and set(res["dimensions"]) == {"shmem", "fp16"}
    assert all(c["answers"].split("=")[0] in ("shmem", "fp16") for c in res["candidates"].values())
    stage0 = json.loads((out / "stage-0" / "summary.json").read_text())
    assert set(stage0["arms"]) == {"native", *res["candidates"]}
    for name, c in res["candidates"].items():
        assert c["results"][0]["state"] == stage0["arms"][name]["state"]
    if res["winner"]:
        assert profiles.load(res["tuned_profile"]).direction == "lower"
        confirm = json.loads((out / "confirm" / "summary.json").read_text())
        assert set(confirm["arms"]) == {"native", "tuned", "aa"}
        assert res["confirm"]["aa"]["state"] == confirm["arms"]["aa"]["state"]
        assert res["confirm"]["verdict"]
    assert (out / "tune.md").is_file()


def test_ratio_json_has_no_nan():
    failed = ablate.Ratio(float("nan"), None, None, "failed", False)
    assert tune._ratio_json(failed) == {"ratio": None, "ci95": None, "state": "failed"}
    assert json.loads(json.dumps(tune._ratio_json(failed))) == tune._ratio_json(failed)
    ok = ablate.Ratio(1.02, 0.99, 1.05, "active", True)
    assert tune._ratio_json(ok) == {"ratio": 1.02, "ci95": [0.99, 1.05], "state": "active"}


def test_dims_names_what_this_device_has(tmp_path, stock_probe):
    r = run_capshim("tune", "--dims", "shmem,warp-drive", "--out", str(tmp_path / "t"), timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "--dims warp-drive: not a dimension of" in r.stderr and "shmem" in r.stderr
    assert not (tmp_path / "t").exists()
    r = run_capshim("tune", "--dims", " , ", "--out", str(tmp_path / "t"), timeout=120)
    assert r.returncode == 2 and "--dims" in r.stderr and "Traceback" not in r.stderr
