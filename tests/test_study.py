"""Study seals: the SHA256SUMS at the top of an ablate / tune / kernels --out folder, and its verify.

Small fake studies: the commands run with a stand-in bench (the one seam, common.run_arms) that writes
a real sealed bundle, so the seal is the command's own and no workload runs.
"""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from capshim import evidence, report
from capshim.studies import ablate, common, kernels, tune
from capshim.evidence import study
from capshim.cli import main
from capshim.errors import CapshimError
from capshim.paths import SUMS_NAME
from tests.studies.test_ablate import GPU_STOCK, fake_bench
from tests.studies.test_kernels import GOOD, OK_RUN, _fake_run_arms
from tests.studies.test_tune import CPU_STOCK, _lavapipe_like


def _with_bundle(run_arms):
    """``run_arms`` that also seals a real (empty) evidence bundle in the folder it was given."""
    def wrapped(specs, out, **kw):
        m = run_arms(specs, out, **kw)
        b = evidence.Bundle.create(out, metadata={}, exist_ok=True)
        b.finalize(report.bundle_steps([], {"native": {"state": "native"}}, "native"))
        assert evidence.verify(out) == []
        return m
    return wrapped


def _ablate_study(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "stock_probe", lambda api=None: (GPU_STOCK, GPU_STOCK["device"]))
    monkeypatch.setattr(common, "run_arms", _with_bundle(
        fake_bench(lambda name, what, test, r: [1000.0 + i for i in range(r)])))
    out = tmp_path / "ab"
    ablate.ablate(out=out, repetitions=3, n_prompt=64, n_gen=16)
    return out


def test_a_fresh_ablate_study_verifies(tmp_path, monkeypatch):
    out = _ablate_study(tmp_path, monkeypatch)
    assert study.verify(out) == [] and study.is_study(out)
    doc = json.loads((out / "study.json").read_text())
    assert doc["kind"] == "ablate" and doc["bundles"] == ["bench"] and doc["sealed_after"] is False
    listed = (out / SUMS_NAME).read_text()
    for rel in ("ablation.json", "ablation.md", "study.json", "profiles/sim.toml", "bench/SHA256SUMS"):
        assert f"  {rel}\n" in listed
    assert "bench/summary.json" not in listed  # the nested bundle's seal covers it
    r = CliRunner().invoke(main, ["evidence", "verify", str(out)])
    assert r.exit_code == 0 and "every nested bundle verifies" in r.output, r.output


def test_a_fresh_tune_study_verifies(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "stock_probe", lambda api=None: (CPU_STOCK, CPU_STOCK["device"]))
    monkeypatch.setattr(common, "run_arms", _with_bundle(fake_bench(_lavapipe_like)))
    out = tmp_path / "t"
    tune.tune(out=out)
    assert study.verify(out) == []
    assert json.loads((out / "study.json").read_text())["bundles"] == ["confirm", "stage-1"]
    assert "  tuned.toml\n" in (out / SUMS_NAME).read_text()


def test_a_fresh_kernels_study_verifies(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "run_arms", _with_bundle(_fake_run_arms({
        "tiny": {"native": ("native", OK_RUN, GOOD), "sim-vulkan-paravirt": ("active", OK_RUN, GOOD)}})))
    out = tmp_path / "k"
    kernels.kernels(["tiny"], out=out, n_prompt=16, n_gen=2)
    assert study.verify(out) == []
    assert json.loads((out / "study.json").read_text())["bundles"] == ["bench-tiny"]


def test_a_study_stopped_by_an_error_is_sealed_and_says_so(tmp_path, monkeypatch):
    calls = []

    def interrupted(specs, out, **kw):
        _with_bundle(fake_bench(_lavapipe_like, calls))(specs, out, **kw)
        raise CapshimError("bench interrupted (SIGINT); partial bundle: x", exit_code=130)

    monkeypatch.setattr(common, "stock_probe", lambda api=None: (CPU_STOCK, CPU_STOCK["device"]))
    monkeypatch.setattr(common, "run_arms", interrupted)
    with pytest.raises(CapshimError, match="interrupted"):
        tune.tune(out=tmp_path / "t")
    doc = json.loads((tmp_path / "t" / "study.json").read_text())
    assert doc["complete"] is False and "interrupted" in doc["error"]
    assert study.verify(tmp_path / "t") == []


