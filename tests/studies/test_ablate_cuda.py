"""``capshim ablate`` over CUDA keys: a lower-only shim, ablated with lower profiles on the torch-sdpa workload.

The CUDA backend and keys are the test stand-ins of tests/bench/cuda_fake.py (until the cudacore
branch lands) and the workload runs on the stand-in torch (tests/fixtures/torch_standin).
"""

from __future__ import annotations

import json
import tomllib

import pytest

from capshim import profiles
from capshim.errors import UsageError
from capshim.studies import ablate, common
from tests.bench import cuda_fake


def test_units_and_arms_of_a_cuda_profile_key_by_key(tmp_path, monkeypatch):
    cuda_fake.install(monkeypatch)
    prof = profiles.load(str(cuda_fake.profile_file(tmp_path, "t4-class", 75)))
    stock = cuda_fake.BACKEND.stock_answers()
    us = ablate.units(prof, stock, by="key")
    assert [u.name for u in us] == ["computeCapability", "multiProcessorCount"] and not any(u.skipped for u in us)
    assert [u.name for u in ablate.units(prof, stock)] == ["other"]  # no Vulkan group placeholders
    arms, _ = ablate.build_arms(prof, stock, tmp_path / "p", by="key")
    assert [(a.name, a.spec.split("=", 1)[1].split(":")[0]) for a in arms] == [
        ("native", ""), ("aa", "identity"), ("sim", "profile"), ("loo-k00", "profile"), ("loo-k01", "profile"),
        ("loi-k00", "profile"), ("loi-k01", "profile"), ("cum-2-k01", "profile")]
    loi = tomllib.loads((tmp_path / "p" / "loi-k00.toml").read_text())  # P without computeCapability
    assert loi["api"] == "cuda" and loi["direction"] == "lower" and loi["capabilities"] == {"multiProcessorCount": 40}
    assert "capabilities" not in tomllib.loads((tmp_path / "p" / "cum-2-k01.toml").read_text())


def test_a_key_the_device_already_answers_lower_is_skipped(tmp_path, monkeypatch):
    cuda_fake.install(monkeypatch)
    prof = profiles.load(str(cuda_fake.profile_file(tmp_path, "big", 90)))  # 9.0 on a 9.0 device
    us = {u.name: u for u in ablate.units(prof, cuda_fake.BACKEND.stock_answers(), by="key")}
    assert us["computeCapability"].skipped and us["multiProcessorCount"].skipped is None


def test_the_workload_follows_the_profile_api(monkeypatch):
    cuda_fake.install(monkeypatch)
    assert common.study_workload("cuda") == "torch-sdpa"
    assert common.study_workload("vulkan") is None  # llama.cpp, as before
    with pytest.raises(UsageError, match="no built-in workload measures metal"):
        common.study_workload("metal")


def test_ablate_a_cuda_profile_end_to_end(tmp_path, monkeypatch):
    cuda_fake.install(monkeypatch)
    t4 = cuda_fake.profile_file(tmp_path, "t4-class", 75)
    # no --by: a CUDA profile is ablated key by key (its keys belong to no group)
    res = ablate.ablate(str(t4), out=tmp_path / "ab", repetitions=2, warmup=0, shape="1x2x64x16")
    summary = json.loads((tmp_path / "ab" / "bench" / "summary.json").read_text())
    sdpa = {name: arm["path"]["cuda"]["sdpa_backend"] for name, arm in summary["arms"].items()}
    assert sdpa == {"native": "cudnn", "aa": "cudnn", "sim": "mem-efficient", "loo-k00": "mem-efficient",
                    "loo-k01": "cudnn", "loi-k00": "cudnn", "loi-k01": "mem-efficient", "cum-2-k01": "cudnn"}
    assert all(arm["state"] in ("native", "active") for arm in summary["arms"].values())
    assert res["test"] == "sdpa-1x2x64x16" and [u["name"] for u in res["units"]] == \
        ["computeCapability", "multiProcessorCount"]
    assert (tmp_path / "ab" / "ablation.md").is_file() and (tmp_path / "ab" / "SHA256SUMS").is_file()


@pytest.mark.parametrize("shape, words", [("", "expected BxHxSxD"), ("axbxcxd", "expected BxHxSxD"),
                                          ("1x1x1x100000000", "more than 9999999")])
def test_a_bad_shape_is_exit_2_with_nothing_written(tmp_path, monkeypatch, shape, words):
    """Issue 22 hostile pass: ablate --shape '' created the study folder, probed, wrote the arms'
    profiles and sealed them before the bench refused the shape (help: "2 usage error ...,
    nothing written")."""
    cuda_fake.install(monkeypatch)
    prof = cuda_fake.profile_file(tmp_path, "t4-class", 75)
    with pytest.raises(UsageError, match=words):
        ablate.ablate(str(prof), out=tmp_path / "out", shape=shape)
    assert not (tmp_path / "out").exists()


def test_a_profile_that_only_renames_the_device_has_nothing_to_ablate(tmp_path, monkeypatch):
    cuda_fake.install(monkeypatch)
    prof = tmp_path / "onlyname.toml"
    prof.write_text('name = "onlyname"\napi = "cuda"\ndirection = "lower"\nversion = 1\ndescription = "d"\n'
                    '[capabilities]\ndeviceName = "Tesla T4"\n')
    with pytest.raises(UsageError, match="nothing to ablate"):
        ablate.ablate(str(prof), out=tmp_path / "out")
    assert not (tmp_path / "out").exists()
