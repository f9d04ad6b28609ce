"""What `profile check` accepts, the layer accepts (issue 18, deliverable 4): a property test.

hypothesis generates Vulkan profiles from the capability table (its keys,
kinds, value types, spec minimums, the subgroup rules, flag names, version
fields, the extensions that guard its structures):

* valid ones: `profile check` (:func:`capshim.profiles.parse`) accepts them;
  the layer's configuration parser (the fuzz driver, ``--values``) reads back
  exactly the values of the profile; and the real layer, on this machine's
  driver (lavapipe in CI), loaded through the probe, is active and answers
  exactly what `profile check` printed for each key and extension (its
  lines are parsed here: "at least V" is max(device, V), and so on), every
  other answer staying the device's;
* invalid ones, a valid profile with one fault of a known kind at a known
  key: `profile check` exits 2 naming that key.

Derandomized and bounded (80 accepted profiles, each probed through the
layer in about 0.1 s; 300 refused ones), so it runs in well under a minute
on a loaded 2-core machine (about 15 s unloaded). Disagreements it found:
``24576.0`` and other integral floats passed `profile check` and the layer
refused them (the Python side changed: the schema's integers are the
layer's); `profile check` said an added extension is "listed with spec
version N" while the layer keeps the device's own spec version of an
extension it lists (the Python side changed: the description, a warning
against the device, and ``beyond_device`` no longer counts it).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

import pytest
import tomli_w
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capshim import profiles
from capshim.backends import vulkan
from capshim.cli import main
from capshim.contracts import tomlread
from capshim.profiles.catalog import FLAG_NAMES, LIMITS, ORDERED, POWER_OF_TWO
from capshim.profiles.table import load as load_table

SETTINGS = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large, HealthCheck.filter_too_much])
"""Accepted profiles: about 0.1 s each (a probe through the layer and one fuzz-driver run)."""
REFUSED = settings(SETTINGS, max_examples=300)
"""Refused profiles: a few ms each (parse and `profile check` in-process)."""

U32 = 0xFFFFFFFF
TABLE = load_table()
VK = {k.key: k for k in TABLE.keys["vulkan"]}
BOOLS = [k for k, e in VK.items() if e.type == "bool"]
NUMBERS = [k for k, e in VK.items() if e.type != "bool"]
U32_KEYS = [k for k, e in VK.items() if e.type == "u32"]
SUBGROUP = sorted((set(POWER_OF_TWO) | {k for seq in ORDERED for k in seq}) & set(VK))  # ORDERED holds CUDA rules too
GUARDS = sorted({s.extension for s in TABLE.structs.values() if s.extension})
LONGEST = "VK_" + "A" * (LIMITS["extension_name_max"] - 3)
EXTENSIONS = GUARDS + ["VK_KHR_maintenance4", "VK_CAPSHIM_hypothesis_a", LONGEST]
MOST = [f"VK_CAPSHIM_e{i}" for i in range(LIMITS["extensions_max"])]


# ---------- valid profiles ----------

def _u32(entry):
    if entry.key in POWER_OF_TWO:
        return st.integers(0, 31).map(lambda n: 1 << n)
    lo = entry.spec_min or 0
    typical = [v for v in (lo, lo + 1, 8, 1024, 16384, 32768, 65536, U32) if v >= lo]
    return st.one_of(st.sampled_from(typical), st.integers(lo, U32))


def _version():
    fields = st.tuples(st.integers(0, 127), st.integers(0, 1023), st.integers(0, 4095)).map(
        lambda f: f if any(f) else (0, 0, 1))  # 0.0.0 is no version (refused)
    return st.one_of(
        st.sampled_from(["1.0", "1.1.0", "1.2", "1.3.230", "1.3.999", "1.4.0", "127.1023.4095"]),
        fields.map(lambda f: "%d.%d.%d" % f),
        st.integers(1, (1 << 29) - 1))


def _flags(key):
    names = sorted(FLAG_NAMES[key])
    return st.one_of(st.integers(0, U32), st.sampled_from([0, 0xFF, U32]),
                     st.lists(st.sampled_from(names), unique=True, max_size=len(names)))


def _value(key, direction):
    entry = VK[key]
    if entry.type == "bool":
        return st.just(direction == "raise")
    if entry.type == "flags":
        return _flags(key)
    if entry.type == "version":
        return _version()
    return _u32(entry)


@st.composite
def valid_docs(draw):
    """A profile (as the TOML document's dict) that obeys every rule of docs/capabilities.md."""
    direction = draw(st.sampled_from(["raise", "lower"]))
    keys = draw(st.lists(st.sampled_from(NUMBERS), unique=True, max_size=5))
    keys += draw(st.lists(st.sampled_from(SUBGROUP), unique=True, max_size=2))
    keys += draw(st.lists(st.sampled_from(BOOLS), unique=True, max_size=3))
    caps = {k: draw(_value(k, direction)) for k in dict.fromkeys(keys)}
    for seq in ORDERED:  # minSubgroupSize <= subgroupSize <= maxSubgroupSize among the keys set
        present = [k for k in seq if k in caps]
        for k, v in zip(present, sorted(caps[k] for k in present)):
            caps[k] = v
    doc = {"name": draw(st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True)), "api": "vulkan",
           "direction": direction, "version": draw(st.sampled_from([1, U32]) | st.integers(1, U32)),
           "description": "hypothesis"}
    exact = [k for k in caps if VK[k].kind == "exact"]
    if exact:
        doc["override_exact"] = exact
    if caps:
        doc["capabilities"] = caps
    names = draw(st.lists(st.sampled_from(EXTENSIONS), unique=True, max_size=3) | st.just(MOST))
    spec = st.just(False) if direction == "lower" else st.one_of(st.just(True), st.integers(1, U32))
    if names:
        doc["extensions"] = {n: draw(spec) for n in names}
    return doc


