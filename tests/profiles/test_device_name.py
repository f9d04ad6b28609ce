"""Device identity as an answer (issue 21, item 5): ``deviceName`` in a profile's
``[capabilities]``, off by default, checked for length and encoding, carried to the layer
percent-encoded and answered in VkPhysicalDeviceProperties::deviceName."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from capshim import profiles
from capshim.profiles import checks
from capshim.backends import vulkan
from capshim.native.build import run_compiler
from tests.conftest import run_capshim

TOOLS = Path(__file__).resolve().parents[1] / "native" / "vk_tools.c"
HEAD = 'name="named"\napi="vulkan"\ndirection="{d}"\nversion=1\ndescription="d"\n[capabilities]\n'


def _text(name_toml: str, direction: str = "raise") -> str:
    return HEAD.format(d=direction) + f"deviceName = {name_toml}\n"


# ---- fast ---------------------------------------------------------------------------

def test_a_profile_may_set_the_device_name_and_check_says_why():
    p = profiles.parse(_text('"Apple M1 Ultra"'), "n.toml")
    assert p.device_name == "Apple M1 Ultra"
    assert p.to_dict()["capabilities"] == {"deviceName": "Apple M1 Ultra"}
    (line,) = profiles.describe(p)
    assert line.startswith('deviceName: "Apple M1 Ultra" instead of the device\'s own name')
    assert "key tuning tables" in line


def test_the_devices_own_name_is_a_no_op_warning():
    # No silent no-ops (docs/profiles.md): a name equal to the one below changes nothing.
    p = profiles.parse(_text('"llvmpipe"'), "n.toml")
    device = {"device": {"name": "llvmpipe", "apiVersion": "1.3.230"}, "capabilities": {}, "extensions": {}}
    (f,) = checks.no_effect(p, device)
    assert (f.key, f.noop) == ("deviceName", "same") and "no effect" in f.message
    assert checks.no_effect(p, {**device, "device": {"name": "other"}}) == []
    # Over --simulate, the app role sees the simulated name.
    assert checks.answers_after(p, {**device, "device": {"name": "x"}})["device"]["name"] == "llvmpipe"


def test_the_built_in_profiles_leave_the_name_alone():
    for name in profiles.builtin_names():
        assert profiles.load(name).device_name == ""


@pytest.mark.parametrize("value, words", [
    ('"' + "a" * 256 + '"', "256 bytes in UTF-8: longer than 255"),
    ('"' + "\u00e9" * 128 + '"', "256 bytes in UTF-8: longer than 255"),
    ('""', "expected a device name"),
    ('"a\\u0085b"', "expected a device name"),
    ('"tab\\there"', "expected a device name"),
    ("7", "expected a device name"),
])
def test_a_bad_name_is_refused_naming_the_key(value, words):
    with pytest.raises(profiles.ProfileError) as exc:
        profiles.parse(_text(value), "n.toml")
    assert exc.value.key == "capabilities.deviceName" and words in exc.value.reason


def test_255_bytes_are_accepted():
    assert len(profiles.parse(_text('"' + "\u00e9" * 127 + 'x"'), "n.toml").device_name.encode()) == 255


def test_a_name_not_in_utf8_is_refused_naming_the_key(tmp_path):
    f = tmp_path / "latin1.toml"
    f.write_bytes(_text('"caf\xe9"').encode("latin-1"))
    with pytest.raises(profiles.ProfileError) as exc:
        profiles.load(str(f))
    assert exc.value.key == "capabilities.deviceName"
    assert "not UTF-8: byte 0xe9 on line 7" in exc.value.reason


def test_metal_profiles_take_it_by_the_same_rule():
    """Metal answers it too (MTLDevice.name, issue 21 item 5), under the same key and rules."""
    head = 'name="m"\napi="metal"\ndirection="raise"\nversion=1\ndescription="d"\n[capabilities]\n'
    assert profiles.parse(head + 'deviceName="Apple M1 Ultra"\n', "m.toml").device_name == "Apple M1 Ultra"
    with pytest.raises(profiles.ProfileError) as exc:
        profiles.parse(head + 'deviceName="' + "x" * 300 + '"\n', "m.toml")
    assert exc.value.key == "capabilities.deviceName" and "300 bytes in UTF-8: longer than 255" in exc.value.reason


def test_the_configuration_carries_it_percent_encoded():
    p = profiles.parse(_text('"GPU 1 ~ \u00e9%+\\n"'.replace("\\n", "")), "n.toml")
    assert "\ndeviceName=GPU%201%20~%20%C3%A9%25%2B\n" in vulkan.render_config(p)
    assert "deviceName" not in vulkan.render_config(profiles.parse(HEAD.format(d="lower"), "x.toml"))


# ---- slow: the C parser and the layer -------------------------------------------------

@pytest.mark.slow
def test_the_layer_parser_reads_back_the_same_bytes(vk_build, tmp_path):
    name = "Radeon\u2122 RX 7900 XTX ~ 100% \u00e9"
    cfg = tmp_path / "c.cfg"
    cfg.write_text(vulkan.render_config(profiles.parse(_text(json.dumps(name)), "n.toml")), encoding="utf-8")
    out = subprocess.run([str(vk_build.fuzz_driver), "--values", str(cfg)], capture_output=True, timeout=60)
    assert out.returncode == 0 and b"runtime error" not in out.stderr
    assert out.stdout.rstrip(b"\n").endswith(b" deviceName=" + name.encode())


@pytest.mark.slow
def test_cli_refuses_a_long_name_with_exit_2(tmp_path):
    f = tmp_path / "long.toml"
    f.write_text(_text('"' + "x" * 300 + '"'))
    r = run_capshim("profile", "check", str(f), timeout=120)
    assert r.returncode == 2 and "key 'capabilities.deviceName'" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--profile", "--simulate"])
def test_the_application_sees_the_name(vk_build, tmp_path, flag):
    prog = tmp_path / "vk_tools"
    run_compiler(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", str(TOOLS), "-lvulkan", "-o", str(prog)])
    f = tmp_path / "named.toml"
    f.write_text(_text('"NVIDIA H200 \u00e9"', "raise" if flag == "--profile" else "lower"), encoding="utf-8")
    st = tmp_path / "s" / "status.jsonl"
    r = run_capshim("run", "--quiet", "--status-file", str(st), flag, str(f), "--", str(prog), timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["device_name"] == "NVIDIA H200 \u00e9"
    changed = [json.loads(ln) for ln in st.read_text().splitlines() if '"deviceName"' in ln]
    # Status strings carry each byte >= 0x80 as \u00XX (status.h): latin-1 gives the bytes back.
    assert changed and changed[0]["reported"].encode("latin-1").decode() == "NVIDIA H200 \u00e9"
    assert changed[0]["stock"] != changed[0]["reported"]
