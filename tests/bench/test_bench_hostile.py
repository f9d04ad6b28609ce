"""``capshim bench`` against hostile workloads and inputs: every case ends in a sealed bundle or a
clean exit 2, never a traceback (issue 9). ``w`` prints one valid llama-bench row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capshim import evidence
from tests.conftest import alive as _alive, run_capshim, write_script as _w

ROW = '[{"n_prompt":512,"n_gen":0,"samples_ts":[100]}]'


def _bench(tmp_path, *args, out="b"):
    # cwd is the test's own folder: a workload that writes next to "." never touches the checkout
    return run_capshim("bench", "--arm", "a=", "--arm", "b=", "--baseline", "a", "--warmup", "0",
                       "--out", str(tmp_path / out), *args, timeout=300, cwd=tmp_path)


def _sealed(tmp_path, r, out="b"):
    assert "Traceback" not in r.stderr, r.stderr
    assert evidence.verify(tmp_path / out) == [], r.stderr
    return json.loads((tmp_path / out / "summary.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["interpreter", "random"])
def test_workload_that_cannot_exec_is_a_recorded_failed_run(tmp_path, kind):
    w = tmp_path / "w"
    w.write_bytes(b"#!/nonexistent/python9\n" if kind == "interpreter" else bytes(range(7, 250)) * 4)
    w.chmod(0o755)
    r = _bench(tmp_path, "-r", "2", "--", str(w))
    summary = _sealed(tmp_path, r)
    assert r.returncode == 1
    err = summary["arms"]["a"]["runs"][0]["error"]
    assert err.startswith("not started:")
    assert ("interpreter" in err) if kind == "interpreter" else ("not an executable format" in err)
    assert "capshim:" in (tmp_path / "b" / "raw" / "a-1.stderr").read_text()


@pytest.mark.slow
def test_workload_deleted_after_its_first_run(tmp_path):
    w = _w(tmp_path, f"echo '{ROW}'\nrm -f \"$0\"")
    r = _bench(tmp_path, "-r", "2", "--", str(w))
    summary = _sealed(tmp_path, r)
    assert r.returncode == 1
    runs = summary["arms"]["a"]["runs"] + summary["arms"]["b"]["runs"]
    assert len(runs) == 4 and [x["error"] for x in runs].count(None) == 1  # the first run (any arm) finished
    assert all(x["error"].startswith("not started:") and "not found" in x["error"] for x in runs if x["error"])


@pytest.mark.slow
def test_folder_as_workload_is_exit_2(tmp_path):
    (tmp_path / "d").mkdir()
    r = _bench(tmp_path, "-r", "1", "--", str(tmp_path / "d"))
    assert r.returncode == 2 and "folder" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_samples_of_1e308_still_seal(tmp_path):
    w = _w(tmp_path, """echo '[{"n_prompt":512,"n_gen":0,"samples_ts":[1e308,1e308]}]'""")
    r = _bench(tmp_path, "-r", "2", "--json", "--", str(w))
    _sealed(tmp_path, r)
    json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"--json printed {c}"))
    meta = json.loads((tmp_path / "b" / "metadata.json").read_text())
    # 0 when every step coped with the huge numbers, 5 when one failed and was recorded
    assert r.returncode == (5 if meta.get("finalize_failures") else 0), r.stderr


@pytest.mark.slow
def test_host_baseline_bundle_of_the_wrong_shape_still_seals(tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    (host / "summary.json").write_text(json.dumps(
        {"baseline": "h", "arms": {"h": {"tests": {"pp512": {"samples": ["x"]}}}}}))
    evidence.Bundle.create(host, exist_ok=True).write_sums()  # sealed: an unsealed bundle is refused first
    w = _w(tmp_path, f"echo '{ROW}'")
    r = _bench(tmp_path, "-r", "1", "--host-baseline", str(host), "--", str(w))
    assert "Traceback" not in r.stderr
    if r.returncode == 2:  # refused up front, naming the file (the summary reader's check)
        assert "summary.json" in r.stderr
    else:
        _sealed(tmp_path, r)
        assert r.returncode == 5


@pytest.mark.slow
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN"])
def test_timeout_must_be_finite(tmp_path, value):
    r = _bench(tmp_path, "-r", "1", "--timeout", value, "--", "true")
    assert r.returncode == 2 and "--timeout" in r.stderr and not (tmp_path / "b").exists()


@pytest.mark.slow
def test_out_dev_null_is_exit_2(tmp_path):
    r = run_capshim("bench", "--arm", "a=", "--out", "/dev/null", "--", "true")
    assert r.returncode == 2 and "not a folder" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_two_benches_in_the_same_second_without_out(tmp_path):
    w = _w(tmp_path, f"echo '{ROW}'")
    import subprocess
    import sys
    import os
    from tests.conftest import REPO

    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    cmd = [sys.executable, "-m", "capshim.cli", "bench", "--arm", "a=", "-r", "1", "--warmup", "0", "--", str(w)]
    procs = [subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    bundles = sorted(tmp_path.glob("capshim-bench-*"))
    assert len(bundles) == 2 and all(evidence.verify(b) == [] for b in bundles)


@pytest.mark.slow
def test_skipped_output_check_says_so(tmp_path):
    w = _w(tmp_path, f"echo '{ROW}'")
    r = _bench(tmp_path, "-r", "1", "--check-output", "--", str(w))
    summary = _sealed(tmp_path, r)
    assert r.returncode == 0
    # one line for every arm skipped for the same reason (the reference itself included), not one each
    assert "output check skipped for arms a, b: reference arm a produced no token ids" in " ".join(r.stderr.split())
    assert summary["arms"]["b"]["output_check"] == "not checked: reference arm a produced no token ids"


@pytest.mark.slow
def test_workload_background_child_is_ended_and_counted(tmp_path):
    """`( sleep 1000 ) & echo ROW`: the sleep is ended after the run, and the run records it."""
    pids = tmp_path / "pids"
    w = _w(tmp_path, f"( sleep 1000 ) &\necho $! >> '{pids}'\necho '{ROW}'")
    r = _bench(tmp_path, "-r", "1", "--", str(w))
    summary = _sealed(tmp_path, r)
    assert r.returncode == 0, r.stderr
    left = [int(x) for x in pids.read_text().split()]
    assert len(left) == 2 and not any(_alive(p) for p in left)
    for arm in ("a", "b"):
        assert summary["arms"][arm]["runs"][0]["left_processes"] >= 1


@pytest.mark.slow
def test_relative_out_gives_the_workload_an_absolute_status_file(tmp_path):
    """`--out bc` (relative) and a workload that cds: CAPSHIM_STATUS_FILE is still the bundle's file."""
    seen = tmp_path / "seen"
    w = _w(tmp_path, f"cd /\necho \"$CAPSHIM_STATUS_FILE\" >> '{seen}'\necho '{ROW}'")
    r = run_capshim("bench", "--arm", "a=", "--arm", "b=", "--baseline", "a", "--warmup", "0", "-r", "1",
                    "--out", "bc", "--", str(w), cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    for line in seen.read_text().split():
        # absolute, and private to the run (outside the bundle; copied into bc/status after the run)
        assert Path(line).is_absolute() and (tmp_path / "bc") not in Path(line).parents, line
    assert sorted(p.name for p in (tmp_path / "bc" / "status").iterdir()) == ["a-1.jsonl", "b-1.jsonl"]


def test_huge_stderr_is_kept_as_head_and_tail(tmp_path, monkeypatch):
    """A workload writing 300 MB of stderr: the bundle keeps MAX_STDERR_KEEP bytes (head and tail)
    and the run records how much was left out (scaled down here: a 1 MiB cap)."""
    from capshim.bench import runs

    f = tmp_path / "err"
    f.write_bytes(b"H" * 1000 + b"m" * (3 << 20) + b"T" * 1000)
    size = f.stat().st_size
    cut = runs._cap_stderr(f, cap=1 << 20)
    data = f.read_bytes()
    assert cut == size - (1 << 20)
    assert data.startswith(b"H" * 1000) and data.endswith(b"T" * 1000)
    assert b"bytes of this run's stderr left out here" in data and len(data) < (1 << 20) + 200
    small = tmp_path / "small"
    small.write_bytes(b"abc")
    assert runs._cap_stderr(small) == 0 and small.read_bytes() == b"abc"


@pytest.mark.slow
def test_workload_stderr_over_the_cap_is_recorded(tmp_path):
    w = _w(tmp_path, f"head -c 40000000 /dev/zero | tr '\\\\0' e >&2\necho '{ROW}'")
    r = _bench(tmp_path, "-r", "1", "--", str(w))
    summary = _sealed(tmp_path, r)
    assert r.returncode == 0, r.stderr
    run = summary["arms"]["a"]["runs"][0]
    assert run["stderr_truncated_bytes"] == 40000000 - (32 << 20)
    assert (tmp_path / "b" / "raw" / "a-1.stderr").stat().st_size < (32 << 20) + 200
@pytest.mark.slow
def test_workload_cannot_plant_files_through_its_status_file(tmp_path):
    # The workload writes odd names and links next to its status file and swaps the file for a link.
    secret = tmp_path / "secret"
    secret.write_text("not for the bundle\n")
    body = ('d=$(dirname "$CAPSHIM_STATUS_FILE")\n'
            "touch \"$d/evil\nname\" \"$d/back\\\\slash\"\n"
            f'ln -s "{secret}" "$d/link"\n'
            f'rm -f "$CAPSHIM_STATUS_FILE"; ln -s "{secret}" "$CAPSHIM_STATUS_FILE"\n'
            f"echo '{ROW}'")
    w = _w(tmp_path, body)
    r = _bench(tmp_path, "-r", "1", "--", str(w))
    assert r.returncode == 0, r.stderr
    _sealed(tmp_path, r)
    out = tmp_path / "b"
    status = sorted(p.name for p in (out / "status").iterdir())
    assert status == []  # no planted name; a status file swapped for a link is not copied
    for p in (out / "status").iterdir():
        assert not p.is_symlink() and "not for the bundle" not in p.read_text()
    env = json.loads((out / "metadata.json").read_text())["arms"]["a"]["runs"][0]["env_delta"]
    assert not env["CAPSHIM_STATUS_FILE"].startswith(str(out))


@pytest.mark.slow
def test_host_baseline_bundle_that_does_not_verify_is_exit_2(tmp_path):
    w = _w(tmp_path, f"echo '{ROW}'")
    r = _bench(tmp_path, "-r", "1", "--", str(w), out="host")
    assert r.returncode == 0, r.stderr
    host = tmp_path / "host"
    s = json.loads((host / "summary.json").read_text())
    s["arms"]["a"]["tests"]["pp512"]["median"] = 1e6  # a forged number: the checksum no longer matches
    (host / "summary.json").write_text(json.dumps(s))
    r = _bench(tmp_path, "-r", "1", "--host-baseline", str(host), "--", str(w))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"--host-baseline {host}: the bundle does not verify" in r.stderr
    assert "summary.json: checksum mismatch" in r.stderr
    assert not (tmp_path / "b").exists()
    # a raw llama-bench file is no bundle: still taken as is
    raw = tmp_path / "host.json"
    raw.write_text(ROW)
    r = _bench(tmp_path, "-r", "1", "--host-baseline", str(raw), "--", str(w), out="c")
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
def test_status_file_is_copied_into_the_bundle_after_the_run(tmp_path):
    w = _w(tmp_path, f"""echo '{{"event":"from-the-run"}}' >> "$CAPSHIM_STATUS_FILE"\necho '{ROW}'""")
    r = _bench(tmp_path, "-r", "1", "--", str(w))
    assert r.returncode == 0, r.stderr
    _sealed(tmp_path, r)
    for arm in ("a", "b"):
        copy = tmp_path / "b" / "status" / f"{arm}-1.jsonl"
        assert not copy.is_symlink() and "from-the-run" in copy.read_text()


@pytest.mark.slow
def test_a_workload_cannot_plant_files_next_to_its_own_output(tmp_path):
    """The workload finds its stdout file through /proc/$$/fd/1 (the shell's own descriptor: inside
    $(...) /proc/self is the substitution's pipe) and drops a file and a link beside it, then
    replaces the file with a link: nothing of that reaches the bundle."""
    w = _w(tmp_path, "f=$(readlink /proc/$$/fd/1); case \"$f\" in /*) ;; *) exit 9;; esac\n"
                     "d=$(dirname \"$f\")\n"
                     "echo planted > \"$d/planted.json\"; ln -sf /etc/hostname \"$d/evil-link\"\n"
                     f"echo '{ROW}'\n"
                     "f=$(readlink /proc/$$/fd/1); rm -f \"$f\"; ln -s /etc/hostname \"$f\"")
    r = _bench(tmp_path, "-r", "1", "--", str(w))
    summary = _sealed(tmp_path, r)
    assert r.returncode == 0, r.stderr
    raw = sorted(p.name for p in (tmp_path / "b" / "raw").iterdir())
    assert raw == ["a-1.json", "a-1.stderr", "b-1.json", "b-1.stderr"]
    assert json.loads((tmp_path / "b" / "raw" / "a-1.json").read_text()) == json.loads(ROW)
    assert summary["arms"]["b"]["tests"]["pp512"]["median"] == 100.0


@pytest.mark.slow
def test_files_planted_in_the_out_folder_during_the_bench_are_caught(tmp_path):
    """A workload that knows --out writes into it while the bench runs: the seal lists the file,
    but verify (which bench runs on its own seal) names it as outside the layout: exit 5."""
    out = tmp_path / "b"
    w = _w(tmp_path, f"echo planted > '{out}/planted.txt'\nmkdir -p '{out}/raw'\n"
                     f"echo '{ROW}' > '{out}/raw/zz-9.json'\necho '{ROW}'")
    r = _bench(tmp_path, "-r", "1", "--", str(w))
    assert r.returncode == 5 and "Traceback" not in r.stderr, r.stderr
    assert "planted.txt: not part of a bundle's layout" in r.stderr
    problems = evidence.verify(out)
    assert any(p.startswith("raw/zz-9.json: not part") for p in problems), problems


@pytest.mark.slow
def test_deeply_nested_folders_in_a_bundle_are_a_problem_not_a_traceback(tmp_path):
    out = tmp_path / "b"
    r = _bench(tmp_path, "-r", "1", "--", str(_w(tmp_path, f"echo '{ROW}'")))
    assert r.returncode == 0, r.stderr
    d = out / "raw"
    for _ in range(30):  # deeper than evidence.MAX_DEPTH; the walk is iterative (no recursion limit)
        d = d / "d"
    d.mkdir(parents=True)
    problems = evidence.verify(out)
    assert any("nested deeper than" in p for p in problems), problems
    rep = run_capshim("report", str(out), timeout=120)
    assert rep.returncode == 2 and "Traceback" not in rep.stderr