# ---------- one fault each, at a known key ----------

def _set(doc, key, value):
    doc.setdefault("capabilities", {})[key] = value
    return f"capabilities.{key}"


def _ext(doc, name, value):
    exts = doc.setdefault("extensions", {})
    if name not in exts and len(exts) >= LIMITS["extensions_max"]:  # one fault only: stay within the count
        exts.pop(next(iter(exts)))
    exts[name] = value
    return tomlread.dotted(["extensions", name])


def _drop(doc, *keys):
    for key in keys:
        doc.get("capabilities", {}).pop(key, None)
    if "override_exact" in doc:
        doc["override_exact"] = [k for k in doc["override_exact"] if k in doc.get("capabilities", {})]
        if not doc["override_exact"]:
            del doc["override_exact"]


def _plain_u32(draw):
    """A u32 key outside the subgroup rules (so one fault stays one fault)."""
    return draw(st.sampled_from([k for k in U32_KEYS if k not in SUBGROUP]))


def fault_float(doc, draw):  # issue 18: 24576.0 (the layer refuses it), 8.0 for subgroupSize (a traceback)
    key = draw(st.sampled_from(NUMBERS))
    _drop(doc, *SUBGROUP)
    if VK[key].kind == "exact":
        doc["override_exact"] = [key]
    whole = {"flags": st.integers(0, U32), "version": st.integers(1, (1 << 29) - 1)}
    return _set(doc, key, float(draw(whole[VK[key].type] if VK[key].type in whole else _u32(VK[key]))))


def fault_bool_direction(doc, draw):
    return _set(doc, draw(st.sampled_from(BOOLS)), doc["direction"] == "lower")


def fault_bool_as_number(doc, draw):
    return _set(doc, draw(st.sampled_from(BOOLS)), draw(st.sampled_from([0, 1, 0.0])))


def fault_below_spec_min(doc, draw):
    key = draw(st.sampled_from([k for k, e in VK.items() if e.spec_min]))
    return _set(doc, key, draw(st.integers(0, VK[key].spec_min - 1)))


def fault_over_u32(doc, draw):
    key = _plain_u32(draw)
    return _set(doc, key, draw(st.sampled_from([U32 + 1, 1 << 64, 10 ** 30])))


def fault_negative(doc, draw):
    return _set(doc, draw(st.sampled_from([k for k in NUMBERS if k not in SUBGROUP])), -1)


def fault_number_as_text(doc, draw):
    key = _plain_u32(draw)
    return _set(doc, key, draw(st.sampled_from(["65536", "1009x", "0x4000", ""])))


