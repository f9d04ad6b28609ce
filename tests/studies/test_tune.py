"""capshim tune: the search space from a probe, the candidate sample, halving, end to end on lavapipe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capshim import profiles
from capshim.errors import UsageError
from capshim.evidence import study as seal
from capshim.studies import common, tune
from tests.conftest import run_capshim
from tests.studies.test_ablate import GPU_STOCK, SHMEM_ERROR, fake_bench

H200_LIKE = {**GPU_STOCK, "capabilities": {**GPU_STOCK["capabilities"], "subgroupSizeControl": True,
                                           "cooperativeMatrixWorkgroupScope": True},
             "extensions": {**GPU_STOCK["extensions"], "VK_NV_cooperative_matrix2": 1}}


def test_dimensions_only_lower_what_the_device_has(tmp_path):
    dims = tune.dimensions(H200_LIKE)
    assert [o.label for o in dims["shmem"]] == ["49152", "36864", "24576"]
    assert [o.label for o in dims["coopmat"]] == ["stock", "coopmat1", "none"]
    assert dims["coopmat"][1].exts == {"VK_NV_cooperative_matrix2": False}
    assert dims["coopmat"][2].caps["cooperativeMatrix"] is False
    assert set(dims) == {"shmem", "fp16", "bf16", "intdot", "subgroup-size-control", "coopmat"}
    # every option of every dimension is a valid lower profile that answers nothing above the device
    for d, opts in dims.items():
        for i in range(1, len(opts)):
            prof = tune.write_candidate(dims, {d: i}, tmp_path / f"{d}{i}.toml", "t", "dev")
            assert prof.direction == "lower"
            for key, v in prof.capabilities.items():
                real = H200_LIKE["capabilities"][key]
                assert v <= int(real)
            assert all(e in H200_LIKE["extensions"] for e in prof.extensions)


def test_dimensions_of_a_device_without_coopmat_or_fp16():
    stock = {"capabilities": {"maxComputeSharedMemorySize": 16384, "shaderFloat16": False}, "extensions": {}}
    assert tune.dimensions(stock) == {}


def test_candidates_are_seeded_unique_and_never_stock():
    dims = tune.dimensions(H200_LIKE)
    a = tune.candidates(dims, 12, seed=3)
    assert a == tune.candidates(dims, 12, seed=3)
    assert len(a) == 12
    keys = [tuple(sorted(c.items())) for c in a]
    assert len(set(keys)) == 12 and all(any(c.values()) for c in a)
    singles = [c for c in a if sum(1 for v in c.values() if v) == 1]
    assert len(singles) == 8 and a[:8] == singles  # 2 shmem, fp16, bf16, intdot, subgroup, 2 coopmat: singles first
    small = tune.candidates(dims, 2, seed=3)
    assert len(small) == 2 and all(sum(1 for v in c.values() if v) == 1 for c in small)


def test_halve_keeps_the_faster_half_that_passes_the_gate():
    R = common.Ratio
    rs = {"a": R(1.05, 1.0, 1.1, "active", True), "b": R(1.10, 1.0, 1.2, "wrong-output", False),
          "c": R(0.90, 0.8, 1.0, "active", True), "d": R(1.02, 1.0, 1.1, "active", True)}
    assert tune.halve(list(rs), rs) == ["a", "d"]
    assert tune.halve(["b"], rs) == []


@pytest.mark.slow
def test_tune_end_to_end_on_lavapipe(tmp_path, stock_probe):
    out = tmp_path / "tune"
    r = run_capshim("tune", "--json", "--budget", "3", "-r", "1", "--confirm-runs", "2", "-p", "16", "-n", "4",
                    "--dims", "shmem,FP16,shmem", "--out", str(out), timeout=900)
    assert r.returncode in (0, 1), r.stderr[-2000:]
    assert r.returncode == (0 if json.loads(r.stdout)["outcome"] == "confirmed" else 1), r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert len(res["candidates"]) == 3
    assert res["only"] == ["shmem", "fp16"] and set(res["dimensions"]) == {"shmem", "fp16"}
    assert res["budget"]["requested"] == 3 and res["budget"]["tried"] == 3
    assert res["outcome"] == ("confirmed" if res["winner"] else "no candidate passed")
    meta = json.loads((out / "stage-1" / "metadata.json").read_text())
    assert isinstance(meta["inherited_env"]["variables"], dict) and "GGML_" in meta["inherited_env"]["prefixes"]
    assert all(c["answers"].split("=")[0] in ("shmem", "fp16") for c in res["candidates"].values())
    assert res["stages"][0]["stage"] == 1 and not (out / "stage-0").exists()
    stage1 = json.loads((out / "stage-1" / "summary.json").read_text())
    assert set(stage1["arms"]) == {"native", *res["candidates"]}
    for name, c in res["candidates"].items():
        first = c["results"][0]
        assert first["state"] == stage1["arms"][name]["state"]
        # the bench's warnings are carried: one process per arm is too few for an interval
        assert ("runs failed" if first["state"] == "failed" else "few processes") in first["flags"]
        if first["state"] == "failed":  # the reason is the run's error, whole, and in the notes
            assert first["why"] == stage1["arms"][name]["runs"][0]["error"]
            assert any(first["why"] in n for n in res["notes"]) and "Possible causes" not in first["why"]
    if stock_probe["device"]["type"] == "cpu":  # lavapipe (32 KiB): llama.cpp cannot run with 16 KiB
        (low,) = [c for c in res["candidates"].values() if c["answers"] == "shmem=16384"]
        assert low["results"][0]["state"] == "failed"
        assert low["results"][0]["why"].startswith("exit 1: ggml_vulkan: Error: Shared memory size too small")
    if res["winner"]:
        prof = profiles.load(res["tuned_profile"])
        assert prof.direction == "lower" and res["confirm"]["verdict"] in prof.description
        confirm = json.loads((out / "confirm" / "summary.json").read_text())
        assert set(confirm["arms"]) == {"native", "tuned", "aa"}
        assert res["confirm"]["aa"]["state"] == confirm["arms"]["aa"]["state"]
        assert res["confirm"]["verdict"] and res["notes"][0].startswith(f"best: {res['winner']} ")
        assert "few processes" in res["confirm"]["flags"]["tuned"]
    assert "| best |" in (out / "tune.md").read_text()
    assert seal.verify(out) == []  # the study seal over the folder and its nested bundles


def test_ratio_json_has_no_nan():
    failed = common.Ratio(float("nan"), None, None, "failed", False)
    assert failed.to_json() == {"ratio": None, "ci95": None, "state": "failed"}
    assert json.loads(json.dumps(failed.to_json())) == failed.to_json()
    ok = common.Ratio(1.02, 0.99, 1.05, "active", True)
    assert ok.to_json() == {"ratio": 1.02, "ci95": [0.99, 1.05], "state": "active"}


@pytest.mark.slow
def test_dims_names_what_this_device_has(tmp_path, stock_probe):
    r = run_capshim("tune", "--dims", "shmem,warp-drive", "--out", str(tmp_path / "t"), timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert ("--dims warp-drive: not a tune dimension (known: shmem, fp16, bf16, intdot, subgroup-size-control, "
            "coopmat)") in r.stderr
    assert not (tmp_path / "t").exists()
    if stock_probe["device"]["type"] == "cpu":  # lavapipe: a real dimension it offers no choice in
        r = run_capshim("tune", "--dims", "coopmat", "--out", str(tmp_path / "t"), timeout=120)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "--dims coopmat: " in r.stderr and "offers no choice there: it has no cooperative matrix" in r.stderr
        assert "not a tune dimension" not in r.stderr and not (tmp_path / "t").exists()
    r = run_capshim("tune", "--dims", " , ", "--out", str(tmp_path / "t"), timeout=120)
    assert r.returncode == 2 and "--dims" in r.stderr and "Traceback" not in r.stderr


CPU_STOCK = {"device": {"name": "llvmpipe", "type": "cpu", "index": 0},
             "capabilities": {"maxComputeSharedMemorySize": 32768, "shaderFloat16": True}, "extensions": {}}


def _lavapipe_like(name, what, test, r):
    """The new user's tune: shared memory 16 KiB fails to load, fp16=off is the fastest candidate but
    not shown faster in the confirmation, and the A/A arm is 0.69x in tg."""
    if what.startswith("profile:") and "maxComputeSharedMemorySize = 16384" in Path(what[8:]).read_text():
        return None
    if name == "aa":
        return [500.0, 1500.0] if test.startswith("pp") else [690.0, 700.0]
    if name == "tuned" or (what.startswith("profile:") and "shaderFloat16 = false" in Path(what[8:]).read_text()):
        return [990.0, 1030.0][:r] + [1000.0] * (r - 2)
    return [900.0 + 10 * i for i in range(r)] if name != "native" else [1000.0 + i for i in range(r)]


def test_tune_output_says_what_failed_what_is_flagged_and_the_verdict(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(common, "stock_probe", lambda api=None: (CPU_STOCK, CPU_STOCK["device"]))
    monkeypatch.setattr(common, "run_arms", fake_bench(_lavapipe_like, calls))
    out = tmp_path / "t"
    res = tune.tune(out=out)
    assert [c[1].name for c in calls] == ["stage-1", "confirm"] and calls[0][2] == 2
    notes = res["notes"]
    best = res["winner"]
    assert res["candidates"][best]["answers"] == "fp16=off"
    # the verdict first, then the A/A arm's warning (it moved in tg16)
    assert notes[0].startswith(f"best: {best} (fp16=off) 1.01x (range ") and \
        "not shown faster than native (2 processes a side; need 5)" in notes[0]
    assert notes[1].startswith("warning: the harness is unreliable here: the A/A arm") and "tg16: " in notes[1]
    rows = {r["candidate"]: r for r in res["rows"]}
    assert "winner" not in rows[best] and rows[best]["best"] == "yes"
    assert rows[best]["flags"] == "few processes"
    (low,) = [n for n, c in res["candidates"].items() if c["answers"] == "shmem=16384"]
    assert rows[low]["state"] == "failed" and rows[low]["flags"] == "runs failed, no samples"
    why = f"exit 1: {SHMEM_ERROR} (and 1 more failed run(s))"
    assert res["candidates"][low]["results"] == [{"stage": 1, "runs": 2, "ratio": None, "ci95": None,
                                                  "state": "failed", "gate": False,
                                                  "flags": ["runs failed", "no samples"], "path_unchanged": False,
                                                  "why": why}]
    assert f"stage 1: {low} (shmem=16384) failed: {why}" in notes
    search = next(n for n in notes if n.startswith("search:"))
    assert search.endswith(f"stages: 1: native + {len(res['candidates'])} candidates x 2 runs; "
                           "confirmation: native + best + A/A x 2 runs")
    # tuned.toml is the best candidate and says it was not shown faster, in its description and on top
    text = (out / "tuned.toml").read_text()
    prof = profiles.load(str(out / "tuned.toml"))
    assert prof.description.startswith("1.01x (range ") and "not shown faster than native" in prof.description
    assert text.startswith(f"# The best candidate of capshim tune ({best}: fp16=off)")
    assert prof.capabilities == {"shaderFloat16": False}
    assert res["confirm"]["flags"]["aa"] == ["few processes", "unstable (pp64)"]
    assert json.loads((out / "tune.json").read_text())["notes"] == notes


def test_tune_checks_test_before_writing_anything(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(common, "stock_probe", lambda api=None: (CPU_STOCK, CPU_STOCK["device"]))
    monkeypatch.setattr(common, "run_arms", fake_bench(_lavapipe_like, calls))
    with pytest.raises(UsageError, match=r"--test tg999: not a test of this bench .*pp64, tg16"):
        tune.tune(out=tmp_path / "t", test="tg999")
    assert calls == [] and not (tmp_path / "t").exists()
    assert tune.tune(out=tmp_path / "ok", test="tg16")["test"] == "tg16"


def test_terminal_table_wraps_cells_instead_of_cutting_them(monkeypatch, capsys):
    """At 80 columns: nothing cut (no ellipsis), no word or ratio split across lines (columns that do
    not fit go to a second table, capshim.export.terminal), markup-looking notes stay text."""
    from capshim.cli import studies as cli_studies

    monkeypatch.setenv("COLUMNS", "80")
    long = "subgroup-size-control=off, shmem=24576, coopmat=coopmat1"
    rows = [{"candidate": "c01", "answers": long, "stages": 1, "pp512 vs native (last stage)": "0.98x [0.95–1.00]",
             "state": "active", "flags": "few processes, contaminated, unstable (pp512)", "best": "yes"}]
    cli_studies._ablate_tune_table(rows, ["[/x] stays text"], "capshim tune (pp512)")
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80 and "…" not in out
    words = set(out.replace("│", " ").replace("┃", " ").split())
    for text in (long, rows[0]["flags"], "0.98x [0.95–1.00]"):  # every word whole
        assert set(text.split()) <= words, text
    assert "0.98x [0.95–1.00]" in out  # a ratio and its interval on one line
    assert "- [/x] stays text" in out


# --- exit status, budget, --dims, path unchanged, ties ------------------------

def _fake_tune(monkeypatch, value, calls=None, **kw):
    monkeypatch.setattr(common, "stock_probe", lambda api=None: (CPU_STOCK, CPU_STOCK["device"]))
    monkeypatch.setattr(common, "run_arms", fake_bench(value, calls, **kw))


def test_tune_exits_1_when_no_candidate_passes_the_gate(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from capshim.cli import main as capshim_main

    _fake_tune(monkeypatch, lambda name, what, test, r: [1000.0 + i for i in range(r)] if name == "native" else None)
    out = tmp_path / "t"
    r = CliRunner().invoke(capshim_main, ["tune", "--json", "--out", str(out)])
    assert r.exit_code == 1, r.output
    res = json.loads((out / "tune.json").read_text())
    assert res["outcome"] == "no candidate passed" and res["winner"] is None and res["confirm"] is None
    assert not (out / "tuned.toml").exists()
    assert "no candidate passed the correctness gate; no profile written" in res["notes"]
    help_text = CliRunner().invoke(capshim_main, ["tune", "--help"]).output
    assert "Exit status:" in help_text and "0  a best candidate was found and confirmed" in help_text
    assert "1  no candidate passed the correctness gate" in help_text and "2  usage error" in help_text


def test_tune_exits_0_when_the_best_is_confirmed(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from capshim.cli import main as capshim_main

    _fake_tune(monkeypatch, _lavapipe_like)
    r = CliRunner().invoke(capshim_main, ["tune", "--json", "--out", str(tmp_path / "t")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "t" / "tune.json").read_text())["outcome"] == "confirmed"


def test_tune_records_the_budget_and_says_when_it_exceeds_the_space(tmp_path, monkeypatch):
    _fake_tune(monkeypatch, _lavapipe_like)
    res = tune.tune(out=tmp_path / "t", budget=50)
    # llvmpipe: shmem 32768 / 24576 / 16384 x fp16 on / off: 6 combinations, one of them stock
    assert res["budget"] == {"requested": 50, "default": False, "space": 5, "tried": 5}
    assert "budget 50: only 5 candidates exist on this device; 5 tried" in res["notes"]
    assert len(res["candidates"]) == 5
    saved = json.loads((tmp_path / "t" / "tune.json").read_text())
    assert saved["budget"] == res["budget"]
    small = tune.tune(out=tmp_path / "s", only=["fp16"], budget=3)
    assert small["budget"] == {"requested": 3, "default": False, "space": 1, "tried": 1}
    assert "budget 3: only 1 candidate exists on this device in fp16; 1 tried" in small["notes"]
    default = tune.tune(out=tmp_path / "d")
    assert default["budget"] == {"requested": 4, "default": True, "space": 5, "tried": 4}
    assert not any(n.startswith("budget ") for n in default["notes"])


def test_dims_are_deduplicated_case_insensitive_and_typos_told_apart(tmp_path, monkeypatch):
    assert tune.parse_only(["fp16", "fp16", "shmem"]) == ["fp16", "shmem"]
    assert tune.parse_only([" FP16", "Shmem", "fp16 "]) == ["fp16", "shmem"]
    for typo, hint in (("bogus", ""), ("fp-16", r" \(did you mean 'fp16'\?\)")):
        with pytest.raises(UsageError, match=rf"^--dims {typo}: not a tune dimension{hint} \(known: shmem, fp16, "
                                             r"bf16, intdot, subgroup-size-control, coopmat\)$"):
            tune.parse_only(["fp16", typo])
    with pytest.raises(UsageError, match="give at least one dimension name"):
        tune.parse_only([" ", ""])
    calls = []
    _fake_tune(monkeypatch, _lavapipe_like, calls)
    with pytest.raises(UsageError) as e:  # a real dimension llvmpipe has no choice in
        tune.tune(out=tmp_path / "c", only=["fp16", "coopmat", "intdot"])
    msg = str(e.value)
    assert msg.startswith("--dims coopmat: llvmpipe offers no choice there: it has no cooperative matrix "
                          "(VK_KHR_cooperative_matrix); intdot: llvmpipe offers no choice there: it reports no "
                          "accelerated integer dot product")
    assert msg.endswith("(this device's dimensions: shmem, fp16)") and "not a tune dimension" not in msg
    with pytest.raises(UsageError, match="not a tune dimension"):  # a typo is told before any probe or run
        tune.tune(out=tmp_path / "b", only=["Bogus"])
    assert calls == [] and not (tmp_path / "c").exists() and not (tmp_path / "b").exists()
    res = tune.tune(out=tmp_path / "ok", only=["FP16", "fp16"])
    assert res["only"] == ["fp16"] and list(res["dimensions"]) == ["fp16"]


NATIVE_PATH = {"vulkan": {"device_name": "llvmpipe", "fp16": 1, "shared_memory": 32768, "matrix_cores": "none"}}


def _path_of(name, what):
    """llama.cpp's attested path: shared memory follows the answer; fp16 off is ignored (path unchanged)."""
    text = Path(what[8:]).read_text() if what.startswith("profile:") else ""
    for size in (24576, 16384):
        if f"maxComputeSharedMemorySize = {size}" in text:
            return {"vulkan": {**NATIVE_PATH["vulkan"], "shared_memory": size}}
    return NATIVE_PATH


