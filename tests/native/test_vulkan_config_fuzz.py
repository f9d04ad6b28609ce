"""The layer's configuration parser, in isolation, under AddressSanitizer and UBSan.

The standalone fuzz driver (native/common/fuzz_config.c, built with
-fsanitize=address,undefined) parses each file it is given; it aborts when a
parse result breaks the parser's contract. Here it runs over hand-picked
edge cases and a few thousand seeded random mutations of a valid file.
"""

from __future__ import annotations

import random
import subprocess

import pytest

pytestmark = pytest.mark.slow  # every test here runs a real component (tests/test_tiers.py)

VALID = b"# capshim\ndirection=lower\nmaxComputeSharedMemorySize=16384\nshaderFloat16=0\n" \
        b"subgroupSupportedOperations=0xff\napiVersion=4206592\nextension.VK_KHR_cooperative_matrix=0\n" \
        b"profile=p-1\ndeviceName=GPU%20%C3%A9%25\n"

EDGE = {
    "valid": (VALID, "ok (4 values, 1 extensions)"),
    "empty": (b"", "invalid: key 'direction' is missing"),
    "nul": (b"direction=lower\x00\nshaderFloat16=0\n", "invalid: line 1: byte 0x00"),
    "long_line": (b"direction=lower\n" + b"#" + b"a" * 5000 + b"\n", "invalid: line 2: line longer"),
    "overflow": (b"direction=raise\nmaxComputeSharedMemorySize=18446744073709551616\n", "not a whole number"),
    "u64_max": (b"direction=raise\nmaxComputeSharedMemorySize=18446744073709551615\n", "does not fit in 32 bits"),
    "hex_ok": (b"direction=raise\nmaxComputeSharedMemorySize=0x4F01\n", "ok (1 values, 0 extensions)"),
    "spec_min_ok": (b"direction=lower\nmaxComputeWorkGroupInvocations=128\n", "ok (1 values, 0 extensions)"),
    "below_spec_min": (b"direction=lower\nmaxComputeWorkGroupInvocations=127\n",
                       "127 is below the Vulkan spec's required minimum 128"),
    "below_spec_min_shared": (b"direction=lower\nmaxComputeSharedMemorySize=0x3FFF\n",
                              "16383 is below the Vulkan spec's required minimum 16384"),
    "version_zero": (b"direction=lower\napiVersion=0\n", "is version 0"),
    "version_variant": (b"direction=lower\napiVersion=0x20000000\n", "a version with a variant other than 0"),
    "bare_0x": (b"direction=raise\nmaxComputeSharedMemorySize=0x\n", "not a whole number"),
    "plus": (b"direction=raise\nmaxComputeSharedMemorySize=+5\n", "not a whole number"),
    "trailing": (b"direction=raise\nmaxComputeSharedMemorySize=1009x\n", "not a whole number"),
    "no_newline_end": (b"direction=raise\nshaderFloat16=1", "ok (1 values, 0 extensions)"),
    "many_exts": (b"direction=lower\n" + b"".join(b"extension.VK_E%d=0\n" % i for i in range(65)),
                  "more than 64 extensions"),
    "ext_too_long": (b"direction=lower\nextension.VK_" + b"A" * 300 + b"=0\n", "is not an extension name"),
    "big": (b"direction=lower\n" + b"#\n" * 40000, "larger than"),
    "utf8_comment": ("# café\ndirection=lower\n".encode(), "ok (0 values, 0 extensions)"),
    "devices": (b"direction=lower\ndevices=0,uuid:6d65736132322e332e36000000000000\nshaderFloat16=0\n",
                "ok (1 values, 0 extensions)"),
    "devices_bad": (b"direction=lower\ndevices=0,uuid:6d65\n", "is not a device index 0..63"),
    "utf8_key": ("direction=lower\ncafé=1\n".encode(), "only printable ASCII"),
    "comment_control": (b"# a\x1b[31m\ndirection=lower\n", "invalid: line 1: byte 0x1b"),
    # profile= and deviceName= (issue 21: tooling info names the profile; device identity)
    "profile_ok": (b"direction=lower\nprofile=vulkan-paravirt\n", "ok (0 values, 0 extensions)"),
    "profile_twice": (b"direction=lower\nprofile=a\nprofile=b\n", "key 'profile' given twice"),
    "profile_bad": (b"direction=lower\nprofile=a/b\n", "key 'profile': 'a/b' is not"),
    "profile_long": (b"direction=lower\nprofile=" + b"a" * 65 + b"\n", "key 'profile'"),
    "name_ok": (b"direction=raise\ndeviceName=Apple%20M1%20Ultra\n", "ok (0 values, 0 extensions)"),
    "name_255": (b"direction=raise\ndeviceName=" + b"%41" * 255 + b"\n", "ok (0 values, 0 extensions)"),
    "name_256": (b"direction=raise\ndeviceName=" + b"%41" * 256 + b"\n", "longer than 255 bytes"),
    "name_empty": (b"direction=raise\ndeviceName=\n", "key 'deviceName': empty"),
    "name_bad_escape": (b"direction=raise\ndeviceName=a%4\n", "not followed by two hex digits"),
    "name_raw_byte": (b"direction=raise\ndeviceName=a+b\n", "must be percent-encoded"),
    "name_not_utf8": (b"direction=raise\ndeviceName=%FF\n", "not UTF-8 without control characters"),
    "name_overlong": (b"direction=raise\ndeviceName=%C0%AF\n", "not UTF-8"),
    "name_surrogate": (b"direction=raise\ndeviceName=%ED%A0%80\n", "not UTF-8"),
    "name_nul": (b"direction=raise\ndeviceName=a%00b\n", "not UTF-8"),
    "name_c1": (b"direction=raise\ndeviceName=%C2%85\n", "not UTF-8"),
    "name_twice": (b"direction=raise\ndeviceName=a\ndeviceName=b\n", "key 'deviceName' given twice"),
}


