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


@pytest.mark.parametrize("folder", ["/", "HOME/", "HOME"])
def test_folder_as_program_is_refused(home, folder):
    """`launchagent install --dry-run -- /some/folder/`: exit 2, as `capshim run` refuses a folder."""
    folder = folder.replace("HOME", str(home))
    r = CliRunner().invoke(main, ["launchagent", "install", "--dry-run", "--profile", "metal-apple9",
                                  "--label", "com.example.x", "--", folder])
    assert r.exit_code == 2 and "it is a folder, not a program" in r.output, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


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


# ---- the plist as macOS reads it (issue 11 item 3) ----------------------------

ODD_ARGS = ["/Applications/My Tools/llama server", "-m", "/Users/Zoë/Models/模型 \"q4\" it's.gguf",
            "--prompt", "say \"hi\" & <bye>", ""]


def _dry_run(label: str, argv: list[str]):
    return CliRunner().invoke(main, ["launchagent", "install", "--dry-run", "--profile", "metal-apple9",
                                     "--label", label, "--", *argv])


@pytest.mark.parametrize("home_name", ["plain", "with space", "ünï cödé", "quo\"te's"])
def test_dry_run_plist_reads_back_as_macos_reads_it(tmp_path, monkeypatch, home_name):
    home = tmp_path / home_name
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    r = _dry_run("com.example.llama-2_b", ODD_ARGS)
    assert r.exit_code == 0, r.output
    text = r.stdout[r.stdout.index("<?xml"):].encode()
    assert launchagent.check_plist(text, "com.example.llama-2_b") == []
    data = plistlib.loads(text)
    assert data["ProgramArguments"] == ODD_ARGS  # spaces, unicode, quotes, empty argument kept
    env = data["EnvironmentVariables"]
    assert all(isinstance(v, str) for v in env.values())
    installed = home / "Library/Application Support/capshim/launchagents/com.example.llama-2_b"
    assert env["DYLD_INSERT_LIBRARIES"] == str(installed / "libcapshim-metal.dylib")
    assert data["StandardErrorPath"] == str(home / "Library/Logs/capshim/com.example.llama-2_b.err.log")
    assert not (home / "Library").exists()


@pytest.mark.parametrize("label", ["com.example.my agent", "com.exämple.llama", "com.example.\"q\"",
                                   "com.example.it's", "../evil"])
def test_dry_run_refuses_odd_labels_naming_the_flag(home, label):
    r = _dry_run(label, ["/opt/x"])
    assert r.exit_code == 2 and "--label" in r.stderr and "Traceback" not in r.output
    assert not (home / "Library").exists()


def test_dry_run_refuses_arguments_a_plist_cannot_carry(home):
    r = _dry_run("L", ["/opt/x", "bell\x07"])
    assert r.exit_code == 2 and "plist key ProgramArguments: a control character" in r.stderr
    r = _dry_run("L", ["/opt/x", "cr\rlf"])
    assert r.exit_code == 2 and "does not read back as written" in r.stderr
    assert "Traceback" not in r.output


def test_check_plist_names_each_problem(home):
    good = launchagent.plist_dict(profiles.load("metal-apple9"), "L", ["/opt/x"], cwd="/srv")
    assert launchagent.check_plist(launchagent.plist_bytes(good), "L") == []
    bad = dict(good, ProgramArguments=["relative/x"], WorkingDirectory="srv", Extra=1,
               EnvironmentVariables={**good["EnvironmentVariables"], "CAPSHIM_QUIET": 0,
                                     "DYLD_INSERT_LIBRARIES": "/tmp/other.dylib"})
    del bad["Label"]
    problems = launchagent.check_plist(launchagent.plist_bytes(bad), "L")
    assert "Label: missing (required)" in problems
    assert "ProgramArguments[0]: 'relative/x' is not an absolute path" in problems
    assert "WorkingDirectory: 'srv' is not an absolute path" in problems
    assert "Extra: not a key capshim writes" in problems
    assert "EnvironmentVariables: not strings: CAPSHIM_QUIET" in problems
    assert any(p.startswith("EnvironmentVariables.DYLD_INSERT_LIBRARIES: '/tmp/other.dylib'")
               for p in problems)
    assert launchagent.check_plist(launchagent.plist_bytes(dict(good, ProgramArguments=[])), "L") == [
        "ProgramArguments: must be a non-empty list of strings"]
    assert launchagent.check_plist(b"<plist", "L")[0].startswith("not a readable plist")
