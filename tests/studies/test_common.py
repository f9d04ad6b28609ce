"""The studies' shared rules: one study folder, one seal guard, one seal, exit codes and names.

Most tests run the commands with a stand-in bench: either the one seam (``common.run_arms``)
replaced, or, for the signal tests, the bench behind the seam (``plan.make_plan`` and
``runner.run``), so that the seam's own handling of signals runs. Signals are raised in
this process (``signal.raise_signal``), at the moments that used to lose the seal.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from capshim import evidence, profiles, report
from capshim.bench import model as model_mod
from capshim.bench import plan, runner
from capshim.cli import main
from capshim.contracts import folders, names, signals
from capshim.evidence import study as seal
from capshim.studies import ablate, common, kernels, tune
from tests.conftest import REPO, default_signals, wait_for
from tests.studies.test_ablate import GPU_STOCK, fake_bench
from tests.studies.test_kernels import GOOD, OK_RUN, _fake_run_arms
from tests.studies.test_tune import CPU_STOCK, _lavapipe_like


def _sealing_bench(run_arms):
    """``run_arms`` that also seals a real (empty) evidence bundle in the folder it was given."""
    def wrapped(specs, out, **kw):
        m = run_arms(specs, out, **kw)
        evidence.Bundle.create(out, metadata={}, exist_ok=True).finalize(
            report.bundle_steps([], {"native": {"state": "native"}}, "native"))
        return m
    return wrapped


def _fake_tune(monkeypatch):
    monkeypatch.setattr(common, "stock_probe", lambda api=None: (CPU_STOCK, CPU_STOCK["device"]))
    monkeypatch.setattr(common, "run_arms", _sealing_bench(fake_bench(_lavapipe_like)))


# --- one study folder -----------------------------------------------------------------------------------

def test_two_studies_started_in_the_same_second_get_two_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(folders.time, "strftime", lambda fmt, *a: "20261201-120000")  # the same second
    _fake_tune(monkeypatch)
    first, second = tune.tune(), tune.tune()
    assert (first["out"], second["out"]) == ("capshim-tune-20261201-120000", "capshim-tune-20261201-120000-2")
    for res in (first, second):
        assert seal.verify(res["out"]) == [] and json.loads((tmp_path / res["out"] / "tune.json").read_text()) == res


def test_out_inside_a_sealed_study_or_bundle_is_exit_2_and_writes_nothing(tmp_path, monkeypatch):
    _fake_tune(monkeypatch)
    sealed = tmp_path / "t"
    tune.tune(out=sealed)
    before = sorted(p.relative_to(sealed) for p in sealed.rglob("*"))
    for cmd, inner in (("tune", sealed / "inner"), ("ablate", sealed / "stage-1" / "inner"),
                       ("kernels", sealed / "candidates" / "x")):
        r = CliRunner().invoke(main, [cmd, "--out", str(inner)])
        assert r.exit_code == 2, r.output
        assert "inside the sealed folder" in r.output and "Traceback" not in r.output
        assert not inner.exists()
    assert sorted(p.relative_to(sealed) for p in sealed.rglob("*")) == before and seal.verify(sealed) == []


def test_a_refused_study_leaves_no_folder_and_an_existing_empty_one_stays(tmp_path, monkeypatch):
    _fake_tune(monkeypatch)
    with pytest.raises(Exception, match="--test tg999"):
        tune.tune(out=tmp_path / "new", test="tg999")
    assert not (tmp_path / "new").exists()  # created for the study, removed: nothing was written
    with pytest.raises(Exception, match="--test tg999"):
        tune.tune(out=tmp_path / "a" / "b" / "c", test="tg999")
    assert not (tmp_path / "a").exists()  # the parents it made too
    (tmp_path / "mine").mkdir()
    with pytest.raises(Exception, match="--test tg999"):
        tune.tune(out=tmp_path / "mine", test="tg999")
    assert (tmp_path / "mine").is_dir() and os.listdir(tmp_path / "mine") == []  # the user's folder stays


def test_the_defaults_are_one_table_the_studies_and_their_help_read(monkeypatch):
    from capshim.studies import defaults

    shared = ("warmup", "n_prompt", "n_gen")  # ablate and tune share these options (and their help)
    for where in ("cpu", "gpu"):
        assert {k: defaults.DEFAULTS["tune"][where][k] for k in shared} == \
            {k: defaults.DEFAULTS["ablate"][where][k] for k in shared}
    assert common.defaults("tune", CPU_STOCK["device"]) == defaults.DEFAULTS["tune"]["cpu"]
    assert common.defaults("ablate", GPU_STOCK["device"]) == defaults.DEFAULTS["ablate"]["gpu"]
    assert (kernels.N_PROMPT, kernels.N_GEN) == (64, 4) == tuple(defaults.DEFAULTS["kernels"]["any"].values())
    text = " ".join(CliRunner().invoke(main, ["tune", "--help"], terminal_width=200).output.split())
    assert "Candidates to try [default: 8 on a GPU, 4 on a CPU device]" in text
    assert "Prompt tokens [default: 512 on a GPU, 64 on a CPU device]" in text
    assert "(doubled each stage) [default: 2]" in text
    assert "-2, -3 ... when taken" in text


def test_an_empty_out_or_a_comma_in_a_path_the_bench_cannot_spell_is_exit_2_before_anything(tmp_path, monkeypatch):
    _fake_tune(monkeypatch)
    monkeypatch.chdir(tmp_path)
    for cmd in ("ablate", "tune", "kernels"):
        r = CliRunner().invoke(main, [cmd, "--out", ""])
        assert r.exit_code == 2 and "--out: an empty path" in r.output, r.output
        r = CliRunner().invoke(main, [cmd, "--out", "runs/a,b"])
        assert r.exit_code == 2 and "--out runs/a,b: a ',' in the path" in r.output, r.output
    shutil.copy(REPO / "src" / "capshim" / "profiles" / "builtin" / "vulkan-paravirt.toml", tmp_path / "p,q.toml")
    r = CliRunner().invoke(main, ["kernels", "--model", "tiny", "--profile", "./p,q.toml", "--out", "k"])
    assert r.exit_code == 2 and "--profile ./p,q.toml: a ',' in the path" in r.output, r.output
    assert os.listdir(tmp_path) == ["p,q.toml"]  # no folder, no default folder either


# --- signals and the seal -----------------------------------------------------------------------------

def _fake_bench_behind_the_seam(monkeypatch, first: signal.Signals, during_bundle_seal=(), calls=None):
    """Replace the bench behind :func:`common.run_arms`: the runs are stopped by ``first`` (raised while
    they run, as the runner sees Ctrl-C), then the bundle is sealed under its own (nested) guard while
    ``during_bundle_seal`` signals arrive. Returns what the runner returns for an interrupted bench."""
    def make_plan(req, *a, **k):
        return SimpleNamespace(workload=SimpleNamespace(env={}), device={"name": "Fake"}, out=req.out)

    def execute(p):
        out = Path(p.out)
        if calls is not None:
            calls.append(out.name)
        try:
            signal.raise_signal(first)
            pytest.fail("the first signal did not stop the runs")
        except KeyboardInterrupt as exc:  # what the runner catches
            how = getattr(exc, "signal_name", "SIGINT")
        with signals.SealGuard():  # the bench's own seal guard, nested in the study's
            for s in during_bundle_seal:
                signal.raise_signal(s)
            evidence.Bundle.create(out, metadata={}).finalize(
                report.bundle_steps([], {"native": {"state": "native"}}, "native"), interrupted=True)
        return SimpleNamespace(interrupted=True, interrupted_by=how, bundle=out, failed_runs=0)

    monkeypatch.setattr(plan, "make_plan", make_plan)
    monkeypatch.setattr(runner, "run", execute)


def _signals_during_the_study_seal(monkeypatch, *sigs):
    real = seal.seal_quietly

    def seal_quietly(root, kind, error):
        for s in sigs:
            signal.raise_signal(s)
        real(root, kind, error)
    monkeypatch.setattr(seal, "seal_quietly", seal_quietly)


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_repeated_stop_signals_in_tune_never_lose_the_seal(tmp_path, monkeypatch, sig, code):
    # double Ctrl-C (or a burst of SIGTERMs): one stops the runs, the next ones arrive while the
    # stage's bundle is sealed and while the study is sealed; both seals are written, exit 128+N
    monkeypatch.setattr(common, "stock_probe", lambda api=None: (CPU_STOCK, CPU_STOCK["device"]))
    calls = []
    _fake_bench_behind_the_seam(monkeypatch, sig, during_bundle_seal=(sig, sig), calls=calls)
    _signals_during_the_study_seal(monkeypatch, sig, sig, sig)
    out = tmp_path / "t"
    r = CliRunner().invoke(main, ["tune", "--out", str(out)])
    assert r.exit_code == code, r.output
    assert calls == ["stage-1"]  # nothing more started after the stop
    assert seal.verify(out) == [] and evidence.verify(out / "stage-1") == []
    doc = json.loads((out / "study.json").read_text())
    assert doc["complete"] is False and f"interrupted ({sig.name})" in doc["error"]


def test_sighup_stops_every_study_with_129_as_bench_does(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "stock_probe", lambda api=None: (GPU_STOCK, GPU_STOCK["device"]))
    _fake_bench_behind_the_seam(monkeypatch, signal.SIGHUP)
    for cmd, extra in (("ablate", []), ("tune", []), ("kernels", ["--model", "tiny"])):
        if cmd == "tune":
            monkeypatch.setattr(common, "stock_probe", lambda api=None: (CPU_STOCK, CPU_STOCK["device"]))
        out = tmp_path / cmd
        r = CliRunner().invoke(main, [cmd, *extra, "--out", str(out)])
        assert r.exit_code == 129, (cmd, r.output)
        assert "interrupted (SIGHUP)" in r.output and seal.verify(out) == []


def test_once_a_study_is_stopping_a_later_signal_cannot_end_it_before_its_exit_code(tmp_path, monkeypatch):
    """Hostile pass: kernels, Ctrl-C then SIGHUP 0.1-0.5 s later, died by the default HUP action after
    the seal instead of exiting 130: the guard's handlers were gone before capshim exited."""
    monkeypatch.setattr(common, "stock_probe", lambda api=None: (GPU_STOCK, GPU_STOCK["device"]))
    _fake_bench_behind_the_seam(monkeypatch, signal.SIGINT)
    before = signal.getsignal(signal.SIGHUP)
    try:
        r = CliRunner().invoke(main, ["kernels", "--model", "tiny", "--out", str(tmp_path / "k")])
        assert r.exit_code == 130, r.output
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN  # until the process exits
    finally:
        signal.signal(signal.SIGHUP, before)