def _run(driver, paths):
    proc = subprocess.run([str(driver), *map(str, paths)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "runtime error" not in proc.stderr and "AddressSanitizer" not in proc.stderr, proc.stderr[-3000:]
    return proc.stdout.splitlines()


def test_edge_cases(vk_build, tmp_path):
    paths = []
    for name, (data, _) in EDGE.items():
        p = tmp_path / name
        p.write_bytes(data)
        paths.append(p)
    lines = _run(vk_build.fuzz_driver, paths)
    assert len(lines) == len(EDGE)
    for (name, (_, want)), line in zip(EDGE.items(), lines):
        assert line.startswith(f"{tmp_path / name}: "), line
        assert want in line, (name, line)


def test_device_name_is_decoded_and_profile_kept(vk_build, tmp_path):
    p = tmp_path / "valid"
    p.write_bytes(VALID)
    (line,) = _run(vk_build.fuzz_driver, ["--values", p])
    assert line.endswith(" profile=p-1 deviceName=GPU \u00e9%"), line


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(5)
        pos = rng.randrange(len(b) + 1)
        if op == 0 and b:
            b[min(pos, len(b) - 1)] = rng.randrange(256)
        elif op == 1:
            b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        elif op == 2 and b:
            del b[pos:pos + rng.randint(1, 16)]
        elif op == 3:
            b[pos:pos] = rng.choice([b"=", b"\n", b"0x", b"extension.", b"direction=raise\n", b"9" * 25, b"\r"])
        else:
            b = b[: rng.randrange(len(b) + 1)]
    return bytes(b)


def test_seeded_random_mutations_never_break_the_contract(vk_build, tmp_path):
    rng = random.Random(20261130)
    paths = []
    for i in range(3000):
        p = tmp_path / f"m{i}"
        p.write_bytes(_mutate(rng, VALID))
        paths.append(p)
    results = []
    for chunk in range(0, len(paths), 500):
        results += _run(vk_build.fuzz_driver, paths[chunk:chunk + 500])
    assert len(results) == len(paths)
    verdicts = {"ok" if ": ok (" in r else "invalid" if ": invalid: " in r else "?" for r in results}
    assert verdicts == {"ok", "invalid"}
