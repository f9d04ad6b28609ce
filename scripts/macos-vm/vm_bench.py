#!/usr/bin/env python3
"""The Python steps of .github/workflows/macos-vm-bench.yml: the seed experiment on GitHub's
Apple-silicon runners (macOS VMs on Apple's Virtualization framework, GPU "Apple Paravirtual
device"). docs/macos-vm.md is the page for users; tests/test_macos_vm.py runs these steps on
Linux (the capture check against the Metal stand-in's real probe output, the bench and summary
steps on Vulkan arms, the Metal arms' options and profiles against capshim's own).

Subcommands (each prints what it does; exit 2 on bad input, one line):

  check-capture CAPTURE [--profile metal-paravirt] [--summary FILE]
      Compare a stock capture (``capshim probe --api metal --json``) with the built-in
      profile of the paravirtual device. A difference is a result (exit 0), said in the
      job summary: the runner image answers other than the public facts.
  model [--preset tiny]
      Write (once) the synthetic GGUF model and print ``MODEL=PATH`` (for $GITHUB_ENV).
  bench --out DIR [--arm NAME=SPEC ...] [-r N] [-- COMMAND ...]
      ``capshim bench`` with a stock arm and a shimmed arm under an M1-class ceiling
      (default arms: stock=, m1-ceiling=profile:metal-apple7), the correctness gate on.
      Exit 0 whenever the bundle is sealed and verifies: an arm that fails, stays inert or
      gives wrong output is a result (the summary says which), not a failed job. Exit 1
      when no sealed bundle came out of it.
  summary BUNDLE... [--capture CAPTURE] [--compare FILE ...] [--summary FILE]
      Append the capture check, what each profile changes (``probe --compare --json``), each
      bundle's table (``capshim report --format md``) and one line per arm
      that is not a result (wrong output, failed, inert, ...) to the job summary
      ($GITHUB_STEP_SUMMARY, else stdout). Exit 1 when a bundle is missing or does not
      verify (the summary says which), so a broken run is never a green job.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

#: The default arms: the paravirtual device as it is, and an M1-class ceiling (never above the
#: runner's host, GitHub's M1 machines; docs/macos-vm.md says why not metal-apple9).
DEFAULT_ARMS = ("stock=", "m1-ceiling=profile:metal-apple7")
#: The built-in profile of the paravirtual device (the public facts, with sources).
PARAVIRT_PROFILE = "metal-paravirt"
#: Recorded processes per arm by default (a run of the tiny model takes seconds on the runner).
DEFAULT_REPETITIONS = 5
#: States of summary.json arms that are a result of the shim, not of the device's speed.
NOT_RESULT_STATES = ("inert", "invalid", "failed", "wrong-output", "cpu-backend", "off-device")


def _capshim(*args: str, **kw) -> subprocess.CompletedProcess:
    """``python -m capshim.cli ARGS`` with this interpreter (the installed or PYTHONPATH capshim)."""
    return subprocess.run([sys.executable, "-m", "capshim.cli", *args], **kw)


def _say(msg: str) -> None:
    print(f"vm_bench: {msg}", file=sys.stderr, flush=True)


def _append(summary: str | None, text: str) -> None:
    """Append Markdown to the job summary file, or print it when there is none."""
    if summary:
        try:
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(text if text.endswith("\n") else text + "\n")
        except OSError as exc:  # one line, exit 2: the summary file is the step's output
            print(f"vm_bench: error: cannot write the job summary {summary}: {exc.strerror}", file=sys.stderr)
            raise SystemExit(2) from None
    else:
        print(text)


def _fail(msg: str) -> int:
    print(f"vm_bench: error: {msg}", file=sys.stderr)
    return 2


# ---- check-capture -------------------------------------------------------------------------

def capture_lines(capture_path: str, profile_ref: str = PARAVIRT_PROFILE) -> tuple[list[str], bool]:
    """Compare a capture's stock answers with a Metal profile of the paravirtual device.

    Returns:
        (Markdown lines, whether every compared answer matches). Compared: the highest Apple
        family (the profile's ``appleFamilyMax``), ``maxThreadgroupMemoryLength``, and that no
        Metal family (Metal3 = 5001 and up) is answered.

    Raises:
        JsonShapeError: the capture is unreadable or not a Metal capture (names the file).
        CapshimError: the profile cannot be loaded.
    """
    from capshim import profiles
    from capshim.profiles import metalhost

    cap = metalhost.read_capture(capture_path)
    prof = profiles.load(profile_ref)
    want = {"Apple family": prof.capabilities.get("appleFamilyMax"),
            "threadgroup memory (bytes)": prof.capabilities.get("maxThreadgroupMemoryLength"),
            "highest Metal family": None}
    have = {"Apple family": cap.apple_family, "threadgroup memory (bytes)": cap.threadgroup,
            "highest Metal family": cap.highest.get("metal")}
    vm = cap.os.get("vm")
    lines = [f"### The paravirtual device's stock answers ({cap.label()}, VM: "
             f"{'yes' if vm else 'no' if vm is False else 'unknown'})", "",
             f"| answer | this runner | `{prof.name}` |", "|---|---:|---:|"]
    same = True
    for key, w in want.items():
        h = have[key]
        mark = "" if h == w else " (differs)"
        same = same and h == w
        lines.append(f"| {key} | {'none' if h is None else h}{mark} | {'none' if w is None else w} |")
    lines.append("")
    lines.append(f"The runner answers as `{prof.name}` says." if same else
                 f"**The runner answers other than `{prof.name}`** (a result: the image or Apple's "
                 "paravirtual driver changed; the profile's sources are in its comments).")
    if vm is False:
        lines.append("Note: this capture says it was not made in a VM (kern.hv_vmm_present = 0).")
    return lines, same


def cmd_check_capture(args) -> int:
    from capshim.errors import CapshimError

    try:
        lines, same = capture_lines(args.capture, args.profile)
    except CapshimError as exc:
        return _fail(str(exc))
    _append(args.summary, "\n".join(lines) + "\n")
    _say(f"capture {args.capture}: {'matches' if same else 'differs from'} {args.profile}")
    return 0


# ---- model ------------------------------------------------------------------------------------

def cmd_model(args) -> int:
    from capshim.bench.workloads.builtin import resolve_model
    from capshim.errors import CapshimError

    try:
        path = resolve_model(args.preset)
    except CapshimError as exc:
        return _fail(str(exc))
    print(f"MODEL={path}")
    return 0


# ---- bench ------------------------------------------------------------------------------------

def bench_argv(out: str, arms: list[str] | None = None, repetitions: int = DEFAULT_REPETITIONS,
               command: list[str] | None = None) -> list[str]:
    """The ``capshim bench`` arguments of one bench (without ``capshim bench`` itself).

    Args:
        out: the bundle folder (new or empty).
        arms: ``--arm`` values (default :data:`DEFAULT_ARMS`); the first is the baseline.
        repetitions: recorded processes per arm.
        command: a workload command (``llama-bench ...``); None runs the built-in llama.cpp
            workload (cyllama, the synthetic ``tiny`` model), whose generated tokens the
            correctness gate compares.
    """
    argv = []
    for arm in arms or DEFAULT_ARMS:
        argv += ["--arm", arm]
    argv += ["--check-output", "-r", str(repetitions), "--out", out]
    if command:
        argv += ["--", *command]
    else:
        argv += ["--model", "tiny"]
    return argv


def verify_bundle(bundle: str | Path) -> tuple[bool, str]:
    """(whether ``bundle`` is a sealed bundle that verifies, capshim's message)."""
    if not (Path(bundle) / "summary.json").is_file():
        return False, f"{bundle}: no summary.json (the bench did not get to write its bundle)"
    r = _capshim("evidence", "verify", str(bundle), capture_output=True, text=True)
    return r.returncode == 0, (r.stdout + r.stderr).strip()


def cmd_bench(args) -> int:
    argv = bench_argv(args.out, args.arm, args.repetitions, args.command)
    _say("$ capshim bench " + shlex.join(argv))
    rc = _capshim("bench", *argv).returncode
    ok, msg = verify_bundle(args.out)
    if not ok:
        _say(f"capshim bench exited {rc} and left no sealed bundle: {msg}")
        return 1
    if rc != 0:  # failed runs (1), strict (3), finalize (5): recorded in the sealed bundle
        _say(f"capshim bench exited {rc}; the bundle is sealed and verifies: the summary step reports it")
    return 0


# ---- summary ----------------------------------------------------------------------------------

def arm_lines(summary: dict) -> list[str]:
    """One Markdown line per arm that is not a result (wrong output, failed, inert ...), and the
    correctness gate's word for every arm."""
    lines = []
    for name, info in summary.get("arms", {}).items():
        state = info.get("state")
        check = info.get("output_check")
        word = f"`{name}`: {state}" + (f"; output check: {check}" if check else "")
        if state == "wrong-output":
            lines.append(f"- **wrong output under the shim** — {word} (a result of this run, "
                         "not hidden: see docs/macos-vm.md, known failures)")
        elif state in NOT_RESULT_STATES:
            lines.append(f"- **not a result** — {word}")
        else:
            lines.append(f"- {word}")
    return lines


def compare_lines(compare_path: str) -> list[str]:
    """Markdown of one ``capshim probe --api metal --compare --profile P --json`` result: what the
    shim changed (answer, stock, shimmed) and its state.

    Raises:
        JsonShapeError: unreadable, not JSON, or without ``profile``/``differences`` (names the file).
    """
    from capshim import jsonread

    data = jsonread.load(compare_path, limit=1 << 20)
    if not isinstance(data, dict) or not isinstance(data.get("differences"), list) or "profile" not in data:
        raise jsonread.JsonShapeError(f"{compare_path}: not a probe --compare result (no profile, differences)")
    lines = [f"### What `{data['profile']}` changes (shim {data.get('status', '?')})", ""]
    if not data["differences"]:
        return lines + ["No answer differs.", ""]
    lines += ["| answer | stock | shimmed |", "|---|---:|---:|"]
    for d in data["differences"]:
        lines.append(f"| {d.get('answer')} | {json.dumps(d.get('stock'))} | {json.dumps(d.get('shimmed'))} |")
    return lines + [""]


def cmd_summary(args) -> int:
    from capshim.errors import CapshimError

    bad = 0
    parts = ["## capshim: the seed experiment on this runner", ""]
    if args.capture:
        try:
            parts += capture_lines(args.capture)[0] + [""]
        except CapshimError as exc:
            parts += [f"No usable capture: {exc}", ""]
    for path in args.compare or []:
        try:
            parts += compare_lines(path)
        except CapshimError as exc:
            parts += [f"No usable comparison: {exc}", ""]
    for bundle in args.bundles:
        ok, msg = verify_bundle(bundle)
        parts.append(f"### {bundle}")
        parts.append("")
        if not ok:
            bad += 1
            parts += [f"**No sealed bundle**: {msg}", ""]
            continue
        r = _capshim("report", str(bundle), "--format", "md", capture_output=True, text=True)
        parts.append(r.stdout.strip() if r.returncode == 0 else f"(capshim report failed: {r.stderr.strip()})")
        parts.append("")
        summary = json.loads((Path(bundle) / "summary.json").read_text())
        parts += arm_lines(summary) + [""]
    _append(args.summary, "\n".join(parts))
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="vm_bench.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    summary_default = os.environ.get("GITHUB_STEP_SUMMARY") or None
    p = sub.add_parser("check-capture", help="compare a stock capture with metal-paravirt")
    p.add_argument("capture")
    p.add_argument("--profile", default=PARAVIRT_PROFILE)
    p.add_argument("--summary", default=summary_default)
    p = sub.add_parser("model", help="write the synthetic model, print MODEL=PATH")
    p.add_argument("--preset", default="tiny")
    p = sub.add_parser("bench", help="capshim bench, stock and M1-class ceiling arms, gate on")
    p.add_argument("--out", required=True)
    p.add_argument("--arm", action="append", help=f"NAME=SPEC (default: {' '.join(DEFAULT_ARMS)})")
    p.add_argument("-r", "--repetitions", type=int, default=DEFAULT_REPETITIONS)
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ... (default: the built-in workload)")
    p = sub.add_parser("summary", help="tables and arm states into the job summary")
    p.add_argument("bundles", nargs="*")
    p.add_argument("--capture")
    p.add_argument("--compare", action="append", help="a probe --compare --json result (repeatable)")
    p.add_argument("--summary", default=summary_default)
    args = ap.parse_args(argv)
    if args.cmd == "bench":
        args.command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if args.repetitions < 1:
            return _fail(f"-r {args.repetitions}: at least 1")
    return {"check-capture": cmd_check_capture, "model": cmd_model, "bench": cmd_bench,
            "summary": cmd_summary}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
