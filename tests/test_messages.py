"""One place formats every warning, note and error (capshim.contracts.messages, issue 28): wrapped
between words to the width (80 off a terminal), long lists summarised, goldens at 80 columns."""

from __future__ import annotations

import os
from pathlib import Path

from capshim.contracts import messages
from tests.conftest import REPO, run_capshim

GOLDEN = Path(__file__).parent / "fixtures" / "golden" / "messages"
H200 = "tests/fixtures/khronos/h200-capture.json"


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("CAPSHIM_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"{name} differs; CAPSHIM_UPDATE_GOLDEN=1 rewrites it"


def test_wraps_between_words_and_never_splits_a_word_or_path():
    path = "/a/very/long/path/" + "x" * 90 + "/summary.json"
    text = "the bench-run could not read " + path + " (a folder of a finished bench); give --out a new folder"
    out = messages.format_message(text, "warning", 80)
    lines = out.split("\n")
    assert lines[0] == "capshim: warning: the bench-run could not read"
    assert messages.INDENT + path in lines  # on a line of its own, whole, however long
    assert all(len(line) <= 80 for line in lines if path not in line)
    assert all(line.startswith(messages.INDENT) for line in lines[1:])
    assert " ".join(w for line in lines for w in line.split()) == "capshim: warning: " + text
    assert "bench-run" in out and "--out" in out  # never broken at a hyphen


def test_no_wrap_with_width_zero_and_own_lines_kept(monkeypatch):
    text = "one " * 40 + "\n  raw/a-1.json: missing"
    assert messages.format_message(text, None, None) == "capshim: " + text
    monkeypatch.setenv(messages.WIDTH_VAR, "0")
    assert messages.width() is None
    monkeypatch.setenv(messages.WIDTH_VAR, "60")
    assert messages.width() == 60
    monkeypatch.delenv(messages.WIDTH_VAR)
    monkeypatch.setenv("COLUMNS", "100")
    assert messages.width(open(os.devnull, "w")) == 100
    monkeypatch.delenv("COLUMNS")
    assert messages.width(open(os.devnull, "w")) == messages.PIPE_WIDTH
    out = messages.format_message(text, None, 40).split("\n")
    assert out[-1] == "  raw/a-1.json: missing" and all(len(x) <= 40 for x in out)


def test_summarise_counts_per_kind_and_names_the_first_few():
    names = [f"VK_EXT_{i}" for i in range(64)]
    assert messages.summarise(names, "extension") == \
        "64 extensions: VK_EXT_0, VK_EXT_1, VK_EXT_2 and 61 more (capshim --verbose lists each)"
    assert messages.summarise(names[:2], "extension") == "2 extensions: VK_EXT_0, VK_EXT_1"
    assert messages.summarise(["a"], "capability") == "1 capability: a"
    assert messages.summarise(["a", "b"], "capability") == "2 capabilities: a, b"
    mixed = messages.summarise(["x", "VK_A", "y", "VK_B"], kind_of=lambda s: "extension" if s.startswith("VK_")
                               else "capability", first=1)
    assert mixed == "2 capabilities and 2 extensions: x and 3 more (capshim --verbose lists each)"
    assert messages.summarise(names, "extension", all_items=True).count("VK_EXT_") == 64
    assert messages.summarise([], "extension") == ""


def test_verbose_lists_every_item():
    try:
        messages.set_verbose(True)
        assert "more" not in messages.summarise([str(i) for i in range(10)], "key")
    finally:
        messages.set_verbose(False)


def _stderr_80(*args: str) -> str:
    env = {messages.WIDTH_VAR: "", "COLUMNS": "80"}
    r = run_capshim(*args, env=env, cwd=REPO, timeout=300)
    assert "Traceback" not in r.stderr, r.stderr
    return r.stderr


def test_golden_usage_error_at_80_columns():
    err = _stderr_80("bench", "--max-runs", "3")
    _check_golden("usage-error-80.txt", err)
    assert all(len(line) <= 80 for line in err.splitlines())


def test_h200_capture_as_simulate_is_summarised_at_80_columns(stock_probe):
    """The real H200 capture over lavapipe printed 85 lines (64 of them one per extension) of up to
    560 characters before the program started; now a few wrapped lines, --verbose for each."""
    from capshim.profiles import khronos

    higher = khronos.derive(khronos.read(str(REPO / H200)), stock_probe)[1]  # what this device lacks
    n_ext = len(higher.extensions) if higher else 0
    err = _stderr_80("run", "--simulate", H200, "--", "true")
    lines = err.splitlines()
    assert all(len(line) <= 80 for line in lines), [x for x in lines if len(x) > 80]
    assert len(lines) < 45, err
    flat = " ".join(x.strip() for x in lines)
    if n_ext > messages.FIRST:  # lavapipe lacks 64 of them: counted, three named
        assert f"{n_ext} extensions (" in flat and f"and {n_ext - messages.FIRST} more (capshim --verbose" in flat
    full = run_capshim("--verbose", "run", "--simulate", H200, "--", "true", cwd=REPO, timeout=300).stderr
    assert "--verbose lists each" not in full and full.count("VK_") >= n_ext


def _device(reading) -> dict:
    """A Khronos capture as a stock probe result: a fixed device, whatever this machine has."""
    from capshim.profiles import format_version

    caps = {k: (format_version(v) if k == "apiVersion" else v) for k, v in reading.capabilities.items()}
    return {"device": {"name": "llvmpipe (LLVM 15.0.6, 256 bits)", "apiVersion": caps.get("apiVersion", "1.3.0")},
            "capabilities": caps, "extensions": dict(reading.extensions)}


def test_golden_common_warnings_at_80_columns(monkeypatch):
    """The warnings a first hour meets, on a fixed device (the committed lavapipe capture): the
    simulation's no-effect line, the H200 capture's beyond-device line, the CPU note and a busy
    machine, each at 80 columns."""
    from capshim import profiles
    from capshim.beyond import Finding, warning_lines
    from capshim.bench import plan
    from capshim.profiles import khronos
    from capshim.profiles.ondevice import beyond_device

    monkeypatch.chdir(REPO)  # the files named as a user names them: relative to the repository
    fix = Path("tests/fixtures/khronos")
    device = _device(khronos.read(str(fix / "VP_VULKANINFO_lavapipe.json")))
    paravirt = profiles.load("vulkan-paravirt")
    said = [f"arms vm-stock, vm-unlocked: simulate:{paravirt.source}: {f.message}"
            for f in profiles.check_against_device(paravirt, device) if f.severity == "warn"]
    higher = khronos.derive(khronos.read(str(fix / "h200-capture.json")), device)[1]
    name = device["device"]["name"]
    beyond = warning_lines([Finding("--profile", higher, "VK_LAYER_CAPSHIM_app", b, name)
                            for b in beyond_device(higher, device)])
    text = "\n".join(
        [messages.format_message(m, "warning", 80) for m in said + beyond]
        + [messages.format_message(plan.CPU_NOTE.format(device=name), "note", 80),
           messages.format_message("the machine is busy (load 8.56 > 2 cores): runs like this one are flagged "
                                   "contaminated; the output counts them once", "note", 80)]) + "\n"
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "and 61 more (capshim --verbose lists each)" in text or "64 extensions" in text
    _check_golden("common-warnings-80.txt", text)


def test_answers_are_shown_in_the_profiles_notation():
    """A CUDA compute capability reads "7.5" as in the profiles, not 75 (probe tables, no-effect lines)."""
    from capshim import probe
    from capshim.profiles.model import format_answer

    assert format_answer("cuda", "computeCapability", 75) == "7.5"
    assert format_answer("vulkan", "shaderFloat16", 0) == "false"
    assert format_answer("vulkan", "apiVersion", (1 << 22) | (3 << 12) | 230) == "1.3.230"
    assert format_answer("vulkan", "maxComputeSharedMemorySize", 24576) == 24576
    assert format_answer("nosuch", "key", 7) == 7
    assert probe._fmt(90, "computeCapability") == "9.0" and probe._fmt(132, "multiProcessorCount") == "132"


def test_profile_check_and_evidence_verify_lines_fit_80_columns():
    """`profile check` described each answer on one line (up to 326 characters) and `evidence verify`
    said 'ok:' in 95: both are wrapped between words as messages are (messages.wrap_out)."""
    from tests.conftest import REPO, run_capshim

    for args in (["profile", "check", "t4-class"], ["profile", "check", "vulkan-paravirt"],
                 ["evidence", "verify", str(REPO / "evidence" / "h200-ablate-tinyllama")]):
        r = run_capshim(*args, env={"COLUMNS": "80", "CAPSHIM_MESSAGE_WIDTH": ""}, timeout=300)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines and all(len(line) <= 80 for line in lines), r.stdout
        first = ("sealed, not signed:", "signed by ") if args[0] == "evidence" else ("ok: ",)
        assert lines[0].startswith(first), r.stdout
        assert all(line.startswith((*first, "  ", "not sealed:")) for line in lines), r.stdout
    assert "every nested bundle verifies" in " ".join(r.stdout.split())


def test_verbose_is_one_option_taken_before_or_after_any_command(monkeypatch):
    """``capshim --verbose CMD`` and ``capshim CMD --verbose`` (a group's command too) both turn it on;
    one definition serves every command (cli.suggest.VERBOSE), and a command without it leaves it on."""
    import click
    from click.testing import CliRunner

    from capshim.cli.app import main
    from capshim.cli.suggest import VERBOSE

    seen = []
    monkeypatch.setattr(messages, "set_verbose", lambda on: seen.append(on))
    for argv in (["--verbose", "profiles"], ["profiles", "--verbose"], ["profile", "show", "--verbose", "t4-class"],
                 ["profile", "--verbose", "show", "t4-class"], ["db", "list", "--verbose", "--help"]):
        seen.clear()
        r = CliRunner().invoke(main, argv)
        assert r.exit_code == 0, (argv, r.output)
        assert seen == [True], argv
    seen.clear()
    assert CliRunner().invoke(main, ["profiles"]).exit_code == 0 and seen == []
    for name in ("profiles", "bench", "db"):
        cmd = main.get_command(click.Context(main), name)
        assert [p for p in cmd.params if p.name == "verbose"] == [VERBOSE], name
