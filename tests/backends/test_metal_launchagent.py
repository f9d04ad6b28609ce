"""LaunchAgent plists for one shimmed program, and the refusals on Linux."""

import plistlib

import pytest
from click.testing import CliRunner

from capshim import launchagent, profiles
from capshim.cli import main
from capshim.errors import UsageError


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_plist_sets_the_injection_for_that_program_only(home):
    data = launchagent.plist_dict(profiles.load("metal-apple9"), "com.example.llama",
                                  ["/opt/llama/llama-server", "-m", "model.gguf"], cwd="/srv")
    agent = home / "Library/Application Support/capshim/launchagents/com.example.llama"
    assert data["Label"] == "com.example.llama"
    assert data["ProgramArguments"] == ["/opt/llama/llama-server", "-m", "model.gguf"]
    assert data["EnvironmentVariables"] == {
        "DYLD_INSERT_LIBRARIES": str(agent / "libcapshim-metal.dylib"),
        "CAPSHIM_METAL_APPLE_FAMILY_MAX": "1009",
        "CAPSHIM_METAL_MAX_THREADGROUP_MEMORY": "65536",
        "CAPSHIM_STATUS_FILE": str(home / "Library/Logs/capshim/com.example.llama.status.jsonl"),
        "CAPSHIM_QUIET": "0", "CAPSHIM_INHERIT": "0"}
    assert data["WorkingDirectory"] == "/srv" and data["RunAtLoad"] is True
    assert data["StandardErrorPath"].endswith("Library/Logs/capshim/com.example.llama.err.log")
    assert plistlib.loads(launchagent.plist_bytes(data)) == data


def test_commands_never_use_setenv():
    cmds = launchagent.install_commands("/h/Library/LaunchAgents/L.plist", "L", 501)
    assert cmds == [["plutil", "-lint", "/h/Library/LaunchAgents/L.plist"],
                    ["launchctl", "bootout", "gui/501/L"],
                    ["launchctl", "bootstrap", "gui/501", "/h/Library/LaunchAgents/L.plist"]]
    assert launchagent.uninstall_commands("L", 501) == [["launchctl", "bootout", "gui/501/L"]]
    flat = [w for c in cmds + launchagent.uninstall_commands("L", 1) for w in c]
    assert "setenv" not in flat


@pytest.mark.parametrize("label", ["", "has space", "a/b", "-lead", "x" * 129])
def test_bad_labels_name_the_flag(label):
    with pytest.raises(UsageError, match="--label"):
        launchagent.check_label(label)


def test_relative_program_resolved_or_refused(home):
    data = launchagent.plist_dict(profiles.load("metal-apple9"), "L", ["sh", "-c", "true"])
    assert data["ProgramArguments"][0].startswith("/") and data["ProgramArguments"][0].endswith("/sh")
    with pytest.raises(UsageError, match="PROGRAM 'no-such-prog-xyz'"):
        launchagent.plist_dict(profiles.load("metal-apple9"), "L", ["no-such-prog-xyz"])
    with pytest.raises(UsageError, match="give the program after '--'"):
        launchagent.plist_dict(profiles.load("metal-apple9"), "L", [])


def test_cli_dry_run_prints_the_plist_and_writes_nothing(home):
    r = CliRunner().invoke(main, ["launchagent", "install", "--dry-run", "--profile", "metal-apple9",
                                  "--label", "com.example.llama", "--",
                                  "/opt/llama/llama-server", "-m", "model.gguf"])
    assert r.exit_code == 0, r.output
    start = r.stdout.index("<?xml")
    data = plistlib.loads(r.stdout[start:].encode())
    assert data["ProgramArguments"] == ["/opt/llama/llama-server", "-m", "model.gguf"]
    assert "launchctl bootstrap gui/" in r.stderr
    assert not (home / "Library").exists()


def test_cli_refuses_without_dry_run_on_linux(home):
    r = CliRunner().invoke(main, ["launchagent", "install", "--profile", "metal-apple9",
                                  "--label", "L", "--", "/opt/x"])
    assert r.exit_code == 2
    assert "LaunchAgents exist only on macOS" in r.stderr and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["launchagent", "uninstall", "--label", "L"])
    assert r.exit_code == 2 and "only on macOS" in r.stderr
    assert not (home / "Library").exists()


def test_cli_rejects_vulkan_profile(home):
    r = CliRunner().invoke(main, ["launchagent", "install", "--dry-run", "--profile",
                                  "vulkan-paravirt", "--label", "L", "--", "/opt/x"])
    assert r.exit_code == 2 and "--profile vulkan-paravirt" in r.stderr
