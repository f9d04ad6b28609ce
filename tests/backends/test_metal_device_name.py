"""The Metal device name as an answer (issue 21, item 5): ``deviceName`` in a Metal profile,
carried percent-encoded in ``CAPSHIM_METAL_DEVICE_NAME`` (the rule shared with the Vulkan layer,
native/common/devname.h) and answered by ``-[MTLDevice name]`` through the shim, on Linux with
the GNU Objective-C stand-in. Off by default: without it the name is the device's own."""

from __future__ import annotations

import json

import pytest

from capshim import profiles
from capshim.backends import metal
from capshim.backends.metal import compile as metal_build
from capshim.native.build import run_compiler
from capshim.profiles.model import encode_device_name

STOCK_NAME = "Apple Paravirtual device (capshim stand-in)"
VAR = metal.CONFIG_VARIABLES["deviceName"]
HEAD = 'name="m"\napi="metal"\ndirection="raise"\nversion=1\ndescription="d"\n[capabilities]\n'


def _named(name: str) -> dict[str, str]:
    return {VAR: encode_device_name(name)}


def test_the_shim_answers_the_configured_name_and_nothing_else(shim):
    r = shim.run(["new", "CSParavirtDevice"], _named("Apple M1 Ultra"))
    assert r.rc == 0, r.stderr
    d = r.one()
    assert d["device"] == "Apple M1 Ultra"
    stock = shim.run(["new", "CSParavirtDevice"], shim=False).one()
    assert {k: v for k, v in d.items() if k != "device"} == {k: v for k, v in stock.items() if k != "device"}
    (changed,) = r.of("changed")
    assert changed == {**changed, "query": "name", "key": "", "stock": STOCK_NAME, "reported": "Apple M1 Ultra"}
    assert r.of("config")[0]["values"]["deviceName"] == "Apple M1 Ultra"
    assert metal.summarize_status(r.events) == "active"
    assert 'name "Apple M1 Ultra"' in r.stderr  # the banner says so


def test_utf8_names_arrive_byte_for_byte(shim):
    name = "Radeon\u2122 ~ 100% caf\u00e9 + M1"
    r = shim.run(["new", "CSParavirtDevice"], _named(name))
    assert r.one()["device"] == name
    # status strings carry each byte >= 0x80 as \u00XX (status.h): latin-1 gives the bytes back
    assert r.of("changed")[0]["reported"].encode("latin-1").decode() == name


def test_a_name_equal_to_the_stock_one_changes_nothing(shim):
    r = shim.run(["new", "CSParavirtDevice"], _named(STOCK_NAME))
    assert r.one()["device"] == STOCK_NAME and r.of("changed") == []


def test_with_other_answers_and_on_hook_path_2(shim):
    r = shim.run(["create"], {**_named("Apple M1 Ultra"), "CAPSHIM_METAL_APPLE_FAMILY_MAX": "1007"},
                 noprivate=True)
    d = r.one()
    assert d["device"] == "Apple M1 Ultra" and d["highest"]["apple"] == 1007


def test_a_child_without_inherit_stays_stock(shim):
    r = shim.run(["env"], _named("Apple M1 Ultra"))
    assert r.rc == 0, r.stderr
    env = json.loads(r.stdout.splitlines()[0])["env"]
    assert env[VAR] is None  # scrubbed at load
    child = json.loads(r.stdout.splitlines()[1])
    assert child["device"] == STOCK_NAME
    (scrub,) = r.of("env_scrubbed")
    assert VAR in scrub["variables"]


def test_a_child_with_inherit_gets_the_name(shim):
    r = shim.run(["env"], {**_named("Apple M1 Ultra"), "CAPSHIM_INHERIT": "1"})
    child = json.loads(r.stdout.splitlines()[1])
    assert child["device"] == "Apple M1 Ultra"


