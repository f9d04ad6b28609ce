"""CUDA profiles: keys related to each other (profile check), the answers a built-in profile sets at every
newer GPU's value said once (same_on_newer), and deviceName in probe --compare (issue 27, item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from capshim import profiles
from capshim.backends import cuda
from capshim.cli import main
from capshim.profiles import ProfileError, check_against_device, describe
from capshim.profiles.checks import no_effect

REPO = Path(__file__).resolve().parents[2]
BUILTIN = ("t4-class", "a100-class", "pascal-class")
#: The H200's stock answers as the shim logged them (committed evidence, t4-class run on the H200).
H200_T4_RUN = REPO / "evidence" / "h200-cuda-shim-checks" / "status-t4-worker.jsonl"


def _profile(caps: str, extra: str = "") -> str:
    return f'name = "x"\napi = "cuda"\ndirection = "lower"\nversion = 1\ndescription = "d"\n{extra}\n[capabilities]\n{caps}\n'


@pytest.mark.parametrize("caps, key, words", [
    ("sharedMemPerBlockOptin = 99999\nsharedMemPerMultiprocessor = 65536", "capabilities.sharedMemPerMultiprocessor",
     "below sharedMemPerBlockOptin 99999 (every CUDA device has sharedMemPerBlock <= sharedMemPerBlockOptin <= "
     "sharedMemPerMultiprocessor)"),
    ("sharedMemPerBlock = 65536\nsharedMemPerBlockOptin = 49152", "capabilities.sharedMemPerBlockOptin",
     "below sharedMemPerBlock 65536"),
    ("maxThreadsPerBlock = 1024\nmaxThreadsPerMultiProcessor = 512", "capabilities.maxThreadsPerMultiProcessor",
     "below maxThreadsPerBlock 1024 (every CUDA device has maxThreadsPerBlock <= maxThreadsPerMultiProcessor)"),
    ("regsPerBlock = 65536\nregsPerMultiprocessor = 32768", "capabilities.regsPerMultiprocessor",
     "below regsPerBlock 65536"),
], ids=["optin-over-sm", "block-over-optin", "threads", "registers"])
def test_profile_check_relates_cuda_keys_naming_the_file_and_keys(tmp_path, caps, key, words):
    f = tmp_path / "mine.toml"
    f.write_text(_profile(caps))
    with pytest.raises(ProfileError) as exc:
        profiles.load(str(f))
    assert exc.value.key == key and words in str(exc.value) and str(f) in str(exc.value)
    r = CliRunner().invoke(main, ["profile", "check", str(f)])
    assert r.exit_code == 2 and words in r.output and "Traceback" not in r.output, r.output


def test_answers_after_the_profile_are_related_too():
    """A profile that lowers one key alone can still break a rule with the device's answer of the other:
    maxThreadsPerMultiProcessor = 512 on a device whose blocks take 1024 threads is named on the device
    (a warning: an ablation lowers keys one at a time on purpose, and the device runs either way)."""
    dev = {"device": {"name": "H200"}, "capabilities": {"maxThreadsPerBlock": 1024, "maxThreadsPerMultiProcessor": 2048,
                                                        "sharedMemPerBlockOptin": 232448,
                                                        "sharedMemPerMultiprocessor": 233472}}
    alone = profiles.parse(_profile("maxThreadsPerMultiProcessor = 512"), "one.toml")
    def broken(p):
        return [f for f in check_against_device(p, dev) if "after the profile" in f.message]

    found = broken(alone)
    assert [(f.key, f.severity) for f in found] == [("maxThreadsPerMultiProcessor", "warn")]
    assert found[0].message.startswith("maxThreadsPerBlock 1024 > maxThreadsPerMultiProcessor 512 after the profile")
    assert "lower maxThreadsPerBlock too" in found[0].message
    both = profiles.parse(_profile("maxThreadsPerBlock = 512\nmaxThreadsPerMultiProcessor = 512"), "two.toml")
    assert broken(both) == []
    sm = profiles.parse(_profile("sharedMemPerMultiprocessor = 65536"), "sm.toml")
    assert [f.key for f in broken(sm)] == ["sharedMemPerMultiprocessor"]
    assert not [f for f in check_against_device(profiles.load("t4-class"), dev) if f.severity == "refuse"]


def _h200_stock() -> dict[str, int]:
    """Every key the t4-class run lowered, with the H200's stock value (the shim's changed events)."""
    out = {}
    for line in H200_T4_RUN.read_text().splitlines():
        e = json.loads(line)
        if e.get("event") == "changed":
            out[e["key"]] = e["stock"]
    return out


def test_same_on_newer_is_what_the_h200_left_unchanged_under_t4_class():
    """The declaration agrees with the measurement: under t4-class on the H200 the shim changed every key
    the profile sets except exactly those it declares the same on newer GPUs."""
    t4 = profiles.load("t4-class")
    changed = set(_h200_stock())
    assert set(t4.same_on_newer) == set(t4.capabilities) - changed
    assert set(t4.same_on_newer) == {"sharedMemPerBlock", "regsPerBlock", "regsPerMultiprocessor", "maxThreadsPerBlock"}


@pytest.mark.parametrize("name", BUILTIN)
def test_builtin_profiles_say_once_which_answers_equal_a_newer_device(name):
    p = profiles.load(name)
    assert p.same_on_newer and set(p.same_on_newer) <= set(p.capabilities)
    shown = json.loads(CliRunner().invoke(main, ["profile", "show", name]).output)
    assert shown["same_on_newer"] == list(p.same_on_newer)
    once = [line for line in describe(p) if line.startswith("same on newer devices: ")]
    assert len(once) == 1 and all(f"{k} = " in once[0] for k in p.same_on_newer)
    # on the H200 (its stock answers: the committed t4-class run), no run warns about the declared keys ...
    h200 = {"device": {"name": "NVIDIA H200"},
            "capabilities": {**_h200_stock(), **{k: profiles.load("t4-class").capabilities[k]
                                                 for k in profiles.load("t4-class").same_on_newer}}}
    found = no_effect(p, h200)
    assert not {f.key for f in found} & set(p.same_on_newer)
    if name == "t4-class":
        assert found == []  # every other t4-class answer is lowered on the H200
    # ... while an undeclared key equal to the device's is still named
    other = next(k for k in p.capabilities if k not in p.same_on_newer and k != "computeCapability")
    h200["capabilities"][other] = p.capabilities[other]
    assert other in {f.key for f in no_effect(p, h200)}


def test_same_on_newer_must_name_keys_the_profile_sets(tmp_path):
    with pytest.raises(ProfileError, match="names a key the profile does not set") as exc:
        profiles.parse(_profile("maxThreadsPerBlock = 1024", 'same_on_newer = ["regsPerBlock"]'), "s.toml")
    assert exc.value.key == "same_on_newer"
    with pytest.raises(ProfileError) as exc:
        profiles.parse(_profile("maxThreadsPerBlock = 1024", 'same_on_newer = ["maxThreadsPerBlok"]'), "s.toml")
    assert "same_on_newer" in str(exc.value)
    p = profiles.parse(_profile("maxThreadsPerBlock = 1024", 'same_on_newer = ["maxThreadsPerBlock"]'), "s.toml")
    assert profiles.parse(profiles.to_toml(p), "again.toml").same_on_newer == ("maxThreadsPerBlock",)


def test_probe_compare_shows_the_device_name(monkeypatch, tmp_path):
    """deviceName is a row of probe --compare for CUDA (stand-in runtime and driver: an H200's answers)."""
    b = cuda.build()
    for k, v in cuda.standin_env(b).items():
        monkeypatch.setenv(k, v)
    named = profiles.parse(profiles.load("t4-class").text.replace("[capabilities]",
                                                                 '[capabilities]\ndeviceName = "Tesla T4"'), "n.toml")
    out = cuda.BACKEND.probe(named, compare=True)
    assert out["differences"]["deviceName"] == [out["stock"]["device"]["name"], "Tesla T4"]
    assert list(out["stock"]["capabilities"])[0] == "deviceName"
    plain = cuda.BACKEND.probe(profiles.load("t4-class"), compare=True)
    assert "deviceName" not in plain["differences"] and "deviceName" in plain["shimmed"]["capabilities"]
    f = tmp_path / "named.toml"
    f.write_text(named.text)
    r = CliRunner().invoke(main, ["probe", "--api", "cuda", "--compare", "--profile", str(f)])
    assert r.exit_code == 0, r.output
    row = next(line for line in r.output.splitlines() if "deviceName" in line)
    assert "Tesla T4" in row and out["stock"]["device"]["name"] in row