def test_path_unchanged_candidates_are_flagged_and_called_equivalent_to_stock(tmp_path, monkeypatch):
    _fake_tune(monkeypatch, _lavapipe_like, path=_path_of)
    res = tune.tune(out=tmp_path / "t")
    best = res["winner"]
    assert res["candidates"][best]["answers"] == "fp16=off" and res["candidates"][best]["path_unchanged"]
    rows = {r["candidate"]: r for r in res["rows"]}
    assert "path unchanged" in rows[best]["flags"].split(", ")
    assert res["candidates"][best]["results"][0]["path_unchanged"] is True
    assert res["confirm"]["path_unchanged"] is True and "path unchanged" in res["confirm"]["flags"]["tuned"]
    assert "path unchanged" not in res["confirm"]["flags"]["aa"]  # the A/A arm is stock by design
    assert f"{best} is path unchanged (stage 1): " in res["notes"][0]
    assert "equivalent to stock" in res["notes"][0]
    (shm,) = [n for n, c in res["candidates"].items() if c["answers"] == "shmem=24576"]
    assert not res["candidates"][shm]["path_unchanged"] and "path unchanged" not in rows[shm]["flags"]
    md = (tmp_path / "t" / "tune.md").read_text()
    assert "path unchanged" in md and "equivalent to stock" in md
    # the profile a user applies later says it too
    head = (tmp_path / "t" / "tuned.toml").read_text().split("name =", 1)[0]
    assert "# Path unchanged (stage 1): " in head and "equivalent to stock" in head


