"""``capshim host``: command construction (tested here) and the refusal off a
macOS host. The commands themselves only run on a Mac."""

import pytest
from click.testing import CliRunner

from capshim import host
from capshim.cli import main
from capshim.errors import UsageError

D = "com.apple.gpusw.ParavirtualizedGraphics"
K = "ForceUnrestrictedDeviceFeatureLevel"


def test_commands():
    assert host.command("status") == ["defaults", "read", D, K]
    assert host.command("enable") == ["defaults", "write", D, K, "-bool", "true"]
    assert host.command("disable") == ["defaults", "delete", D, K]
    with pytest.raises(UsageError):
        host.command("toggle")


def test_restart_hint_names_lume_only_when_present():
    assert "lume stop VM_NAME && lume run VM_NAME" in host.restart_hint(True)
    assert "lume" not in host.restart_hint(False)
    assert "start it again" in host.restart_hint(False)


@pytest.mark.parametrize("rc, out, value", [(0, "1\n", True), (0, "0\n", False), (1, "", None)])
def test_parse_value(rc, out, value):
    assert host.parse_value(rc, out) is value


def test_refuses_off_macos_and_inside_a_vm():
    with pytest.raises(UsageError, match="this is linux") as exc:
        host.check_host("linux")
    assert exc.value.exit_code == 2
    with pytest.raises(UsageError, match="kern.hv_vmm_present"):
        host.check_host("darwin", in_vm=True)
    host.check_host("darwin", in_vm=False)


@pytest.mark.parametrize("action", ["status", "enable", "disable"])
def test_cli_refusal_exit_2(action):
    r = CliRunner().invoke(main, ["host", action])
    assert r.exit_code == 2
    assert "runs on the macOS host" in r.stderr and "Traceback" not in r.output
