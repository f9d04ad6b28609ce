"""One "did you mean" rule (capshim.contracts.suggest) for every closed set a name or flag takes:
commands, options, choices, profile names and keys, presets, dimensions, metrics, arm specs, tests,
store filters. Each test gives a misspelt name and checks the suggestion, and that a name nothing
is close to gets none (issue 19, "small things")."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from capshim import profiles
from capshim.bench import arms, metrics, model
from capshim.bench.workloads import builtin
from capshim.cli.app import main
from capshim.contracts.suggest import closest, did_you_mean
from capshim.db import query
from capshim.errors import CapshimError, UsageError
from capshim.studies import ablate, common, tune


def _cli(*args: str):
    r = CliRunner().invoke(main, list(args))
    assert "Traceback" not in (r.stderr or "") and not isinstance(r.exception, (TypeError, AttributeError)), r
    return r


def test_the_rule_is_case_insensitive_and_keeps_the_known_spelling():
    assert closest("shaderfloat16", ["shaderFloat16", "shaderInt8"]) == "shaderFloat16"
    assert closest("BENCH", ["bench", "build"]) == "bench"
    assert did_you_mean("benhc", ["bench", "build"]) == " (did you mean 'bench'?)"
    assert did_you_mean("xyzzy", ["bench", "build"]) == ""
    assert did_you_mean("bench", ["bench"]) == ""  # a known name needs no suggestion
    assert did_you_mean("anything", []) == ""


@pytest.mark.parametrize("args, words", [
    (["benhc"], "No such command 'benhc' (did you mean 'bench'?)."),
    (["Probe"], "No such command 'Probe' (did you mean 'probe'?)."),
    (["db", "lst"], "No such command 'lst' (did you mean 'list'?)."),
    (["evidence", "verfy"], "No such command 'verfy' (did you mean 'verify'?)."),
    (["profile", "shwo"], "No such command 'shwo' (did you mean 'show'?)."),
    (["launchagent", "instal"], "No such command 'instal' (did you mean 'install'?)."),
])
def test_a_misspelt_command_gets_a_suggestion(args, words):
    r = _cli(*args)
    assert r.exit_code == 2 and words in r.stderr, r.stderr


def test_a_command_nothing_is_close_to_gets_none():
    r = _cli("xyzzy")
    assert r.exit_code == 2 and "No such command 'xyzzy'." in r.stderr and "did you mean" not in r.stderr


@pytest.mark.parametrize("args, words", [
    (["--verison"], "No such option: --verison (did you mean '--version'?)"),
    (["db", "list", "--devce", "x"], "No such option: --devce (did you mean '--device'?)"),
    (["report", "--fromat", "md"], "No such option: --fromat (did you mean '--format'?)"),
    # bench passes unknown options on as the command: one that is no program is a misspelt option
    (["bench", "--repetitons", "3"], "No such option: --repetitons (did you mean '--repetitions'?)"),
    (["bench", "--precison=2"], "No such option: --precison (did you mean '--precision'?)"),
    (["run", "--profle", "vulkan-paravirt", "--", "true"], "No such option: --profle (did you mean '--profile'?)"),
    (["launchagent", "install", "--profile", "metal-apple9", "--label", "x", "--dry-rn", "--", "/bin/true"],
     "No such option: --dry-rn (did you mean '--dry-run'?)"),
])
def test_a_misspelt_option_gets_the_same_suggestion(args, words):
    r = _cli(*args)
    assert r.exit_code == 2 and words in r.stderr, r.stderr


@pytest.mark.parametrize("args, words", [
    (["report", "--format", "mdd", "x"], "'mdd' is not one of 'md', 'html', 'csv' (did you mean 'md'?)."),
    (["report", "--format", "HTML", "x"], "(did you mean 'html'?)"),
    (["ablate", "--by", "grup"], "'grup' is not one of 'group', 'key' (did you mean 'group'?)."),
    (["bench", "--better", "hgher"], "(did you mean 'higher'?)"),
    (["evidence", "seal-study", "--kind", "tuen", "x"], "(did you mean 'tune'?)"),
])
def test_a_misspelt_choice_gets_a_suggestion(args, words):
    r = _cli(*args)
    assert r.exit_code == 2 and words in r.stderr, r.stderr


def test_profile_names_get_a_suggestion():
    with pytest.raises(profiles.ProfileError, match=r"\(did you mean 'vulkan-paravirt'\?\) \(built-in: "):
        profiles.load("vulkan-paravirtt")
    with pytest.raises(profiles.ProfileError) as e:
        profiles.load("nothing-like-it")
    assert "did you mean" not in str(e.value)
    with pytest.raises(UsageError, match=r"lowering profile \(did you mean 'vulkan-paravirt'\?\)"):
        ablate.load_lowering("Vulkan-Paravirt")
    r = _cli("run", "--profile", "vulkan-paravir", "--", "true")
    assert r.exit_code == 2 and "--profile: profile vulkan-paravir: no such profile file or built-in profile " \
                                "(did you mean 'vulkan-paravirt'?)" in r.stderr, r.stderr


def test_presets_get_a_suggestion_from_the_one_list():
    assert builtin.MODEL_PRESETS == tuple(model.PRESETS)
    with pytest.raises(UsageError, match=r"not a preset \(did you mean 'tiny'\?\) \(tiny, tinyllama-1.1b, "):
        builtin.resolve_model("tinny", write=False)
    with pytest.raises(ValueError, match=r"unknown model preset 'tinyllama-1.1' \(did you mean 'tinyllama-1.1b'\?\)"):
        model.model_filename("tinyllama-1.1")


def test_bench_help_lists_every_preset_the_error_lists():
    """bench --help once listed two presets where the error listed three: both read MODEL_PRESETS."""
    text = " ".join(_cli("bench", "--help").output.split())
    assert f"a preset ({', '.join(builtin.MODEL_PRESETS)})" in text
    for cmd in ("ablate", "tune", "kernels"):
        text = " ".join(_cli(cmd, "--help").output.split())
        assert all(p in text for p in builtin.MODEL_PRESETS), cmd
    with pytest.raises(UsageError) as e:
        builtin.resolve_model("no-such-preset", write=False)
    assert f"({', '.join(builtin.MODEL_PRESETS)})" in str(e.value)


def test_dimensions_metrics_arm_specs_tests_and_filters_get_a_suggestion():
    with pytest.raises(UsageError, match=r"^--dims coopmatt: not a tune dimension \(did you mean 'coopmat'\?\)"):
        tune.parse_only(["coopmatt"])
    with pytest.raises(UsageError, match=r"\(did you mean 'wall'\?\)$"):
        metrics.parse_spec("wal")
    with pytest.raises(UsageError, match=r"\(did you mean 'json:results.fps'\?\)$"):
        metrics.parse_spec("jsn:results.fps", better="higher")
    with pytest.raises(UsageError, match=r"\(did you mean 'profile:vulkan-paravirt'\?\)$"):
        arms.parse("a=profle:vulkan-paravirt")
    with pytest.raises(UsageError, match=r"--test pp521: not a test of this bench \(did you mean 'pp512'\?\)"):
        common.check_test("pp521", ["pp512", "tg128"])
    with pytest.raises(CapshimError, match=r"unknown key 'devcie' \(did you mean 'device'\?\)"):
        query.parse_selection("devcie=H200")
    with pytest.raises(UsageError, match=r"--dims warp-drive: not a tune dimension \(known"):
        tune.parse_only(["warp-drive"])


@pytest.mark.parametrize("text, key, hint", [
    ("maxComputeWorkGroupInvocatons = 4", "capabilities.maxComputeWorkGroupInvocatons",
     "maxComputeWorkGroupInvocations"),
    ("shaderfloat16 = false", "capabilities.shaderfloat16", "shaderFloat16"),
])
def test_profile_keys_use_the_same_rule(text, key, hint):
    src = 'api = "vulkan"\nname = "x"\ndescription = "d"\ndirection = "lower"\nversion = 1\n[capabilities]\n'
    with pytest.raises(profiles.ProfileError) as e:
        profiles.parse(src + text + "\n", "x.toml")
    assert e.value.key == key and f"(did you mean '{hint}'?)" in e.value.reason