def fault_version(doc, draw):
    bad = st.sampled_from(["128.0.0", "1.1024.0", "1.0.4096", "0.0.0", "1", "1.2.3.4", "v1.3", 0, 1 << 29, U32])
    return _set(doc, "apiVersion", draw(bad))


def fault_flag_name(doc, draw):
    key = draw(st.sampled_from(sorted(FLAG_NAMES)))
    return _set(doc, key, [sorted(FLAG_NAMES[key])[0], draw(st.sampled_from(["nonsense", "BASIC", ""]))])


def fault_long_array(doc, draw):
    key = draw(st.sampled_from(sorted(FLAG_NAMES)))
    return _set(doc, key, sorted(FLAG_NAMES[key]) * 20)


def fault_misspelt(doc, draw):
    key = draw(st.sampled_from(list(VK)))
    wrong = draw(st.sampled_from([key.lower(), key[:-1], key[0].upper() + key[1:], key + "s"]))
    if wrong in VK:
        wrong = key + "X"
    doc.setdefault("capabilities", {})[wrong] = 1
    return f"capabilities.{wrong}"


def fault_exact_without_override(doc, draw):
    _drop(doc, *SUBGROUP)
    key = draw(st.sampled_from([k for k, e in VK.items() if e.kind == "exact"]))
    return _set(doc, key, 1 << draw(st.integers(0, 7)))


def fault_override_unset(doc, draw):
    _drop(doc, *SUBGROUP)
    doc["override_exact"] = ["subgroupSize"]
    return "override_exact"


def fault_order(doc, draw):
    _drop(doc, *SUBGROUP)
    lo = draw(st.integers(1, 7))
    _set(doc, "minSubgroupSize", 1 << lo)
    return _set(doc, "maxSubgroupSize", 1 << draw(st.integers(0, lo - 1)))


def fault_power_of_two(doc, draw):
    _drop(doc, *SUBGROUP)
    key = draw(st.sampled_from(list(POWER_OF_TWO)))
    if VK[key].kind == "exact":
        doc["override_exact"] = [key]
    return _set(doc, key, draw(st.sampled_from([0, 3, 12, 48, U32])))


def fault_extension_direction(doc, draw):
    name = draw(st.sampled_from(EXTENSIONS))
    return _ext(doc, name, doc["direction"] == "lower")


def fault_extension_name(doc, draw):
    name = draw(st.sampled_from(["vk_khr_x", "VK_", "VK_KHR-x", "VK_" + "A" * (LIMITS["extension_name_max"] - 2),
                                 "VK_KHR_x\u00e9", "XK_KHR_x"]))
    return _ext(doc, name, doc["direction"] == "raise")


def fault_extension_spec(doc, draw):
    name = draw(st.sampled_from(EXTENSIONS))
    return _ext(doc, name, draw(st.sampled_from([2.0, 0.0, "1", U32 + 1, -1])))


def fault_too_many_extensions(doc, draw):
    doc["extensions"] = {f"VK_CAPSHIM_e{i}": doc["direction"] == "raise"
                         for i in range(LIMITS["extensions_max"] + 1)}
    return "extensions"


def fault_profile_version(doc, draw):
    doc["version"] = draw(st.sampled_from([0, 1.0, U32 + 1, "1"]))
    return "version"


def fault_top_level_key(doc, draw):
    wrong, right = draw(st.sampled_from([("descripton", "description"), ("Direction", "direction"),
                                         ("capabilites", "capabilities"), ("extension", "extensions")]))
    doc[wrong] = doc.pop(right, "x")
    return wrong


FAULTS = [f for name, f in sorted(globals().items()) if name.startswith("fault_")]


@st.composite
def invalid_docs(draw):
    """A valid profile with one fault, and the dotted key `profile check` must name."""
    doc = draw(valid_docs())
    fault = draw(st.sampled_from(FAULTS))
    return fault.__name__, doc, fault(doc, draw)


# ---------- the oracle: what `profile check` printed ----------

def _number(text: str, vtype: str) -> int:
    return profiles.parse_version(text) if vtype == "version" else int(text)


def _as_int(value, vtype: str):
    """An answer as the probe prints it, comparable: versions packed."""
    return profiles.parse_version(value) if vtype == "version" and isinstance(value, str) else value


