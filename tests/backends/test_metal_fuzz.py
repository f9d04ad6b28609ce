"""The configuration parser alone (metal_config.c, no Objective-C), through the
standalone fuzz driver built with ASan+UBSan, over a corpus of nasty inputs.
The driver aborts on any broken invariant (round trip, JSON escaping, ranges).
"""

import os
import subprocess

import pytest

CASES = {
    # name: (input bytes, expected "u64:" line, expected "config:" prefix)
    "empty": (b"", "u64: error is empty", "config: rejected no configuration"),
    "plain": (b"1009", "u64: ok 1009", None),
    "hex": (b"0x3F1", "u64: ok 1009", None),
    "octal": (b"01761", "u64: ok 1009", None),
    "trailing": (b"1009x", "u64: error is not a whole number", None),
    "minus": (b"-1", "u64: error starts with a sign or white space", None),
    "plus": (b"+1", "u64: error starts with a sign or white space", None),
    "space": (b" 1", "u64: error starts with a sign or white space", None),
    "tab": (b"\t1", "u64: error starts with a sign or white space", None),
    "newline_after": (b"1\n", "u64: error is not a whole number", None),
    "hex_only_prefix": (b"0x", "u64: error is not a whole number", None),
    "max": (b"18446744073709551615", "u64: ok 18446744073709551615", None),
    "overflow": (b"18446744073709551616", "u64: error is out of range (overflow)", None),
    "hex_overflow": (b"0x10000000000000000", "u64: error is out of range (overflow)", None),
    "huge": (b"9" * 5000, "u64: error is out of range (overflow)", None),
    "exponent": (b"1e3", "u64: error is not a whole number", None),
    "binary": (b"0b101", "u64: error is not a whole number", None),
    "fullwidth": ("１００９".encode(), "u64: error is not a whole number", None),
    "high_bytes": (b"\xff\xfe\x80", "u64: error is not a whole number", None),
    "embedded_nul": (b"10\x0009", "u64: ok 10", None),
    "lume_ok": (b"LUME_METAL_APPLE_FAMILY_MAX=1009", None,
                'config: accepted {"form":"lume","appleFamilyMax":1009,"maxThreadgroupMemoryLength":65536}'),
    "lume_bad": (b"LUME_METAL_APPLE_FAMILY_MAX=1009x", None,
                 "config: rejected LUME_METAL_APPLE_FAMILY_MAX: '1009x' is not a whole number"),
    "lume_low": (b"LUME_METAL_APPLE_FAMILY_MAX=999", None,
                 "config: rejected LUME_METAL_APPLE_FAMILY_MAX: '999' is not an Apple GPU family"),
    "lume_high": (b"LUME_METAL_APPLE_FAMILY_MAX=2000", None,
                  "config: rejected LUME_METAL_APPLE_FAMILY_MAX: '2000' is not an Apple GPU family"),
    "lume_empty": (b"LUME_METAL_APPLE_FAMILY_MAX=", None,
                   "config: rejected LUME_METAL_APPLE_FAMILY_MAX: '' is empty"),
    "lume_missing_family": (b"LUME_METAL_MAX_THREADGROUP_MEMORY=65536", None,
                            "config: rejected LUME_METAL_APPLE_FAMILY_MAX is required"),
    "json_breakout": (b'LUME_METAL_APPLE_FAMILY_MAX=1"}\\\x01\x7f', None,
                      "config: rejected LUME_METAL_APPLE_FAMILY_MAX: '1\\\"}\\\\??' is not a whole number"),
    "long_value": (b"LUME_METAL_APPLE_FAMILY_MAX=" + b"A" * 3000, None,
                   "config: rejected LUME_METAL_APPLE_FAMILY_MAX: 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA...'"),
    "forced_list": (b"CAPSHIM_METAL_FORCE_FAMILIES=5001,3004,2002", None,
                    'config: accepted {"form":"capshim","forceFamilies":[5001,3004,2002]}'),
    "forced_empty_item": (b"CAPSHIM_METAL_FORCE_FAMILIES=5001,,3004", None,
                          "config: rejected CAPSHIM_METAL_FORCE_FAMILIES"),
    "forced_apple": (b"CAPSHIM_METAL_FORCE_FAMILIES=1009", None,
                     "config: rejected CAPSHIM_METAL_FORCE_FAMILIES: '1009' names a family outside"),
    "forced_too_many": (b"CAPSHIM_METAL_FORCE_FAMILIES=" + b",".join([b"5001"] * 17), None,
                        "config: rejected CAPSHIM_METAL_FORCE_FAMILIES"),
    "capshim_ws": (b"CAPSHIM_METAL_RECOMMENDED_WORKING_SET_SIZE=0xFFFFFFFFFFFFFFFF", None,
                   'config: accepted {"form":"capshim","recommendedMaxWorkingSetSize":18446744073709551615}'),
    "both_forms": (b"CAPSHIM_METAL_APPLE_FAMILY_MAX=1007\nLUME_METAL_APPLE_FAMILY_MAX=oops", None,
                   'config: accepted {"form":"capshim","appleFamilyMax":1007,"ignored"'),
}


@pytest.fixture(scope="module")
def fuzz_results(metal_arts, tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    for name, (data, _, _) in CASES.items():
        (d / name).write_bytes(data)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASAN_", "UBSAN_", "LD_PRELOAD"))}
    env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    r = subprocess.run([str(metal_arts["fuzz"]), *[str(d / n) for n in CASES]], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "runtime error" not in r.stderr and "Sanitizer" not in r.stderr, r.stderr
    out, current = {}, None
    for line in r.stdout.splitlines():
        if line.startswith("== "):
            current = os.path.basename(line[3:])
            out[current] = []
        else:
            out[current].append(line)
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_case(fuzz_results, name):
    _, u64, config = CASES[name]
    lines = fuzz_results[name]
    if u64 is not None:
        assert lines[0] == u64
    if config is not None:
        assert lines[1].startswith(config), lines[1]