def test_a_signal_before_the_first_bench_starts_none_and_seals(tmp_path, monkeypatch):
    def probe_then_hangup(api=None):
        signal.raise_signal(signal.SIGHUP)  # the terminal closes while the device is probed
        return GPU_STOCK, GPU_STOCK["device"]

    calls = []
    monkeypatch.setattr(common, "stock_probe", probe_then_hangup)
    _fake_bench_behind_the_seam(monkeypatch, signal.SIGINT, calls=calls)
    out = tmp_path / "a"
    r = CliRunner().invoke(main, ["ablate", "--out", str(out)])
    assert r.exit_code == 129 and calls == [], r.output
    assert "ablate stopped (SIGHUP)" in r.output
    assert (out / "profiles" / "sim.toml").is_file() and seal.verify(out) == []  # what was written is sealed


def test_a_signal_after_the_last_bench_lets_the_study_finish_then_exits_128_plus_n(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "stock_probe", lambda api=None: (GPU_STOCK, GPU_STOCK["device"]))
    monkeypatch.setattr(common, "run_arms", _sealing_bench(fake_bench(lambda n, w, t, r: [1000.0 + i for i in range(r)])))
    real_chart = ablate.chart

    def chart_then_sigterm(*a, **k):
        signal.raise_signal(signal.SIGTERM)  # during the chart, a slow optional step
        return real_chart(*a, **k)

    monkeypatch.setattr(ablate, "chart", chart_then_sigterm)
    out = tmp_path / "a"
    r = CliRunner().invoke(main, ["ablate", "-r", "3", "--out", str(out)])
    assert r.exit_code == 143, r.output
    doc = json.loads((out / "study.json").read_text())
    assert "complete" not in doc and (out / "ablation.json").is_file() and seal.verify(out) == []