def test_a_non_best_path_unchanged_candidate_gets_its_own_note(tmp_path, monkeypatch):
    def value(name, what, test, r):  # shmem=24576 is the fastest; fp16=off (path unchanged) runs as native
        text = Path(what[8:]).read_text() if what.startswith("profile:") else ""
        if "maxComputeSharedMemorySize = 16384" in text:
            return None
        if name == "tuned" or ("maxComputeSharedMemorySize = 24576" in text and "shaderFloat16" not in text):
            return [1200.0 + i for i in range(r)]
        return [1000.0 + i for i in range(r)]

    _fake_tune(monkeypatch, value, path=_path_of)
    res = tune.tune(out=tmp_path / "t")
    assert res["candidates"][res["winner"]]["answers"] == "shmem=24576"
    (fp16,) = [n for n, c in res["candidates"].items() if c["answers"] == "fp16=off"]
    assert res["candidates"][fp16]["path_unchanged"]
    assert any(n.startswith(f"{fp16} (fp16=off) path unchanged (stage 1): ") and "equivalent to stock" in n
               for n in res["notes"])
    assert "path unchanged" not in res["notes"][0]


def test_tie_note_when_the_best_and_runner_up_overlap_each_other_and_native():
    R = common.Ratio
    rs = {"a": R(1.0012, 0.98, 1.02, "active", True), "b": R(1.0010, 0.985, 1.016, "active", True),
          "c": R(0.80, 0.78, 0.82, "active", True), "d": R(1.5, 1.4, 1.6, "failed", False)}
    note, tied = tune.tie_note("a", rs, ["a", "b", "c", "d"], lambda n: n)
    assert tied == ["b"]
    assert note == ("the pick among a, b and native is a tie within noise: their last-stage 95% intervals "
                    "overlap (a 1.00x [0.98–1.02]; b 1.00x [0.98–1.02]; native 1.00x)")
    rs["a"] = R(1.10, 1.05, 1.15, "active", True)
    rs["b"] = R(1.08, 1.04, 1.12, "active", True)
    note, tied = tune.tie_note("a", rs, ["a", "b"], lambda n: n)
    assert tied == ["b"] and note.startswith("the pick among a and b is a tie within noise") and "native" not in note
    assert tune.tie_note("a", rs, ["a", "c"], lambda n: n) == (None, [])  # told apart
    assert tune.tie_note("a", rs, ["a"], lambda n: n) == (None, [])  # nothing to pick between
    rs["b"] = R(1.0, None, None, "active", True)
    note, tied = tune.tie_note("a", rs, ["a", "b"], lambda n: n)
    assert tied == [] and "rests on medians alone" in note


