"""The Metal shim's behaviour, on Linux with the GNU Objective-C runtime.

Each case is its own child process (the driver, started with its own
environment), built with AddressSanitizer and UndefinedBehaviorSanitizer;
any sanitizer report fails the case. The stand-in device classes answer like
Apple's paravirtual device in a macOS guest: Apple1..5, Mac2, Common1..3, no
Metal3, 32768 bytes of threadgroup memory.
"""

import json
import re

import pytest

from capshim import profiles
from capshim.backends import metal

APPLE9 = {"LUME_METAL_APPLE_FAMILY_MAX": "1009"}
STOCK_FAMILIES = {str(f): f <= 1005 for f in range(1001, 1011)}
APPLE9_FAMILIES = {str(f): f <= 1009 for f in range(1001, 1011)}


def test_stock_answers_without_the_shim(shim):
    r = shim.run(["new", "CSParavirtDevice"], shim=False)
    assert r.rc == 0
    d = r.one()
    assert d["families"] == STOCK_FAMILIES
    assert d["highest"] == {"apple": 1005, "mac": 2002, "common": 3003, "metal": None}
    assert d["maxThreadgroupMemoryLength"] == 32768
    assert d["llama_cpp"] == {"simdgroup_reduction": False, "simdgroup_mm": False,
                              "bfloat": False, "tensor": False}
    assert r.events == []


def test_profile_env_gives_apple9_and_64k_by_the_rules(shim):
    """The launcher's variables for metal-apple9 (capshim form), hook path 1."""
    env = metal.shim_env(profiles.load("metal-apple9"), shim.arts["shim"], None, False, False,
                         inject_var="LD_PRELOAD")
    del env["LD_PRELOAD"]
    r = shim.run(["new", "CSParavirtDevice"], env)
    assert r.rc == 0
    d = r.one()
    assert d["families"] == APPLE9_FAMILIES  # 1010 stays false: above the ceiling
    assert d["highest"] == {"apple": 1009, "mac": 2002, "common": 3003, "metal": None}
    assert d["maxThreadgroupMemoryLength"] == 65536
    assert d["recommendedMaxWorkingSetSize"] == 11453251584  # not configured: untouched
    assert d["hasUnifiedMemory"] is True
    assert d["llama_cpp"] == {"simdgroup_reduction": True, "simdgroup_mm": True,
                              "bfloat": True, "tensor": False}
    assert metal.summarize_status(r.events) == "active"
    (cfg,) = r.of("config")
    assert cfg["values"] == {"form": "capshim", "appleFamilyMax": 1009,
                             "maxThreadgroupMemoryLength": 65536}
    hooks = [h for h in r.of("hooks") if h["installed"]]
    assert len(hooks) == 1
    assert hooks[0]["installed"] == ["-[_MTLDevice initGPUFamilySupport]",
                                     "-[CSParavirtDevice supportsFamily:]",
                                     "-[CSParavirtDevice maxThreadgroupMemoryLength]"]
    changed = {(e["query"], e["key"]): (e["stock"], e["reported"]) for e in r.of("changed")}
    assert changed == {("supportsFamily:", "1006"): (0, 1), ("supportsFamily:", "1007"): (0, 1),
                       ("supportsFamily:", "1008"): (0, 1), ("supportsFamily:", "1009"): (0, 1),
                       ("maxThreadgroupMemoryLength", ""): (32768, 65536)}
    assert all(e["shim"] == "metal" and isinstance(e["pid"], int) for e in r.events)


def test_lume_spelling_defaults_threadgroup_memory_to_65536(shim):
    r = shim.run(["new", "CSParavirtDevice"], APPLE9)
    d = r.one()
    assert d["families"] == APPLE9_FAMILIES
    assert d["maxThreadgroupMemoryLength"] == 65536
    assert r.of("config")[0]["values"]["form"] == "lume"


def test_lower_ceiling_raises_only_up_to_it(shim):
    r = shim.run(["new", "CSParavirtDevice"], {"CAPSHIM_METAL_APPLE_FAMILY_MAX": "1007"})
    d = r.one()
    assert d["families"] == {str(f): f <= 1007 for f in range(1001, 1011)}
    assert d["maxThreadgroupMemoryLength"] == 32768  # capshim form: not configured, not hooked
    assert d["llama_cpp"]["simdgroup_mm"] is True and d["llama_cpp"]["tensor"] is False