def test_a_second_signal_during_the_chart_skips_it_and_still_seals(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "stock_probe", lambda api=None: (GPU_STOCK, GPU_STOCK["device"]))
    monkeypatch.setattr(common, "run_arms", _sealing_bench(fake_bench(lambda n, w, t, r: [1000.0 + i for i in range(r)])))

    def slow_chart(arms, summary, test, path, title):
        path.write_bytes(b"half a png")
        signal.raise_signal(signal.SIGINT)  # the first: waits
        signal.raise_signal(signal.SIGINT)  # the second: cuts this slow step short
        pytest.fail("the second Ctrl-C did not stop the chart")

    monkeypatch.setattr(ablate, "chart", slow_chart)
    out = tmp_path / "a"
    r = CliRunner().invoke(main, ["ablate", "-r", "3", "--out", str(out)])
    assert r.exit_code == 130 and "Traceback" not in r.output, r.output
    res = json.loads((out / "ablation.json").read_text())
    assert "chart not drawn: interrupted by SIGINT" in res["notes"] and not (out / "ablation.png").exists()
    assert "![chart]" not in (out / "ablation.md").read_text() and seal.verify(out) == []


def test_rule_options_must_be_finite_numbers(tmp_path):
    for opt in ("--recover", "--lower-bound"):
        for bad in ("nan", "inf"):
            r = CliRunner().invoke(main, ["ablate", opt, bad, "--out", str(tmp_path / "a")])
            assert r.exit_code == 2 and ("not a finite number" in r.output or "range" in r.output), r.output
            assert not (tmp_path / "a").exists()