def expected_answer(line: str, device, vtype: str):
    """The answer `profile check`'s line for a key promises, for the device's answer ``device``."""
    if vtype == "bool":
        assert line == "false" or line.startswith("true ("), line
        return line != "false"
    if m := re.fullmatch(r"the device's bits (plus|within) (0x[0-9a-f]+)", line):
        v = int(m[2], 16)
        return device | v if m[1] == "plus" else device & v
    if m := re.fullmatch(r"(\S+), whatever the device does \(override_exact\)", line):
        return _number(m[1], vtype)
    m = re.fullmatch(r"at (least|most) (\S+), else the device's answer \((\w+): (more|less) is stronger\)", line)
    assert m, line
    pick = max if m[1] == "least" else min
    return pick(_as_int(device, vtype), _number(m[2], vtype))


def _zero(vtype):
    return False if vtype == "bool" else 0


def _check_layer(p: profiles.Profile, stock: dict, lines: list[str]):
    shimmed = vulkan.probe(profile=p)
    state = shimmed["shim"][vulkan.LAYER_APP]
    assert state["state"] == "active", state
    described = dict(line.split(": ", 1) for line in lines if not line.startswith("extension "))
    assert set(described) == set(p.capabilities)
    for key, got in shimmed["capabilities"].items():
        dev = stock["capabilities"].get(key)
        if got is None or (key not in described and dev is None):
            continue  # the probe did not query it (its structure's guard), or the device does not answer it
        vtype = VK[key].type
        if key in described:
            want = expected_answer(described[key], _zero(vtype) if dev is None else dev, vtype)
        else:
            want = dev
        assert _as_int(got, vtype) == _as_int(want, vtype), (key, dev, described.get(key), got)
    exts = dict(stock["extensions"])
    for line in lines:
        if m := re.fullmatch(r"extension (\S+): hidden", line):
            exts.pop(m[1], None)
        elif m := re.fullmatch(r"extension (\S+): added with spec version (\d+) where the device lacks it .*",
                               line):
            exts.setdefault(m[1], int(m[2]))
    assert shimmed["extensions"] == exts


def _check_parser(driver: Path, p: profiles.Profile, tmp: Path):
    cfg = tmp / "p.cfg"
    cfg.write_text(vulkan.render_config(p))
    proc = subprocess.run([str(driver), "--values", str(cfg)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "runtime error" not in proc.stderr, proc.stderr
    line = proc.stdout.strip()
    assert ": ok (" in line, line
    items = line.split(") ", 1)[1].split() if ") " in line else []
    got = dict(item.split("=", 1) for item in items)
    want = {k: str(v) for k, v in p.capabilities.items()}
    want.update({f"extension.{k}": str(v) for k, v in p.extensions.items()})
    want["profile"] = p.name  # named in the layer's VK_EXT_tooling_info description
    assert got == want


@pytest.mark.slow
@SETTINGS
@given(valid_docs())
def test_every_profile_check_accepts_makes_the_layer_answer_as_described(vk_build, stock_probe, doc):
    text = tomli_w.dumps(doc)
    with tempfile.TemporaryDirectory() as td:
        f = Path(td) / "p.toml"
        f.write_text(text)
        r = CliRunner().invoke(main, ["profile", "check", str(f)])
        assert r.exit_code == 0, (text, r.output)
        p = profiles.load(f)
        lines = [ln.strip() for ln in r.stdout.splitlines()[1:]]
        assert lines == profiles.describe(p)
        _check_parser(vk_build.fuzz_driver, p, Path(td))
    _check_layer(p, stock_probe, lines)


@REFUSED
@given(invalid_docs())
def test_every_profile_check_refuses_is_exit_2_naming_the_key(case):
    fault, doc, key = case
    text = tomli_w.dumps(doc)
    with pytest.raises(profiles.ProfileError) as exc:
        profiles.parse(text, "p.toml")
    assert exc.value.key == key, (fault, key, str(exc.value), text)
    with tempfile.TemporaryDirectory() as td:
        f = Path(td) / "p.toml"
        f.write_text(text)
        r = CliRunner().invoke(main, ["profile", "check", str(f)])
    assert r.exit_code == 2 and f"key '{key}'" in r.stderr, (fault, r.output)


def test_every_fault_kind_is_drawn():
    """The fault list is what the refusal test draws from (none forgotten by a rename)."""
    assert len(FAULTS) >= 20