@pytest.mark.slow
def test_nothing_is_ever_lowered(shim):
    """A device above the profile keeps its answers, Metal3 included."""
    r = shim.run(["new", "CSBigDevice"], {
        "CAPSHIM_METAL_APPLE_FAMILY_MAX": "1006",
        "CAPSHIM_METAL_MAX_THREADGROUP_MEMORY": "65536",
        "CAPSHIM_METAL_RECOMMENDED_WORKING_SET_SIZE": "1024"})
    stock = shim.run(["new", "CSBigDevice"], shim=False).one()
    d = r.one()
    assert d == stock
    assert d["highest"]["metal"] == 5001 and d["maxThreadgroupMemoryLength"] == 131072
    assert r.of("changed") == []
    assert metal.summarize_status(r.events) == "active"


@pytest.mark.slow
def test_working_set_raised_only_when_configured_and_never_lowered(shim):
    up = shim.run(["new", "CSParavirtDevice"],
                  {**APPLE9, "LUME_METAL_RECOMMENDED_WORKING_SET_SIZE": "0x400000000"}).one()
    assert up["recommendedMaxWorkingSetSize"] == max(11453251584, 0x400000000)
    big = shim.run(["new", "CSParavirtDevice"],
                   {**APPLE9, "LUME_METAL_RECOMMENDED_WORKING_SET_SIZE": "17179869184"})
    assert big.one()["recommendedMaxWorkingSetSize"] == 17179869184
    assert "-[CSParavirtDevice recommendedMaxWorkingSetSize]" in big.of("hooks")[0]["installed"]
    down = shim.run(["new", "CSParavirtDevice"],
                    {**APPLE9, "LUME_METAL_RECOMMENDED_WORKING_SET_SIZE": "1"}).one()
    assert down["recommendedMaxWorkingSetSize"] == 11453251584


@pytest.mark.parametrize("value, reason", [
    ("1009x", "LUME_METAL_APPLE_FAMILY_MAX: '1009x' is not a whole number"),
    ("999", "LUME_METAL_APPLE_FAMILY_MAX: '999' is not an Apple GPU family"),
    ("2000", "LUME_METAL_APPLE_FAMILY_MAX: '2000' is not an Apple GPU family"),
    ("", "LUME_METAL_APPLE_FAMILY_MAX: '' is empty"),
    ("18446744073709551616", "LUME_METAL_APPLE_FAMILY_MAX: '18446744073709551616' is out of range"),
    ("-1009", "LUME_METAL_APPLE_FAMILY_MAX: '-1009' starts with a sign or white space"),
    (" 1009", "LUME_METAL_APPLE_FAMILY_MAX: ' 1009' starts with a sign or white space"),
    ("1009 ", "LUME_METAL_APPLE_FAMILY_MAX: '1009 ' is not a whole number"),
    ("0x", "LUME_METAL_APPLE_FAMILY_MAX: '0x' is not a whole number"),
])
def test_invalid_configuration_leaves_stock_and_says_why(shim, value, reason):
    r = shim.run(["new", "CSParavirtDevice"], {"LUME_METAL_APPLE_FAMILY_MAX": value})
    assert r.rc == 0
    assert r.one()["families"] == STOCK_FAMILIES
    assert r.one()["maxThreadgroupMemoryLength"] == 32768
    (cfg,) = r.of("config")
    assert cfg["accepted"] is False
    assert cfg["reason"].startswith(reason), cfg["reason"]
    assert r.of("hooks") == [] and r.of("changed") == []
    assert metal.summarize_status(r.events) == "invalid"
    assert "capshim-metal: inactive in driver[" in r.stderr and "active in driver" not in \
        r.stderr.replace("inactive in driver", "")


def test_hex_0x3F1_is_valid_apple9(shim):
    r = shim.run(["new", "CSParavirtDevice"], {"LUME_METAL_APPLE_FAMILY_MAX": "0x3F1"})
    assert r.one()["families"] == APPLE9_FAMILIES
    assert r.of("config")[0]["values"]["appleFamilyMax"] == 1009


def test_invalid_optional_value_rejects_the_whole_configuration(shim):
    r = shim.run(["new", "CSParavirtDevice"],
                 {**APPLE9, "LUME_METAL_MAX_THREADGROUP_MEMORY": "64k"})
    assert r.one()["families"] == STOCK_FAMILIES
    assert r.of("config")[0]["reason"] == "LUME_METAL_MAX_THREADGROUP_MEMORY: '64k' is not a whole number"


