"""One profile language: `profile check` accepts exactly what the layer then takes as written.

Every case is a profile. The Python verdict is :func:`capshim.profiles.parse`.
The C verdict is the layer's configuration parser (through the fuzz driver,
``--values``) on the configuration the backend writes for the profile taken
literally, without validation: it must accept, and read back exactly the
values the profile states. A value the C side would change (a version string
whose fields wrap when packed) counts as a rejection there.

The cases are about what reaches the configuration (names, keys, numbers,
extension names and counts, the profile's version in the header comment);
direction rules and exact keys are semantics, tested in
tests/profiles/test_semantics.py.
"""

from __future__ import annotations

import subprocess
import tomllib

import pytest

from capshim import profiles
from capshim.backends.vulkan import render_config
from capshim.profiles.catalog import FLAG_NAMES, LIMITS, VULKAN_KEYS

NAME_MAX = LIMITS["extension_name_max"]
EXT_MAX = LIMITS["extensions_max"]


def prof(body="", direction="lower", name='"t"', version="1"):
    return (f'name = {name}\napi = "vulkan"\ndirection = "{direction}"\nversion = {version}\n'
            f'description = "corpus"\n{body}')


def exts(n, length=20):
    names = [f"VK_X_{i:03d}".ljust(length, "A") for i in range(n)]
    return "[extensions]\n" + "".join(f"{e} = false\n" for e in names)


CORPUS = {
    # valid
    "plain": prof("[capabilities]\nmaxComputeSharedMemorySize = 24576\nshaderFloat16 = false\n"),
    "u32_max": prof("[capabilities]\nmaxComputeSharedMemorySize = 4294967295\n"),
    "flags_list": prof('[capabilities]\nsubgroupSupportedOperations = ["basic", "vote"]\n'),
    "version_top": prof('[capabilities]\napiVersion = "127.1023.4095"\n'),
    "version_int": prof("[capabilities]\napiVersion = 4206592\n"),
    "profile_version_max": prof(version="4294967295"),
    "ext_name_max": prof(exts(1, NAME_MAX)),
    "ext_count_max": prof(exts(EXT_MAX)),
    "ext_spec_max": prof("[extensions]\nVK_KHR_x = 4294967295\n", direction="raise"),
    "spec_min_exact": prof("[capabilities]\nmaxComputeSharedMemorySize = 16384\n"
                           "maxComputeWorkGroupInvocations = 128\n"),
    "version_lowest": prof("[capabilities]\napiVersion = 1\n"),
    # invalid
    "u32_over": prof("[capabilities]\nmaxComputeSharedMemorySize = 4294967296\n"),
    "bool_as_int": prof("[capabilities]\nshaderFloat16 = 2\n"),
    "number_as_text": prof('[capabilities]\nmaxComputeSharedMemorySize = "1009x"\n'),
    "unknown_key": prof("[capabilities]\nnotACapability = 1\n"),
    "key_newline": prof('[capabilities]\n"shaderFloat16\\n" = false\n'),
    "key_escape": prof('[capabilities]\n"shaderFloat16\\u001b[31m" = false\n'),
    "name_newline": prof(name='"t\\n"'),
    "name_control": prof(name='"t\\u0007"'),
    "version_450_digits": prof(version="9" * 450),
    "version_minor_wraps": prof('[capabilities]\napiVersion = "1.2000.5000"\n'),
    "version_major_wraps": prof('[capabilities]\napiVersion = "128.0.0"\n'),
    "ext_name_over": prof(exts(1, NAME_MAX + 1)),
    "ext_count_over": prof(exts(EXT_MAX + 1)),
    "ext_newline": prof('[extensions]\n"VK_KHR_x\\n" = false\n'),
    "ext_bare_prefix": prof("[extensions]\nVK_ = false\n"),
    "ext_lowercase": prof("[extensions]\nvk_khr_x = false\n"),
    "ext_spec_over": prof("[extensions]\nVK_KHR_x = 4294967296\n", direction="raise"),
    "direction_unknown": prof(direction="sideways"),
    # issue 18: floats with no fraction (profile check passed 24576.0; the layer refuses it)
    "u32_float": prof("[capabilities]\nmaxComputeSharedMemorySize = 24576.0\n"),
    "version_float": prof("[capabilities]\napiVersion = 4206592.0\n"),
    "flags_float": prof("[capabilities]\nsubgroupSupportedOperations = 255.0\n"),
    "ext_spec_float": prof("[extensions]\nVK_KHR_x = 2.0\n", direction="raise"),
    "bool_as_float": prof("[capabilities]\nshaderFloat16 = 0.0\n"),
    # below the Vulkan spec's Required Limits, and versions no device reports
    "below_spec_min_invocations": prof("[capabilities]\nmaxComputeWorkGroupInvocations = 1\n"),
    "below_spec_min_shared": prof("[capabilities]\nmaxComputeSharedMemorySize = 16383\n"),
    "version_zero": prof("[capabilities]\napiVersion = 0\n"),
    "version_zero_text": prof('[capabilities]\napiVersion = "0.0.0"\n'),
    "version_variant": prof("[capabilities]\napiVersion = 4294967295\n"),
    "version_variant_1": prof("[capabilities]\napiVersion = 541065216\n"),
}