def test_a_refused_out_is_never_sealed(tmp_path, monkeypatch):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("the user's")
    monkeypatch.setattr(common, "stock_probe", lambda api=None: (CPU_STOCK, CPU_STOCK["device"]))
    with pytest.raises(CapshimError, match="not empty"):
        tune.tune(out=tmp_path / "full")
    assert sorted(os.listdir(tmp_path / "full")) == ["mine.txt"]


@pytest.fixture
def sealed(tmp_path, monkeypatch):
    return _ablate_study(tmp_path, monkeypatch)


def test_an_edited_top_level_file_is_caught(sealed):
    doc = json.loads((sealed / "ablation.json").read_text())
    doc["smallest"] = {"arm": "forged"}
    (sealed / "ablation.json").write_text(json.dumps(doc))
    assert study.verify(sealed) == ["ablation.json: checksum mismatch"]
    r = CliRunner().invoke(main, ["evidence", "verify", str(sealed)])
    assert r.exit_code == 1 and "ablation.json: checksum mismatch" in r.output


def test_an_added_file_is_caught(sealed):
    (sealed / "profiles" / "extra.toml").write_text("x")
    (sealed / "notes.txt").write_text("x")
    assert study.verify(sealed) == ["notes.txt: not listed in SHA256SUMS", "profiles/extra.toml: not listed in SHA256SUMS"]