def test_no_configuration_is_invalid_not_silent(shim):
    r = shim.run(["new", "CSParavirtDevice"], {})
    assert r.one()["families"] == STOCK_FAMILIES
    assert metal.summarize_status(r.events) == "invalid"
    assert "no configuration" in r.of("config")[0]["reason"]


def test_capshim_form_wins_over_lume_spelling(shim):
    r = shim.run(["new", "CSParavirtDevice"],
                 {"CAPSHIM_METAL_APPLE_FAMILY_MAX": "1006", "LUME_METAL_APPLE_FAMILY_MAX": "1009"})
    assert r.one()["highest"]["apple"] == 1006
    assert "ignored" in r.of("config")[0]["values"]


def test_missing_selector_leaves_stock_with_a_status_line(shim):
    r = shim.run(["new", "CSLimitedDevice", "CSParavirtDevice"], APPLE9)
    limited, para = r.devices()
    assert limited["families"] == STOCK_FAMILIES  # supportsFamily: exists but is not patched
    assert limited["maxThreadgroupMemoryLength"] is None
    assert para["families"] == APPLE9_FAMILIES
    failed = [h for h in r.of("hooks") if h["class"] == "CSLimitedDevice"]
    assert failed == [{**failed[0], "installed": [],
                       "missing": ["-[CSLimitedDevice maxThreadgroupMemoryLength]"]}]
    assert "missing" in failed[0]["reason"]


def test_missing_selector_only_device_is_inert(shim):
    r = shim.run(["new", "CSLimitedDevice"], APPLE9)
    assert r.one()["families"] == STOCK_FAMILIES
    assert metal.summarize_status(r.events) == "inert"


def test_two_device_classes_each_keep_their_own_originals(shim):
    r = shim.run(["new", "CSParavirtDevice", "CSParavirtDevice2", "CSParavirtDevice2"], APPLE9)
    a, b, b2 = r.devices()
    assert a["families"] == b["families"] == APPLE9_FAMILIES
    assert a["maxThreadgroupMemoryLength"] == b["maxThreadgroupMemoryLength"] == 65536
    # Originals stay per class: Common/Mac/working set differ as they did stock.
    assert (a["highest"]["common"], b["highest"]["common"]) == (3003, 3002)
    assert (a["highest"]["mac"], b["highest"]["mac"]) == (2002, None)
    assert (a["recommendedMaxWorkingSetSize"], b["recommendedMaxWorkingSetSize"]) == \
        (11453251584, 4294967296)
    assert b2 == b
    classes = [h["class"] for h in r.of("hooks") if h["installed"]]
    assert classes == ["CSParavirtDevice", "CSParavirtDevice2"]


def test_subclass_of_patched_class_answers_through_it_without_recursion(shim):
    r = shim.run(["new", "CSParavirtDevice", "CSSubDevice"], APPLE9)
    para, sub = r.devices()
    assert sub["families"] == APPLE9_FAMILIES and sub["maxThreadgroupMemoryLength"] == 65536
    assert [h["class"] for h in r.of("hooks") if h["installed"]] == ["CSParavirtDevice"]


def test_many_threads_creating_devices_patch_once(shim):
    r = shim.run(["threads", "64", "CSParavirtDevice"], APPLE9)
    assert r.rc == 0
    res = json.loads(r.stdout)
    assert res == {"threads": 64, "apple9": 64, "tg": 65536, "same_tg": True, "family_inits": 64}
    assert len([h for h in r.of("hooks") if h["installed"]]) == 1
    assert len([e for e in r.of("changed") if e["key"] == "1009"]) == 1
    assert r.stderr.count("capshim-metal: active") == 1


@pytest.mark.parametrize("cls", ["CSParavirtDevice", "CSSubDevice"])
def test_a_query_while_hooks_install_gets_stock_or_more(shim, cls):
    """A second thread queries the device between each method replacement
    (CSParavirtDevice: method_setImplementation) or addition (CSSubDevice,
    which inherits every answer: class_addMethod) of the shim's patch. The
    shim fills its slot (the originals, ready) before any hook is reachable,
    so those queries see the stock answers, never NO or 0 (issue 8 item 5).
    The configured sizes are below stock, so the queries take no shim lock."""
    r = shim.run(["window", cls], {"CAPSHIM_METAL_APPLE_FAMILY_MAX": "1009",
                                   "CAPSHIM_METAL_MAX_THREADGROUP_MEMORY": "1024",
                                   "CAPSHIM_METAL_RECOMMENDED_WORKING_SET_SIZE": "1024"})
    assert r.rc == 0, r.stderr
    window = json.loads(r.stdout.splitlines()[0])
    assert window["window"] == 3  # one query after each of the three installations
    assert window["apple5"] == [1, 1, 1]
    assert window["tg"] == [32768] * 3
    assert window["ws"] == [11453251584] * 3
    d = r.one()
    assert d["families"] == APPLE9_FAMILIES and d["maxThreadgroupMemoryLength"] == 32768
    assert len([h for h in r.of("hooks") if h["installed"]]) == 1


