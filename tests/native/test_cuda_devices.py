"""One profile per CUDA device (issue 32) on the stand-ins with two devices (CAPSHIM_STANDIN_DEVICES=2,
distinct UUIDs, CUDA_VISIBLE_DEVICES honoured by ordinal and UUID): the target hits its device and
only it, by ordinal as the application sees it and by UUID whatever the order; bad targets are one
line, exit 2, and nothing runs."""

from __future__ import annotations

import json

import pytest

from capshim.backends import cuda
from capshim.errors import EXIT_USAGE
from tests.conftest import run_capshim


#: The stand-ins' UUIDs (native/cuda/standin_cuda.c): physical device p ends in p.
UUID = {p: f"ca950000-0000-4000-8000-00000000000{p}" for p in range(3)}


@pytest.fixture(scope="module")
def env():
    b = cuda.build()
    return {**cuda.standin_env(b), "CAPSHIM_STANDIN_DEVICES": "2"}


def _probe(env, *args, **extra):
    out = run_capshim("probe", "--api", "cuda", *args, "--compare", "--json", env={**env, **extra})
    assert out.returncode == 0, out.stderr
    return {d["index"]: d for d in json.loads(out.stdout)["devices"]}


@pytest.mark.slow  # starts the probes of both devices, stock and shimmed
def test_a_target_lowers_its_device_and_leaves_the_other_stock(env):
    devs = _probe(env, "--profile", "t4-class@1")
    assert devs[0]["profile"] is None and devs[0]["differences"] == {}
    assert devs[0]["uuid"] == UUID[0] and devs[1]["uuid"] == UUID[1]
    assert devs[1]["profile"] == "t4-class@1"
    assert devs[1]["differences"]["computeCapability"] == [90, 75]
    assert devs[1]["differences"]["multiProcessorCount"] == [132, 40]
    per = devs[1]["shimmed"]["shim"]["cuda"]["devices"]
    assert list(per) == ["1"] and per["1"]["uuid"] == UUID[1] and per["1"]["profile"] == "t4-class"


@pytest.mark.slow  # starts the probes of both devices, stock and shimmed
def test_two_profiles_two_devices_by_ordinal_and_by_uuid(env):
    devs = _probe(env, "--profile", "t4-class@0", "--profile", f"a100-class@GPU-{UUID[1]}")
    assert devs[0]["differences"]["computeCapability"] == [90, 75]
    assert devs[1]["differences"]["computeCapability"] == [90, 80]
    assert devs[1]["profile"] == f"a100-class@GPU-{UUID[1]}"


@pytest.mark.slow  # starts the probes of both devices, stock and shimmed
def test_a_uuid_target_follows_its_device_when_cuda_visible_devices_reorders(env):
    # physical 1 is ordinal 0 now: the UUID still names it, the ordinal names what the app sees
    devs = _probe(env, "--profile", f"t4-class@{UUID[1]}", CUDA_VISIBLE_DEVICES="1,0")
    assert devs[0]["uuid"] == UUID[1] and devs[0]["differences"]["computeCapability"] == [90, 75]
    assert devs[1]["differences"] == {}
    devs = _probe(env, "--profile", "t4-class@1", CUDA_VISIBLE_DEVICES=f"GPU-{UUID[1]},0")
    assert devs[1]["uuid"] == UUID[0] and devs[1]["differences"]["computeCapability"] == [90, 75]
    assert devs[0]["differences"] == {}


