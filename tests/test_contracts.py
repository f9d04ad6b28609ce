"""The shared rules of capshim.contracts: names, numbers, signals, folders, environment, TOML."""

from __future__ import annotations

import signal

import pytest

from capshim.contracts import environ, folders, names, numbers, signals, tomlread
from capshim.errors import UsageError


@pytest.mark.parametrize("bad", ["", "a\nb", "a\n", "-a", ".a", "a/b", "a+b", "x" * 65, "é", None, 3])
def test_bad_names_are_refused_naming_what(bad):
    with pytest.raises(UsageError, match="--arm name"):
        names.check(bad, "--arm name")


@pytest.mark.parametrize("good", ["a", "vm-stock", "a.c", "A_1", "x" * 64])
def test_good_names_pass(good):
    assert names.check(good, "arm") == good


def test_control_files_never_collide_with_arm_files():
    # arm "a.c" run 1 and arm "a"'s control "c" run 1 were both raw/a.c-1
    assert names.run_stem("a.c", 1) != names.run_stem("a", 1, control="c")
    assert names.run_label("a", "c") == "a+c" and names.run_stem("a", 2, "c") == "a+c-2"
    assert names.is_run_label("a+c") and names.is_run_label("a.c")
    assert not any(names.is_run_label(x) for x in ("a+", "+c", "a+b+c", "a\n", "a/b", None))
    assert names.CONTROL_SEP not in "".join(names.NAME_RE.pattern)


@pytest.mark.parametrize("text,want", [("./_m.gguf", "m.gguf"), ("___", "item"), ("a b/c", "a-b-c")])
def test_labels_from_paths_are_valid_names(text, want):
    label = names.label_for(text)
    assert label == want and names.is_name(label)


def test_labels_are_unique():
    assert names.label_for("m", {"m", "m-2"}) == "m-3"
    long = names.label_for("x" * 80, {"x" * 64})
    assert names.is_name(long) and long.endswith("-2")


@pytest.mark.parametrize("value", [float("nan"), float("inf"), True, "1", 10 ** 400, 10 ** 20])
def test_finite_refuses(value):
    with pytest.raises(UsageError, match="where"):
        numbers.finite(value, "where")


def test_integer_refuses_integral_floats_and_bools():
    assert numbers.integer(24576, "k") == 24576
    assert numbers.is_integer(24576) and not any(map(numbers.is_integer, (24576.0, True, "1", None)))
    for bad in (24576.0, True, 8.0):
        with pytest.raises(UsageError, match="k: .* is not an integer"):
            numbers.integer(bad, "k")
    with pytest.raises(UsageError, match="outside"):
        numbers.integer(5, "k", lo=8)


def test_signal_exit_codes_are_128_plus_n():
    assert [signals.exit_code(n) for n in ("SIGINT", "SIGTERM", "SIGHUP")] == [130, 143, 129]
    assert signals.exit_code(signal.SIGTERM) == 143
    assert signals.exit_code("nonsense") == 130


def test_stoppable_stops_on_the_first_signal_only_and_never_inside_a_nested_seal():
    """A study's guard: the first signal in a stoppable part raises StopRequested (the bench's runner
    records it as Ctrl-C); later ones, and any during a nested guard (a bundle being sealed), only wait."""
    guard_cm = signals.SealGuard("the study")
    with pytest.raises(SystemExit) as done:
        with guard_cm as guard:
            with pytest.raises(signals.StopRequested) as stop:
                with guard.stoppable():
                    signal.raise_signal(signal.SIGTERM)
            assert stop.value.signal_name == "SIGTERM" and isinstance(stop.value, KeyboardInterrupt)
            signal.raise_signal(signal.SIGINT)  # a second one: recorded, nothing raised
            signal.raise_signal(signal.SIGTERM)
            assert guard.abort == "SIGINT" and guard.signal_name == "SIGTERM"
            with pytest.raises(signals.StopRequested):  # nothing more starts after a stop request
                with guard.stoppable():
                    pytest.fail("ran after a stop request")
        guard_cm.exit_if_signalled()
    assert done.value.code == 143
    outer_cm = signals.SealGuard("the study")
    with pytest.raises(SystemExit) as done:
        with outer_cm as outer, outer.stoppable():
            with signals.SealGuard() as inner:  # the bench's seal, nested: shares the study's state
                assert inner is outer and outer.nested == 1
                signal.raise_signal(signal.SIGHUP)  # while sealing: waits, raises nothing
            assert outer.nested == 0 and outer.signal_name == "SIGHUP"
        outer_cm.exit_if_signalled()
    assert done.value.code == 129

def test_guard_can_leave_stop_signals_ignored_once_capshim_is_stopping():
    before = signal.getsignal(signal.SIGTERM)
    try:
        with signals.SealGuard() as guard:
            with signals.SealGuard() as inner:
                inner.ignore_after()  # the outer guard's: the same object
            assert signal.getsignal(signal.SIGTERM) == guard._handler
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, before)
    with signals.SealGuard():
        pass
    assert signal.getsignal(signal.SIGTERM) == before