def test_a_file_replaced_by_a_link_is_caught(sealed, tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_bytes((sealed / "ablation.md").read_bytes())
    (sealed / "ablation.md").unlink()
    (sealed / "ablation.md").symlink_to(outside)
    problems = study.verify(sealed)
    assert "ablation.md: is a link (a study holds only its own files and folders)" in problems
    assert "ablation.md: resolves outside the study" in problems


def test_an_edited_nested_seal_is_caught(sealed):
    # re-sealing the nested bundle after an edit (its own verify passes) is caught by the top seal
    (sealed / "bench" / "report.md").write_text("forged")
    from capshim import paths

    paths.write_sums(sealed / "bench", [*evidence.bundle_files(sealed / "bench")])
    assert evidence.verify(sealed / "bench") == []
    assert study.verify(sealed) == ["bench/SHA256SUMS: checksum mismatch"]


def test_a_nested_bundle_problem_is_named_relative_to_the_study(sealed):
    (sealed / "bench" / "summary.json").write_text("{}")
    assert study.verify(sealed) == ["bench/summary.json: checksum mismatch"]


def test_a_file_outside_the_layout_is_caught(sealed):
    (sealed / "planted.sh").write_text("x")
    from capshim import paths

    listed, _ = paths.read_sums(sealed)
    paths.write_sums(sealed, [*listed, "planted.sh"])
    assert study.verify(sealed) == ["planted.sh: not part of this ablate study's layout (capshim writes no such file)"]


def test_seal_study_seals_an_older_folder_once(sealed):
    (sealed / SUMS_NAME).unlink()
    (sealed / "study.json").unlink()
    (sealed / "run.txt").write_text("capshim ablate ...\n")
    r = CliRunner().invoke(main, ["evidence", "seal-study", str(sealed), "--kind", "ablate"])
    assert r.exit_code == 0, r.output
    doc = json.loads((sealed / "study.json").read_text())
    assert doc["sealed_after"] is True and doc["sealed_utc"] and "not since the run" in doc["note"]
    assert "  run.txt\n" in (sealed / SUMS_NAME).read_text()
    assert study.verify(sealed) == []
    r = CliRunner().invoke(main, ["evidence", "seal-study", str(sealed), "--kind", "ablate"])
    assert r.exit_code == 2 and "already has" in r.output


def test_seal_study_refuses_a_broken_nested_bundle(sealed):
    (sealed / SUMS_NAME).unlink()
    (sealed / "study.json").unlink()
    (sealed / "bench" / "summary.json").write_text("{}")
    r = CliRunner().invoke(main, ["evidence", "seal-study", str(sealed), "--kind", "ablate"])
    assert r.exit_code == 2 and "bench/summary.json: checksum mismatch" in r.output
    assert not (sealed / SUMS_NAME).exists()


def test_seal_study_takes_back_a_seal_verify_would_reject(sealed, tmp_path):
    """Junk outside the kind's layout, a hard link or a wrong --kind: exit 2 naming the problem, no
    SHA256SUMS or study.json left behind, so the folder can be fixed and sealed again."""
    import os

    (sealed / SUMS_NAME).unlink()
    (sealed / "study.json").unlink()
    (sealed / "junk.txt").write_text("junk\n")
    r = CliRunner().invoke(main, ["evidence", "seal-study", str(sealed), "--kind", "ablate"])
    assert r.exit_code == 2 and "junk.txt: not part of this ablate study's layout" in r.output, r.output
    assert not (sealed / SUMS_NAME).exists() and not (sealed / "study.json").exists()
    (sealed / "junk.txt").unlink()
    os.link(sealed / "ablation.md", tmp_path / "elsewhere.md")
    r = CliRunner().invoke(main, ["evidence", "seal-study", str(sealed), "--kind", "ablate"])
    assert r.exit_code == 2 and "ablation.md: has 2 hard links" in r.output, r.output
    (tmp_path / "elsewhere.md").unlink()
    r = CliRunner().invoke(main, ["evidence", "seal-study", str(sealed), "--kind", "tune"])
    assert r.exit_code == 2 and not (sealed / SUMS_NAME).exists()
    r = CliRunner().invoke(main, ["evidence", "seal-study", str(sealed), "--kind", "ablate"])
    assert r.exit_code == 0, r.output
    assert study.verify(sealed) == []


def _unseal(folder):
    (folder / SUMS_NAME).unlink()
    (folder / "study.json").unlink()


def test_ctrl_c_during_seal_study_waits_for_the_seal(sealed, monkeypatch):
    import signal

    from capshim import paths

    real = paths.write_sums

    def interrupted(root, names):
        signal.raise_signal(signal.SIGINT)  # after study.json, before SHA256SUMS
        signal.raise_signal(signal.SIGINT)
        return real(root, names)

    _unseal(sealed)
    monkeypatch.setattr(paths, "write_sums", interrupted)
    r = CliRunner().invoke(main, ["evidence", "seal-study", str(sealed), "--kind", "ablate"])
    assert r.exit_code == 130, r.output
    assert study.verify(sealed) == [] and json.loads((sealed / "study.json").read_text())["sealed_after"] is True


def test_a_seal_study_that_cannot_write_its_seal_can_be_run_again(sealed, monkeypatch):
    from capshim import paths

    real = paths.write_sums

    def full(root, names):
        raise paths.StorageError(f"{root}/{SUMS_NAME}: cannot write: No space left on device")

    _unseal(sealed)
    monkeypatch.setattr(paths, "write_sums", full)
    r = CliRunner().invoke(main, ["evidence", "seal-study", str(sealed), "--kind", "ablate"])
    assert r.exit_code == 4 and "No space left" in r.output, r.output
    assert not (sealed / "study.json").exists()  # taken back: nothing says "sealed" without a seal
    monkeypatch.setattr(paths, "write_sums", real)
    r = CliRunner().invoke(main, ["evidence", "seal-study", str(sealed), "--kind", "ablate"])
    assert r.exit_code == 0 and study.verify(sealed) == [], r.output