def test_path2_patches_the_class_of_the_default_device(shim):
    """Without _MTLDevice (stand-in built -DSTANDIN_NO_PRIVATE)."""
    r = shim.run(["create"], APPLE9, noprivate=True)
    d = r.one()
    assert d["families"] == APPLE9_FAMILIES and d["maxThreadgroupMemoryLength"] == 65536
    entry, dev = r.of("hooks")
    assert entry["installed"] == [] and entry["missing"] == ["_MTLDevice"]
    assert dev["path"] == "MTLCreateSystemDefaultDevice"
    assert dev["installed"] == ["-[CSParavirtDevice supportsFamily:]",
                                "-[CSParavirtDevice maxThreadgroupMemoryLength]"]
    assert metal.summarize_status(r.events) == "active"


def test_path2_patches_only_the_returned_class_not_its_superclass(shim):
    r = shim.run(["create-then-new", "CSParavirtDevice"], APPLE9, noprivate=True,
                 extra={"STANDIN_DEVICE_CLASS": "CSSubDevice"})
    sub, parent = r.devices()
    assert sub["class"] == "CSSubDevice" and sub["families"] == APPLE9_FAMILIES
    assert parent["families"] == STOCK_FAMILIES and parent["maxThreadgroupMemoryLength"] == 32768


def test_path2_copy_all_devices(shim):
    r = shim.run(["copyall"], APPLE9, noprivate=True)
    a, b = r.devices()
    assert a["families"] == b["families"] == APPLE9_FAMILIES
    assert {a["maxThreadgroupMemoryLength"], b["maxThreadgroupMemoryLength"]} == {65536}


def test_environment_scrubbed_so_children_stay_stock(shim):
    r = shim.run(["env"], APPLE9)
    assert r.rc == 0
    env = json.loads(r.stdout.splitlines()[0])["env"]
    assert env["LD_PRELOAD"] == shim.asan  # our entry gone, the other kept
    assert env["LUME_METAL_APPLE_FAMILY_MAX"] is None
    child = json.loads(r.stdout.splitlines()[1])
    assert child["families"] == STOCK_FAMILIES and child["maxThreadgroupMemoryLength"] == 32768
    (scrub,) = r.of("env_scrubbed")
    assert scrub["variables"] == ["LD_PRELOAD", "LUME_METAL_APPLE_FAMILY_MAX"]
    assert len({e["pid"] for e in r.events}) == 1


def test_environment_kept_with_inherit(shim):
    r = shim.run(["env"], {**APPLE9, "CAPSHIM_INHERIT": "1"})
    env = json.loads(r.stdout.splitlines()[0])["env"]
    assert env["LD_PRELOAD"].endswith(str(shim.arts["shim"]))
    assert env["LUME_METAL_APPLE_FAMILY_MAX"] == "1009"
    child = json.loads(r.stdout.splitlines()[1])
    assert child["families"] == APPLE9_FAMILIES
    assert r.of("env_scrubbed") == []
    assert len({e["pid"] for e in r.of("loaded")}) == 2


def test_banner_format_and_quiet(shim):
    r = shim.run(["new", "CSParavirtDevice"], APPLE9)
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("capshim-metal")]
    assert len(lines) == 1
    assert re.fullmatch(r"capshim-metal: active in driver\[\d+\]: apple family <= 1009, "
                        r"threadgroup memory 65536 bytes", lines[0])
    assert "capshim-metal" not in r.stdout
    q = shim.run(["new", "CSParavirtDevice"], {**APPLE9, "CAPSHIM_QUIET": "1"})
    assert q.one()["families"] == APPLE9_FAMILIES
    assert "capshim-metal" not in q.stderr
    bad = shim.run(["new", "CSParavirtDevice"], {"LUME_METAL_APPLE_FAMILY_MAX": "x",
                                                 "CAPSHIM_QUIET": "1"})
    assert "capshim-metal" not in bad.stderr