def test_tune_verdict_says_a_pick_within_noise_is_a_tie(tmp_path, monkeypatch):
    def value(name, what, test, r):  # every candidate that runs is native give or take 0.1%
        text = Path(what[8:]).read_text() if what.startswith("profile:") else ""
        if "maxComputeSharedMemorySize = 16384" in text:
            return None
        if name == "aa":
            return [1000.0, 1001.0][:r] + [1000.5] * (r - 2)
        return [995.0, 1005.0][:r] + [1000.0] * (r - 2) if name != "native" else [999.0, 1001.0][:r] + [1000.0] * (r - 2)

    _fake_tune(monkeypatch, value)
    res = tune.tune(out=tmp_path / "t")
    assert res["tie"] and res["tie"]["with"] and "native" in res["tie"]["note"]
    assert "is a tie within noise" in res["notes"][0] and res["notes"][0].startswith(f"best: {res['winner']} ")
    assert json.loads((tmp_path / "t" / "tune.json").read_text())["tie"] == res["tie"]


def test_tune_notes_an_inherited_llama_cpp_switch(tmp_path, monkeypatch):
    from capshim.bench import inherited_env

    (w,) = inherited_env.warnings({"GGML_VK_DISABLE_F16": "1"})
    _fake_tune(monkeypatch, _lavapipe_like, bench_warnings=[w])
    res = tune.tune(out=tmp_path / "t")
    assert res["notes"][0].startswith("best: ") and res["notes"][1] == f"warning: {w}"
    assert sum(1 for n in res["notes"] if "GGML_VK_DISABLE_F16=1 inherited" in n) == 1  # once, not per stage
    assert res["stages"][0]["warnings"][0] == {"arm": None, "test": None, "warning": w,
                                               "short": "GGML_VK_DISABLE_F16=1 inherited"}