@pytest.mark.slow  # starts the probes of both devices, stock and shimmed
def test_run_writes_the_targets_and_per_device_changes_to_the_status_file(env, tmp_path):
    b = cuda.build()
    status = tmp_path / "s.jsonl"
    out = run_capshim("run", "--status-file", str(status), "--profile", "t4-class@1", "--",
                      str(b.probe), "--device", "1", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["capabilities"]["computeCapability"] == 75
    said = " ".join(out.stderr.split())
    assert f"capshim: cuda: device 1 ({UUID[1]}) under t4-class, changed 7 answers: " in said, said
    events = [json.loads(line) for line in status.read_text().splitlines()]
    (tgt,) = [e for e in events if e["event"] == "targets"]
    assert tgt["devices"] == [{"index": 1, "uuid": UUID[1], "name": "NVIDIA H200 (stand-in 1)",
                               "profile": "t4-class@1", "simulate": None}]
    changed = [e for e in events if e["event"] == "changed"]
    assert changed and {(e["device"], e["uuid"], e["profile"]) for e in changed} == {(1, UUID[1], "t4-class")}
    configs = [e for e in events if e["event"] == "config" and e["accepted"]]
    assert {tuple(e["devices"]) for e in configs} == {(f"uuid:{UUID[1].replace('-', '')}",)}
    # the other device of the same process answers stock
    out = run_capshim("run", "--profile", "t4-class@1", "--", str(b.probe), "--device", "0", env=env)
    assert json.loads(out.stdout)["capabilities"]["computeCapability"] == 90


@pytest.mark.parametrize("args, extra, words", [
    (["--profile", "t4-class@2"], {}, "--profile t4-class@2: no CUDA device 2: this machine has 2 CUDA devices"),
    (["--profile", "t4-class@GPU-ca950000-0000-4000-8000-0000000000ff"], {}, "no CUDA device GPU-ca95"),
    (["--profile", "t4-class@1", "--profile", f"a100-class@{UUID[1]}"], {}, "is already given --profile t4-class@1"),
    (["--profile", "t4-class@0", "--profile", "t4-class"], {}, "--profile t4-class: targets every device"),
    (["--profile", "t4-class@1"], {"CAPSHIM_STANDIN_DEVICES": "1"},
     f"--profile t4-class@1: this machine has 1 CUDA device (0: NVIDIA H200 ({UUID[0]})); drop '@1'"),
    (["--profile", "t4-class@1"], {"CUDA_VISIBLE_DEVICES": f"GPU-{UUID[1]}"}, "this machine has 1 CUDA device"),
    (["--profile", "t4-class@x"], {}, "'x' is not a device index"),
    (["--simulate", "t4-class@1"], {}, "--simulate"),
])
def test_bad_targets_are_one_line_exit_2_and_nothing_runs(env, tmp_path, args, extra, words):
    marker = tmp_path / "ran"
    out = run_capshim("run", *args, "--", "touch", str(marker), env={**env, **extra})
    assert out.returncode == EXIT_USAGE, out.stderr
    assert words in " ".join(out.stderr.split()), out.stderr
    assert out.stderr.startswith("capshim: ") and out.stderr.count("capshim:") == 1, out.stderr
    assert not marker.exists()


def _cfg(tmp_path, name, devices=None):
    f = tmp_path / name
    f.write_text("direction=lower\nprofile=t4-class\ncomputeCapability=75\n" + (f"devices={devices}\n" if devices else ""))
    return str(f)


@pytest.mark.slow  # starts the probes of both devices, stock and shimmed
@pytest.mark.parametrize("case, reason", [
    ("nine", "more than 8 configuration paths"),
    ("empty_item", "an empty configuration path"),
    ("two_untargeted", "several configurations: each needs a devices= key"),
    ("same_device", "a device named by two configurations"),
])
def test_a_bad_list_of_configurations_leaves_every_device_stock_and_says_why(env, tmp_path, case, reason):
    from capshim import profiles

    a, b = _cfg(tmp_path, "a.cfg", "0"), _cfg(tmp_path, "b.cfg", "1")
    value = {"nine": ":".join([a] * 9), "empty_item": f"{a}::{b}",
             "two_untargeted": f"{_cfg(tmp_path, 'c.cfg')}:{_cfg(tmp_path, 'd.cfg')}",
             "same_device": f"{a}:{_cfg(tmp_path, 'e.cfg', '0')}"}[case]
    for device in (0, 1):
        data = cuda.probe(profiles.load("t4-class"), device=device,
                          extra_env={**env, cuda.CONFIG_VAR: value, "CAPSHIM_QUIET": "1"})
        assert data["capabilities"]["computeCapability"] == 90
        assert data["shim"]["cuda"]["state"] == "invalid" and reason in data["shim"]["cuda"]["reason"]


def test_one_device_takes_a_target_on_device_0_and_the_status_names_it(env, tmp_path):
    # issue 32's one-GPU check: @0 works (the same answers as no target), @1 is refused by name (above)
    b = cuda.build()
    status = tmp_path / "s.jsonl"
    out = run_capshim("run", "--status-file", str(status), "--profile", "t4-class@0", "--",
                      str(b.probe), "--device", "0", env={**env, "CAPSHIM_STANDIN_DEVICES": "1"})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["capabilities"]["computeCapability"] == 75
    assert f"capshim: cuda: device 0 ({UUID[0]}) under t4-class, changed" in " ".join(out.stderr.split())
    events = [json.loads(line) for line in status.read_text().splitlines()]
    (tgt,) = [e for e in events if e["event"] == "targets"]
    assert [(d["index"], d["profile"]) for d in tgt["devices"]] == [(0, "t4-class@0")]


def test_probe_list_names_each_device_with_its_uuid(env):
    out = run_capshim("probe", "--list", "--api", "cuda", env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"0: NVIDIA H200 ({UUID[0]})", f"1: NVIDIA H200 (stand-in 1) ({UUID[1]})"]
    out = run_capshim("probe", "--list", "--api", "cuda", "--json", env={**env, "CUDA_VISIBLE_DEVICES": "1"})
    assert json.loads(out.stdout) == {"api": "cuda", "devices": [
        {"index": 0, "name": "NVIDIA H200 (stand-in 1)", "uuid": UUID[1]}]}
    out = run_capshim("probe", "--list", "--api", "cuda", "--profile", "t4-class@1", env=env)
    assert out.returncode == EXIT_USAGE and "--list: lists the devices only" in out.stderr


@pytest.mark.slow  # starts the probes of both devices, stock and shimmed
def test_probe_compare_says_per_device_what_the_shim_did_there(env):
    out = run_capshim("probe", "--api", "cuda", "--profile", "t4-class@1", "--compare", env=env)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    first, second = text.split("device 1 (")
    assert "device 0 (" in first and "stock (no profile)" in first
    assert "cuda: stock: no profile targets device 0" in first and "recorded" not in first, first
    assert "the shim changed 7 answer(s) on device 1 under t4-class" in second, second
@pytest.mark.parametrize("order", ["uuid_first", "index_first"])
def test_one_device_named_by_index_and_by_uuid_in_two_configurations_answers_stock(env, tmp_path, order):
    """Review finding 2: t4.cfg names device 1 by UUID, a100.cfg by index 1. Both configurations load
    (the load-time check compares specs of one kind); at selection the shim finds both name device 1:
    it answers stock there, one rejected config event names both files, no crash."""
    from capshim import profiles

    t4 = _cfg(tmp_path, "t4.cfg", "uuid:" + UUID[1].replace("-", ""))
    a100 = tmp_path / "a100.cfg"
    a100.write_text("direction=lower\nprofile=a100-class\ncomputeCapability=80\ndevices=1\n")
    value = f"{t4}:{a100}" if order == "uuid_first" else f"{a100}:{t4}"
    data = cuda.probe(profiles.load("t4-class"), device=1, extra_env={**env, cuda.CONFIG_VAR: value})
    assert data["capabilities"]["computeCapability"] == 90
    assert data["shim"]["cuda"]["state"] == "invalid", data["shim"]
    reason = data["shim"]["cuda"]["reason"]
    assert "a device named by two configurations: device 1" in reason and UUID[1] in reason
    assert str(t4) in reason and str(a100) in reason and "it answers stock" in reason