def test_output_folder_rule(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = folders.new_output_folder(None, "bench")
    b = folders.new_output_folder(None, "bench")
    assert a != b and a.is_dir() and b.is_dir()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    with pytest.raises(UsageError, match="not empty"):
        folders.new_output_folder(tmp_path / "full", "bench")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="not a folder"):
        folders.new_output_folder(tmp_path / "file", "bench")
    for empty in ("", "  "):  # not the default folder: the user gave --out
        with pytest.raises(UsageError, match="--out: an empty path"):
            folders.new_output_folder(empty, "bench")
    sealed = tmp_path / "sealed"
    (sealed / "raw").mkdir(parents=True)
    (sealed / "SHA256SUMS").write_text("")
    with pytest.raises(UsageError, match="inside the sealed folder"):
        folders.new_output_folder(sealed / "raw" / "inner", "bench")
    with pytest.raises(UsageError, match="-o .*inside the sealed"):
        folders.refuse_inside_sealed(sealed / "report.md", "-o")


def test_environment_values_that_are_not_utf8_are_recorded_escaped():
    bad = "caf\udce9"
    assert not environ.is_clean(bad)
    assert environ.record({"X": bad}) == {"X": "caf\\xe9"}
    assert environ.recordable("plain") == "plain"


def test_named_files_refuse_a_newline_in_the_name():
    # report --arm $'a\nb=f.json' showed a phantom row
    with pytest.raises(UsageError, match="--arm name"):
        names.parse_named_files("a\nb=f.json")
    assert names.parse_named_files(" a = x.json, y.json") == ("a", ["x.json", "y.json"])
    with pytest.raises(UsageError, match="expected NAME=FILE"):
        names.parse_named_files("a=")



def test_escape_shows_control_characters_and_keeps_the_rest():
    assert names.escape("GPU\x1b[31m\x00\x9b\u202e\u2028 é™") == "GPU\\x1b[31m\\x00\\x9b\\u202e\\u2028 é™"
    assert names.escape("NVIDIA H200") == "NVIDIA H200"


TOML = tomlread.Limits(max_bytes=200_000, max_depth=3, max_items=8, max_keys=8)


@pytest.mark.parametrize("text, key, words", [
    ("a = [" + ", ".join(["1", '"x"'] * 10_000) + "]", "a", "an array of 20000 items (at most 8)"),
    ("[t]\n" + "".join(f"k{i} = {i}\n" for i in range(9)), "t", "a table of 9 keys (at most 8)"),
    ("a = [[[[1]]]]", "a[0][0][0]", "nested deeper than 3 levels"),
    ("a = " + "[" * 5000 + "]" * 5000, None, "nested too deep"),
    ("# " + "é" * 100_000, None, "larger than 200000 bytes"),
    ("a = 1\na = 2", None, "not valid TOML"),
    ("a = " + "9" * 4400, None, "not valid TOML"),
    ('"k\\n" = [' + "1, " * 9 + "]", '"k\\n"', "an array of 9 items"),
    ("\ufeffa = 1", None, "byte-order mark"),
])
def test_toml_reader_limits_name_the_key(text, key, words):
    with pytest.raises(UsageError) as exc:
        tomlread.loads(text, "f.toml", TOML)
    assert exc.value.key == key and words in exc.value.reason, str(exc.value)
    assert str(exc.value).startswith("f.toml: ") and "\n" not in str(exc.value)


def test_toml_reader_is_linear_on_unsortable_arrays():
    """jsonschema's uniqueItems compares all pairs of an array that does not sort (mixed
    types): 20,000 items took minutes. The reader stops at the array's length, at once."""
    import time

    text = "a = [" + ", ".join(["1", '"x"', "{b = 1}"] * 100_000) + "]"
    start = time.monotonic()
    with pytest.raises(tomlread.TomlError, match="300000 items"):
        tomlread.loads(text, "f.toml", tomlread.Limits(1 << 22, 3, 64, 64))
    assert time.monotonic() - start < 20


def test_toml_key_paths_are_written_as_toml_writes_them():
    assert tomlread.dotted(["capabilities", "shaderFloat16"]) == "capabilities.shaderFloat16"
    assert tomlread.dotted(["a", 3, 0]) == "a[3][0]"
    assert tomlread.dotted(["capabilities.x", "y z"]) == '"capabilities.x"."y z"'
    assert tomlread.dotted(["k\x1b[31m", "\u202e"]) == '"k\\u001b[31m"."\\u202e"'


def test_toml_reader_returns_what_tomllib_reads():
    data = tomlread.loads('a = [1, 2]\n[t]\nk = "v"\n[[u]]\nx = 1.5\n', "f.toml", TOML)
    assert data == {"a": [1, 2], "t": {"k": "v"}, "u": [{"x": 1.5}]}


def test_did_you_mean_is_one_rule_case_insensitive_and_silent_when_nothing_is_close():
    """contracts.suggest: the closest known name (difflib, case-insensitive, spelt as known), or nothing."""
    from capshim.contracts import suggest

    assert suggest.did_you_mean("maxComputeWorkGroupInvocatons", ["maxComputeWorkGroupInvocations", "x"]) \
        == " (did you mean 'maxComputeWorkGroupInvocations'?)"
    assert suggest.did_you_mean("SHADERFLOAT16", ["shaderFloat16"]) == " (did you mean 'shaderFloat16'?)"
    assert suggest.closest("qqqq", ["bench", "build"]) is None
    assert suggest.closest("bench", ["bench", "bnech"]) is None  # known already
    assert 0 < suggest.CUTOFF < 1