def test_tune_seed_has_the_bench_s_range():
    """Hostile pass: tune took a 23-digit --seed into tune.json; bench caps it at 2**32 - 1."""
    from click.testing import CliRunner

    from capshim.cli import main

    r = CliRunner().invoke(main, ["tune", "--seed", str(2 ** 32)])
    assert r.exit_code == 2 and "--seed" in r.output


@pytest.mark.parametrize("n, ci, contaminated, want", [
    (2, None, 0, "not shown faster than native (2 processes a side; need 5)"),
    (4, [1.2, 1.3], 0, "not shown faster than native (4 processes a side; need 5)"),
    (5, [1.2, 1.3], 0, "faster than native (the whole interval more than 2% above 1.00x)"),
    (5, [1.2, 1.3], 3, "not shown faster than native (tuned mostly contaminated (3 of 5 runs))"),
    (6, [0.99, 1.01], 0, "the same as native (the interval within 2% of 1.00x)"),
    (6, [0.99, 1.10], 0, "not shown faster than native (interval crosses 1.00x)"),
    (6, [0.80, 0.90], 0, "slower than native (the whole interval more than 2% below 1.00x)"),
])
def test_the_confirmation_verdict_is_the_one_rule(n, ci, contaminated, want):
    runs = [{"run": i, "contaminated": ["load"] if i < contaminated else []} for i in range(n)]
    summary = {"arms": {"native": {"runs": [{"run": i} for i in range(n)]},
                        "tuned": {"runs": runs, "tests": {"pp64": {"speedup": {
                            "value": (ci[0] + ci[1]) / 2 if ci else 1.25, "ci95": ci, "processes": [n, n]}}}}}}
    assert tune.confirm_verdict(summary, "pp64", True) == want
    assert tune.confirm_verdict(summary, "pp64", False) == "not shown faster than native (not a result)"