def _pack(text):
    parts = [int(p) for p in text.split(".")] + [0]
    return (parts[0] << 22) + (parts[1] << 12) + parts[2]  # no masking: what a naive writer does


def _literal(value, key):
    """The value a literal translation writes, and the value the C side must read back."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, list):
        bits = FLAG_NAMES.get(key, {})
        return sum(bits.get(v, 0) for v in value) if all(v in bits for v in value) else ",".join(value)
    if isinstance(value, str) and VULKAN_KEYS.get(key) == "version" and value.replace(".", "").isdigit():
        return _pack(value)
    return value


def _literal_profile(text):
    data = tomllib.loads(text)
    caps = {k: _literal(v, k) for k, v in data.get("capabilities", {}).items()}
    ext = {k: 0 if v is False else 1 if v is True else v for k, v in data.get("extensions", {}).items()}
    p = profiles.Profile(name=data["name"], api="vulkan", direction=data["direction"], version=data["version"],
                         description=data["description"], capabilities=caps, extensions=ext, text=text)
    stated = {}
    for k, v in data.get("capabilities", {}).items():
        stated[k] = v if isinstance(v, str) and "." in v else caps[k]
    stated.update({f"extension.{k}": v for k, v in ext.items()})
    return p, stated


def _c_reads_as_stated(line, stated):
    if ": ok (" not in line:
        return False
    values = dict(item.split("=", 1) for item in line.split(") ", 1)[1].split()) if ") " in line else {}
    values.pop("profile", None)  # the profile's name, for the tooling-info description (not a value)
    if set(values) != set(stated):
        return False
    for key, want in stated.items():
        got = int(values[key])
        if isinstance(want, str):  # a version string: the packed fields must read back as written
            fields = [int(p) for p in want.split(".")] + [0]
            if [(got >> 22) & 0x7F, (got >> 12) & 0x3FF, got & 0xFFF] != fields[:3]:
                return False
        elif got != want:
            return False
    return True


def _python_accepts(text):
    try:
        profiles.parse(text, "corpus.toml")
    except profiles.ProfileError:
        return False
    return True


def test_the_corpus_has_both_verdicts():
    verdicts = {_python_accepts(t) for t in CORPUS.values()}
    assert verdicts == {True, False}


# The profile's own version reaches the layer only in a comment line of its configuration, so
# the C parser has no verdict on it (it agreed on this case only while that comment line was
# over the 400-byte line limit; deviceName raised the limit to 800). Python alone judges it
# (test_errors_name_the_key below).
PYTHON_ONLY = {"version_450_digits"}


@pytest.mark.slow
def test_python_schema_and_c_parser_give_the_same_verdict(vk_build, tmp_path):
    paths, stated = [], []
    cases = {n: t for n, t in CORPUS.items() if n not in PYTHON_ONLY}
    for name, text in cases.items():
        p, s = _literal_profile(text)
        path = tmp_path / name
        path.write_bytes(render_config(p).encode("utf-8", "surrogateescape"))
        paths.append(path)
        stated.append(s)
    proc = subprocess.run([str(vk_build.fuzz_driver), "--values", *map(str, paths)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "runtime error" not in proc.stderr, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == len(cases)
    disagree = []
    for (name, text), line, s in zip(cases.items(), lines, stated):
        py, c = _python_accepts(text), _c_reads_as_stated(line, s)
        if py != c:
            disagree.append((name, py, c, line[:200]))
    assert disagree == []


@pytest.mark.parametrize("name", [n for n in CORPUS if any(w in n for w in ("escape", "control", "newline"))])
def test_messages_escape_control_characters(name):
    with pytest.raises(profiles.ProfileError) as exc:
        profiles.parse(CORPUS[name], "corpus.toml")
    message = str(exc.value)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in message), message


def test_a_huge_integer_is_an_error_not_a_traceback():
    with pytest.raises(profiles.ProfileError, match="not valid TOML"):
        profiles.parse(prof(version="9" * 5000), "corpus.toml")


@pytest.mark.parametrize("name, key, words", [
    ("ext_count_over", "extensions", f"more than {EXT_MAX} extensions"),
    ("ext_name_over", None, f"longer than {NAME_MAX} characters"),
    ("version_450_digits", "version", "expected a whole number 1..4294967295"),
    ("version_minor_wraps", "capabilities.apiVersion", "minor 2000 does not fit VK_MAKE_API_VERSION (0..1023)"),
    ("version_major_wraps", "capabilities.apiVersion", "major 128 does not fit"),
    ("ext_spec_over", "extensions.VK_KHR_x", "spec version 1..4294967295"),
    ("below_spec_min_invocations", "capabilities.maxComputeWorkGroupInvocations",
     "below the Vulkan spec's required minimum 128"),
    ("below_spec_min_shared", "capabilities.maxComputeSharedMemorySize",
     "below the Vulkan spec's required minimum 16384"),
    ("version_zero", "capabilities.apiVersion", "version 0 is no Vulkan version"),
    ("version_variant", "capabilities.apiVersion", "variant 7 in bits 29..31"),
])
def test_rejections_name_the_limit(name, key, words):
    with pytest.raises(profiles.ProfileError) as exc:
        profiles.parse(CORPUS[name], "corpus.toml")
    assert key is None or exc.value.key == key
    assert words in exc.value.reason and len(str(exc.value)) < 400
