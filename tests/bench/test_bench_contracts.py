"""The shared contracts as the bench uses them (issue 18): names and run files, the seal guard,
exit codes, output folders, the environment, numbers and JSON from workloads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from capshim import evidence, paths
from capshim.bench import arms, llamabench
from capshim.bench.workloads import command
from capshim.errors import UsageError
from tests.conftest import default_signals, run_capshim, sleeping_pid, wait_for

REPO = Path(__file__).resolve().parents[2]
from tests.bench.test_bench_hostile import ROW, _w  # noqa: E402 (the one workload-script helper)


@pytest.mark.parametrize("option", ["a\n=", "a\n=stock", "a+b=", "-a=", "x" * 65 + "="])
def test_an_arm_name_is_a_whole_valid_name(option):
    with pytest.raises(UsageError, match="not a valid name"):
        arms.parse(option)


@pytest.mark.parametrize("value", ["c\n=true", "c+d=true", "=true"])
def test_a_control_name_is_a_whole_valid_name(value):
    with pytest.raises(UsageError, match="--control"):
        command.control_workload(value)


def _control_bench(tmp_path, out="b"):
    w = _w(tmp_path, "exit 0")
    ctl = _w(tmp_path, "exit 0", name="ctl")
    return run_capshim("bench", "--arm", "a=", "--arm", "a.c=", "--baseline", "a", "-r", "1", "--warmup", "0",
                       "--metric", "wall", "--control", f"c={ctl}", "--out", str(tmp_path / out), "--", str(w),
                       timeout=300, cwd=tmp_path)


@pytest.mark.slow
def test_arm_a_dot_c_and_arm_a_control_c_keep_every_run(tmp_path):
    # they both wrote raw/a.c-1.*: one run was lost and the bundle still verified
    r = _control_bench(tmp_path)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "b"
    assert evidence.verify(out) == []
    raw = sorted(p.name for p in (out / "raw").iterdir())
    assert raw == sorted(f"{stem}-1.{ext}" for stem in ("a", "a.c", "a+c", "a.c+c") for ext in ("txt", "stderr"))  # no stdout: not JSON
    meta = json.loads((out / "metadata.json").read_text())
    assert sorted(x for rnd in meta["schedule"] for x in rnd) == ["a", "a+c", "a.c", "a.c+c"]


@pytest.mark.slow
def test_verify_still_accepts_a_control_sealed_with_the_old_stem(tmp_path):
    # bundles sealed before ARM+CONTROL-N named a control's files ARM.CONTROL-N
    w = _w(tmp_path, "exit 0")
    ctl = _w(tmp_path, "exit 0", name="ctl")
    out = tmp_path / "b"
    r = run_capshim("bench", "--arm", "a=", "-r", "1", "--warmup", "0", "--metric", "wall", "--control",
                    f"c={ctl}", "--out", str(out), "--", str(w), timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for old in [*(out / "raw").glob("a+c-1.*"), *(out / "status").glob("a+c-1.*")]:
        old.rename(old.with_name(old.name.replace("a+c-1", "a.c-1")))
    listed = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name != "SHA256SUMS")
    paths.write_sums(out, listed)
    assert evidence.verify(out) == []
    (out / "raw" / "a.c-1.txt").rename(out / "raw" / "a.x-1.txt")  # a stray file is still caught
    paths.write_sums(out, ["raw/a.x-1.txt" if x == "raw/a.c-1.txt" else x for x in listed])
    assert any("a.x-1.txt" in p for p in evidence.verify(out))


@pytest.mark.slow
def test_a_burst_of_sigterms_never_loses_the_seal(tmp_path):
    # the first SIGTERM used to raise in the run, a second one in the handler of the first,
    # before the seal guard was in place: the bundle stayed unsealed
    w = _w(tmp_path, f'[ -f "{tmp_path}/slow" ] && echo $$ > "{tmp_path}/sleeping" && exec sleep 60\n'
                     f'touch "{tmp_path}/slow"\necho \'{ROW}\'')
    out = tmp_path / "b"
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.Popen([sys.executable, "-m", "capshim.cli", "bench", "--arm", "a=", "--arm", "b=", "-r", "3",
                             "--warmup", "0", "--out", str(out), "--", str(w)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            preexec_fn=default_signals)
    wait_for(lambda: proc.poll() is not None or sleeping_pid(tmp_path / "sleeping") is not None, 120,
             "the second run to sleep")
    for _ in range(40):
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.01)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr[-3000:]
    assert "Traceback" not in stderr
    assert evidence.verify(out) == []
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["interrupted"] is True and json.loads((out / "summary.json").read_text())["interrupted"] is True


@pytest.mark.slow
def test_out_inside_a_sealed_bundle_is_exit_2_and_the_default_folder_is_unique(tmp_path):
    w = _w(tmp_path, f"echo '{ROW}'")
    r = run_capshim("bench", "--arm", "a=", "-r", "1", "--warmup", "0", "--out", str(tmp_path / "b"), "--", str(w),
                    cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    before = evidence.verify(tmp_path / "b")
    r = run_capshim("bench", "--arm", "a=", "-r", "1", "--warmup", "0", "--out", str(tmp_path / "b" / "raw" / "inner"),
                    "--", str(w), cwd=tmp_path)
    assert r.returncode == 2 and "sealed" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "b" / "raw" / "inner").exists() and evidence.verify(tmp_path / "b") == before == []
    for _ in range(2):
        r = run_capshim("bench", "--arm", "a=", "-r", "1", "--warmup", "0", "--", str(w), cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    assert len(list(tmp_path.glob("capshim-bench-*"))) == 2


@pytest.mark.slow
def test_an_environment_value_that_is_not_utf8_is_carried_recorded_and_sealed(tmp_path):
    # it stopped every bench with the bundle unsealed
    seen = tmp_path / "seen"
    w = _w(tmp_path, f'printf %s "$CAPSHIM_TEST_RAW" > "{seen}"\necho \'{ROW}\'')
    env = dict(os.environb)
    env[b"CAPSHIM_TEST_RAW"] = b"caf\xe9\xff"
    env[b"PYTHONPATH"] = str(REPO / "src").encode()
    r = subprocess.run([sys.executable, "-m", "capshim.cli", "bench", "--arm", "a=", "-r", "1", "--warmup", "0",
                        "--out", str(tmp_path / "b"), "--", str(w)], env=env, capture_output=True, cwd=tmp_path,
                       timeout=300)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 0, err
    assert "Traceback" not in err
    assert seen.read_bytes() == b"caf\xe9\xff"  # carried to the workload unchanged
    out = tmp_path / "b"
    assert evidence.verify(out) == []
    meta = json.loads((out / "metadata.json").read_text())
    text = json.dumps(meta)
    assert "caf\\\\xe9\\\\xff" in text or "CAPSHIM_TEST_RAW" not in text  # recorded escaped when recorded


def test_metric_json_skips_a_deeply_nested_line_before_the_value():
    # a RecursionError in the JSON decoder aborted the whole bench
    stdout = "[" * 100000 + "\n" + '{"fps": 61.5}\n'
    m = command.metrics.parse_spec("json:fps", better="higher")
    assert command.extract(m, stdout, "", 0.1, "raw/a-1.json") == [61.5]
    deep_after = '{"fps": 61.5}\n' + "[" * 100000 + "\n"
    assert command.extract(m, deep_after, "", 0.1, "raw/a-1.json") == [61.5]


@pytest.mark.slow
def test_metric_json_deep_line_in_a_bench_does_not_abort_it(tmp_path):
    w = _w(tmp_path, "python3 -c \"print('[' * 100000)\"\necho '{\"fps\": 61.5}'")
    out = tmp_path / "b"
    r = run_capshim("bench", "--arm", "a=", "-r", "2", "--warmup", "0", "--metric", "json:fps", "--better",
                    "higher", "--out", str(out), "--", str(w), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["arms"]["a"]["tests"]["fps"]["median"] == 61.5


@pytest.mark.slow
def test_a_401_digit_sample_is_exit_2_naming_file_row_and_key(tmp_path):
    f = tmp_path / "f.json"
    f.write_text('[{"n_prompt": 512, "n_gen": 0, "samples_ts": [100, ' + "9" * 401 + "]}]")
    with pytest.raises(llamabench.LlamaBenchError) as exc:
        llamabench.to_records(llamabench.load_file(f), "a", 1)
    assert exc.value.exit_code == 2 and str(f) in str(exc.value) and "row 0" in str(exc.value) and "samples_ts" in str(exc.value)
    r = run_capshim("report", "--arm", f"a={f}", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "OverflowError" not in r.stderr
    assert str(f) in r.stderr and "samples_ts" in r.stderr


@pytest.mark.slow
def test_output_file_that_exists_is_refused_and_kept(tmp_path):
    """Hostile pass: --output-file was removed before every run, whatever it was (a user's file, a file
    of a sealed bundle, /dev/null as root). It must not exist when the bench starts."""
    w = _w(tmp_path, "exit 0")
    mine = tmp_path / "precious.txt"
    mine.write_text("keep")
    r = run_capshim("bench", "--metric", "wall", "-r", "1", "--warmup", "0", "--arm", "a=", "--output-file",
                    str(mine), "--out", str(tmp_path / "o"), "--", str(w))
    assert r.returncode == 2 and "--output-file" in r.stderr and "exists" in r.stderr, r.stderr
    assert mine.read_text() == "keep" and not (tmp_path / "o").exists()
    for special in ("/dev/null", "/dev/full"):
        r = run_capshim("bench", "--metric", "wall", "-r", "1", "--warmup", "0", "--arm", "a=", "--output-file",
                        special, "--out", str(tmp_path / "o2"), "--", str(w))
        assert r.returncode == 2 and "exists" in r.stderr and Path(special).is_char_device(), r.stderr


@pytest.mark.slow
def test_output_file_inside_a_sealed_bundle_or_through_a_link_into_one_is_refused(tmp_path):
    sealed = tmp_path / "B"
    (sealed / "raw").mkdir(parents=True)
    (sealed / "SHA256SUMS").write_text("")
    (tmp_path / "rawlink").symlink_to(sealed / "raw")
    w = _w(tmp_path, "exit 0")
    for target in (sealed / "new.txt", tmp_path / "rawlink" / "new.txt"):
        r = run_capshim("bench", "--metric", "wall", "-r", "1", "--warmup", "0", "--arm", "a=", "--output-file",
                        str(target), "--out", str(tmp_path / "o"), "--", str(w))
        assert r.returncode == 2 and "sealed" in r.stderr, r.stderr
    # and --out through a link into a sealed bundle
    r = run_capshim("bench", "--metric", "wall", "-r", "1", "--warmup", "0", "--arm", "a=",
                    "--out", str(tmp_path / "rawlink" / "inner"), "--", str(w))
    assert r.returncode == 2 and "sealed" in r.stderr and not (sealed / "raw" / "inner").exists(), r.stderr


def test_wall_seconds_are_not_rounded_up_to_the_wait_s_polling_steps(tmp_path):
    """New-user pass: Popen.wait(timeout=) polls with growing sleeps, so a 64 ms process read 100 ms and
    --metric wall showed a 1.54x 'speed-up' between identical arms. The wait now wakes on the exit."""
    from capshim.bench import runs

    lows = []
    for _ in range(5):  # the least of five: a loaded machine may delay one run, not the wake-up itself
        proc = subprocess.Popen(["sleep", "0.064"])
        t0 = time.monotonic()
        rc, timed_out, why = runs._wait(proc, 10.0, lambda: None)
        lows.append(time.monotonic() - t0)
        assert (rc, timed_out, why) == (0, False, None)
    assert min(lows) < 0.095, lows


def test_wait_still_ends_a_run_on_timeout_and_on_a_stop_request():
    from capshim.bench import runs

    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    rc, timed_out, why = runs._wait(proc, 0.3, lambda: None)
    assert timed_out and rc != 0
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    rc, timed_out, why = runs._wait(proc, 10.0, lambda: "SIGTERM")
    assert (timed_out, why) == (False, "SIGTERM") and rc != 0