@pytest.mark.parametrize("raw, reason", [
    ("Apple M1", "is not percent-encoded"),
    ("a%4", "not followed by two hex digits"),
    ("%41" * 256, "is longer than 255 bytes decoded"),
    ("a%00b", "is not UTF-8 without control characters"),
    ("%1B%5B31m", "is not UTF-8 without control characters"),
    ("%C2%85", "is not UTF-8 without control characters"),
    ("%FF", "is not UTF-8 without control characters"),
    ("", "is empty"),
])
def test_a_bad_name_leaves_every_answer_stock_and_says_why(shim, raw, reason):
    r = shim.run(["new", "CSParavirtDevice"], {VAR: raw, "CAPSHIM_METAL_APPLE_FAMILY_MAX": "1009"})
    assert r.rc == 0
    d = r.one()
    assert d["device"] == STOCK_NAME and d["highest"]["apple"] == 1005
    (config,) = r.of("config")
    assert config["accepted"] is False
    assert config["reason"].startswith(f"{VAR}: ") and reason in config["reason"]
    assert metal.summarize_status(r.events) == "invalid"


def test_255_bytes_are_accepted(shim):
    name = "\u00e9" * 127 + "x"
    r = shim.run(["new", "CSParavirtDevice"], _named(name))
    assert r.one()["device"] == name


def test_a_device_without_a_name_method_stays_stock(shim):
    r = shim.run(["new", "CSLimitedDevice"], _named("Apple M1 Ultra"))
    assert r.rc == 0
    assert r.one()["device"] is None
    (hooks,) = r.of("hooks")
    assert hooks["installed"] == [] and hooks["missing"] == ["-[CSLimitedDevice name]"]


def test_without_nsstring_the_name_stays_stock_and_says_why(shim, tmp_path):
    """A runtime where no NSString can be made: the shim hooks nothing for the name (never a
    crash, never a nil name) and its hooks event says why."""
    lib = tmp_path / metal_build.STANDIN_NAME
    src = metal.NATIVE_DIR / "standin_metal.m"
    run_compiler(["gcc", *metal_build.WARN_FLAGS, "-g", "-O1", "-fsanitize=address,undefined",
                  "-DSTANDIN_NO_NSSTRING", "-fvisibility=hidden", "-fPIC", "-shared", str(src), "-lobjc",
                  "-lpthread", "-o", str(lib)])
    r = shim.run(["new", "CSParavirtDevice"], {**_named("Apple M1 Ultra"), "CAPSHIM_METAL_APPLE_FAMILY_MAX": "1009"},
                 extra={"LD_LIBRARY_PATH": str(tmp_path)})
    assert r.rc == 0, r.stderr
    d = r.one()
    assert d["device"] == STOCK_NAME and d["highest"]["apple"] == 1009
    (hooks,) = r.of("hooks")
    assert "no NSString" in hooks["reason"] and not any("name]" in h for h in hooks["installed"])


def test_profile_to_environment_and_probe(shim):
    """A Metal profile's deviceName reaches the shim through shim_env and run_probe; a profile
    that sets only the name is a valid Metal profile."""
    p = profiles.parse(HEAD + 'deviceName = "Apple M1 Ultra"\n', "named.toml")
    env = metal.shim_env(p, shim.arts["shim"], None, inherit=False, quiet=True, inject_var="LD_PRELOAD")
    assert env[VAR] == "Apple%20M1%20Ultra"
    a = shim.arts
    r = metal.run_probe(a["probe"], a["shim"], p, compare=True, inject_var="LD_PRELOAD",
                        framework=a["standin"], base_env=shim.base_env())
    assert r["shimmed"]["device"] == "Apple M1 Ultra" and r["stock"]["device"] == STOCK_NAME
    assert r["differences"] == [{"answer": "device", "stock": STOCK_NAME, "shimmed": "Apple M1 Ultra"}]


def test_off_by_default():
    for name in profiles.builtin_names():
        assert profiles.load(name).device_name == ""
    env = metal.shim_env(profiles.load("metal-apple9"), metal.NATIVE_DIR / "x.so", None, inherit=False,
                         quiet=True)
    assert VAR not in env