def test_runs_without_a_status_file(shim):
    r = shim.run(["new", "CSParavirtDevice"], APPLE9, status=False)
    assert r.rc == 0 and r.one()["families"] == APPLE9_FAMILIES and r.events == []


def test_forced_families_and_their_warning(shim):
    r = shim.run(["new", "CSParavirtDevice"],
                 {"CAPSHIM_METAL_APPLE_FAMILY_MAX": "1009", "CAPSHIM_METAL_FORCE_FAMILIES": "5001,3004"})
    d = r.one()
    assert d["highest"]["metal"] == 5001 and d["highest"]["common"] == 3004
    assert d["highest"]["mac"] == 2002
    assert "forced families 5001,3004" in r.stderr
    bad = shim.run(["new", "CSParavirtDevice"], {"CAPSHIM_METAL_FORCE_FAMILIES": "1009"})
    assert bad.one()["families"] == STOCK_FAMILIES
    assert "outside Mac" in bad.of("config")[0]["reason"]
    p = profiles.parse('name = "f"\napi = "metal"\ndirection = "raise"\nversion = 1\n'
                       'description = "d"\n[capabilities]\nforceFamilies = [5001]\n', "t")
    assert "residency set" in metal.profile_warnings(p)[0]
    assert metal.profile_warnings(profiles.load("metal-apple9")) == []


def test_status_lines_are_whole_json_even_with_hostile_values(shim):
    r = shim.run(["new", "CSParavirtDevice"],
                 {"LUME_METAL_APPLE_FAMILY_MAX": '1009"}\n{"event":"config","accepted":true}'})
    assert metal.summarize_status(r.events) == "invalid"
    assert len(r.of("config")) == 1
    assert r.one()["families"] == STOCK_FAMILIES


def test_probe_compare_against_the_stand_in(shim):
    """The probe program and run_probe, through hook path 2 (framework loaded late)."""
    a = shim.arts
    base = shim.base_env()
    r = metal.run_probe(a["probe"], a["shim"], profiles.load("metal-apple9"), compare=True,
                        inject_var="LD_PRELOAD", framework=a["standin"], base_env=base)
    assert r["stock"]["highest"]["apple"] == 1005 and r["shimmed"]["highest"]["apple"] == 1009
    assert r["status"] == "active"
    answers = {d["answer"] for d in r["differences"]}
    assert answers == {"families.1006", "families.1007", "families.1008", "families.1009",
                       "highest.apple", "llama_cpp.simdgroup_reduction", "llama_cpp.simdgroup_mm",
                       "llama_cpp.bfloat", "maxThreadgroupMemoryLength"}
    stock_only = metal.run_probe(a["probe"], a["shim"], None, inject_var="LD_PRELOAD",
                                 framework=a["standin"], base_env=base)
    assert stock_only["api"] == "metal" and stock_only["stock"] == r["stock"]
    assert stock_only["schema"] == 1  # a host capture (capshim.profiles.metalhost)


def test_lume_spelling_without_family_is_invalid(shim):
    r = shim.run(["new", "CSParavirtDevice"], {"LUME_METAL_MAX_THREADGROUP_MEMORY": "65536"})
    assert r.one()["maxThreadgroupMemoryLength"] == 32768
    assert r.of("config")[0]["reason"] == \
        "LUME_METAL_APPLE_FAMILY_MAX is required with the LUME_METAL_* spelling"


def test_the_shim_and_the_launcher_read_one_list_of_variables(shim):
    """metal_vars.h is the one list: every name the launcher knows (both
    spellings) is one the shim removes from the environment at load, and no
    other."""
    names = [*metal.CONFIG_VARIABLES.values(), *metal.LUME_VARIABLES.values()]
    config = {n: "1009" if n.endswith("FAMILY_MAX") else "5001" if n.endswith("FAMILIES") else "65536"
              for n in names}
    r = shim.run(["new", "CSParavirtDevice"], config)
    assert r.rc == 0, r.stderr
    (scrub,) = r.of("env_scrubbed")
    assert scrub["variables"] == ["LD_PRELOAD", *names]
    assert r.of("config")[0]["accepted"] is True


def test_loaded_event_reports_capshims_version(shim):
    """The Metal shim reports the version it was built from (capshim.__version__, passed by the build
    as CAPSHIM_VERSION_STRING), the same one capshim --version prints (issue 19: one version)."""
    from capshim import __version__

    r = shim.run(["new", "CSParavirtDevice"], APPLE9)
    assert r.rc == 0, r.stderr
    assert [e["version"] for e in r.of("loaded")] == [__version__]