@pytest.mark.slow
def test_double_ctrl_c_in_a_real_tune_seals_the_study(tmp_path, stock_probe):
    # a real tune on this machine's device: Ctrl-C twice once stage 1 has finished runs
    out = tmp_path / "t"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen([sys.executable, "-m", "capshim.cli", "tune", "--budget", "2", "-r", "3",
                             "--dims", "shmem", "-p", "16", "-n", "4", "--out", str(out)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals)
    raw = out / "stage-1" / "raw"
    wait_for(lambda: proc.poll() is not None or (raw.is_dir() and any(raw.glob("*.stderr"))), 600,
             "stage 1's first run")
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr
    assert seal.verify(out) == [], stderr[-3000:]
    doc = json.loads((out / "study.json").read_text())
    assert doc["complete"] is False and "SIGINT" in doc["error"]
    assert not (out / "stage-2").exists() and not (out / "confirm").exists()


# --- names ----------------------------------------------------------------------------------------------

def test_kernels_of_a_model_file_named_underscore_m_writes_a_study_that_verifies(tmp_path, monkeypatch):
    # the example: kernels --model ./_m.gguf wrote bench-_m/, which its own verify rejected
    monkeypatch.chdir(tmp_path)
    q8 = dataclasses.replace(model_mod.PRESETS["tiny"], name="m", matrix_type="Q8_0", embd_type="Q8_0",
                             output_type="Q8_0")
    model_mod.write_model(q8, tmp_path / "_m.gguf")
    monkeypatch.setattr(common, "run_arms", _sealing_bench(_fake_run_arms({
        ref: {"native": ("native", OK_RUN, GOOD), "sim-vulkan-paravirt": ("active", OK_RUN, GOOD)}
        for ref in ("tiny", "./_m.gguf")})))
    r = CliRunner().invoke(main, ["kernels", "--model", "tiny", "--model", "./_m.gguf", "-p", "16", "-n", "2",
                                  "--out", "k"])
    assert r.exit_code == 0, r.output
    res = json.loads((tmp_path / "k" / "kernels.json").read_text())
    assert [e["label"] for e in res["models"]] == ["tiny", "m"] and (tmp_path / "k" / "bench-m").is_dir()
    assert seal.verify(tmp_path / "k") == []
    r = CliRunner().invoke(main, ["evidence", "verify", str(tmp_path / "k")])
    assert r.exit_code == 0, r.output


def test_model_labels_are_valid_unique_names():
    taken: set[str] = set()
    got = [kernels.model_label(ref, taken) for ref in
           ("tiny", "./_m.gguf", "/x/_m.gguf", "/y/.hidden.gguf", "/z/___.gguf", "/w/a b+c\n.gguf", "/v/" + "x" * 90 + ".gguf")]
    assert got[:5] == ["tiny", "m", "m-2", "hidden", "model"] and got[5] == "a-b-c-"
    assert all(names.is_name(g) for g in got) and len(set(got)) == len(got)


def _long_profile(tmp_path, name: str, direction: str) -> str:
    base = profiles.load("vulkan-paravirt").to_dict()
    data = {"name": name, "api": "vulkan", "direction": direction, "version": 1, "description": "long name",
            "capabilities": base["capabilities"] if direction == "lower" else {"maxComputeSharedMemorySize": 65536}}
    path = tmp_path / f"{name[-8:]}-{direction}.toml"
    common.write_profile(path, data)
    return str(path)


def test_every_arm_and_profile_name_the_studies_make_is_a_valid_name(tmp_path, monkeypatch):
    long_a, long_b = "a" * 60 + "-one", "a" * 60 + "-two"  # 64 characters each, the longest a profile takes
    answers = kernels.answers_for([_long_profile(tmp_path, long_a, "lower"), _long_profile(tmp_path, long_b, "lower"),
                                   _long_profile(tmp_path, long_a, "raise")])
    arms = [a.arm for a in answers]
    assert all(names.is_name(a) for a in arms) and len(set(arms)) == len(arms) == 4
    for by in ("group", "key"):
        built, _ = ablate.build_arms(profiles.load("vulkan-paravirt"), GPU_STOCK, tmp_path / by, by=by)
        assert all(names.is_name(a.name) for a in built)
    dims = tune.dimensions(GPU_STOCK)
    assert all(names.is_name(f"c{i + 1:02d}") for i in range(len(tune.candidates(dims, 30, 1))))
    # a lowering profile with a 64-character name: the smallest raise profile's name is cut to fit
    monkeypatch.setattr(common, "stock_probe", lambda api=None: (GPU_STOCK, GPU_STOCK["device"]))
    monkeypatch.setattr(common, "run_arms", _sealing_bench(fake_bench(lambda n, w, t, r: [1000.0 + i for i in range(r)])))
    res = ablate.ablate(_long_profile(tmp_path, long_a, "lower"), out=tmp_path / "ab", repetitions=6, n_prompt=64,
                        n_gen=16)
    assert res["smallest"], res["notes"]
    written = profiles.load(res["smallest"]["profile"])
    assert written.name == f"smallest-raise-{long_a}"[:64] and names.is_name(written.name)
    assert seal.verify(tmp_path / "ab") == []
