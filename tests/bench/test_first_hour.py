"""Small things a newcomer trips on (issue 19): raw files named by what they hold, and
``--check-output`` naming the first difference."""

from __future__ import annotations

import json

from capshim import evidence, paths
from capshim.bench.workloads import command
from capshim.bench.workloads.base import OutputDigest, Workload
from capshim.evidence.bundle import Bundle
from capshim.evidence.files import stdout_suffix
from tests.conftest import run_capshim, write_script as _w

ROW = '[{"n_prompt":512,"n_gen":0,"samples_ts":[100]}]'


def _bench(tmp_path, *args):
    return run_capshim("bench", "--arm", "a=", "--arm", "b=", "--baseline", "a", "--warmup", "0", "-r", "1",
                       "--out", str(tmp_path / "b"), *args, timeout=300, cwd=tmp_path)


def test_stdout_is_named_json_only_when_it_is_json():
    assert stdout_suffix(ROW.encode()) == ".json"
    assert stdout_suffix(b'{"fps": 61.5}\n') == ".json"
    for text in (b"", b"GPU0: llvmpipe\n", b"[1, 2", b'{"x": NaN}', b"\xff\xfe", b"[" * 100_000):
        assert stdout_suffix(text) == ".txt", text[:20]


def test_a_bundle_names_its_raw_stdout_by_content_and_verifies(tmp_path):
    b = Bundle.create(tmp_path / "b")
    b.write_run("a", 1, stdout=ROW, stderr="")
    b.write_run("b", 1, stdout="not json\n", stderr="")
    assert (b.root / "raw" / "a-1.json").is_file() and (b.root / "raw" / "b-1.txt").is_file()
    assert not (b.root / "raw" / "b-1.json").exists()


def test_a_command_bench_saves_text_stdout_as_txt_and_json_as_json(tmp_path):
    w = _w(tmp_path, 'echo "plain text, not JSON"')
    r = _bench(tmp_path, "--metric", "wall", "--", str(w))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "b" / "raw").iterdir()) == \
        ["a-1.stderr", "a-1.txt", "b-1.stderr", "b-1.txt"]
    assert evidence.verify(tmp_path / "b") == []
    r = run_capshim("report", str(tmp_path / "b"), timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    j = _w(tmp_path, f"echo '{ROW}'", name="jw")
    r = _bench(tmp_path, "--out", str(tmp_path / "j"), "--", str(j))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "j" / "raw").iterdir()) == \
        ["a-1.json", "a-1.stderr", "b-1.json", "b-1.stderr"]


def test_an_old_bundle_with_text_in_a_json_file_still_verifies_and_reports(tmp_path):
    """Bundles sealed before the rule name every stdout .json, text included: readers take both."""
    w = _w(tmp_path, 'echo "plain text"')
    r = _bench(tmp_path, "--metric", "wall", "--", str(w))
    assert r.returncode == 0, r.stderr
    root = tmp_path / "b"
    for arm in ("a", "b"):  # make it look like a bundle of the older rule, sealed again
        (root / "raw" / f"{arm}-1.txt").rename(root / "raw" / f"{arm}-1.json")
    listed = [line.split("  ", 1)[1] for line in (root / "SHA256SUMS").read_text().splitlines()]
    paths.write_sums(root, [x.replace(".txt", ".json") if x.startswith("raw/") else x for x in listed])
    assert evidence.verify(root) == []
    r = run_capshim("report", str(root), timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    (root / "raw" / "b-1.json").unlink()  # and a missing stdout is still named, by the old name
    paths.write_sums(root, [x.replace(".txt", ".json") for x in listed if x != "raw/b-1.txt"])
    probs = evidence.verify(root)
    assert any(p.startswith("raw/b-1.json: run b-1 is recorded") for p in probs), probs


def test_output_digest_names_the_first_differing_line():
    ref = OutputDigest(b"GPU0\nLayers: 2\nend\n", "stdout")
    same = OutputDigest(b"GPU0\nLayers: 2\nend\n", "stdout")
    other = OutputDigest(b"GPU0\nLayers: 3\nend\n", "stdout")
    assert same == ref and other != ref and str(ref).startswith("sha256:")
    assert command.same_output(same, ref) and not command.same_output(other, ref)
    assert other.first_difference(ref, "vm-unlocked", "native") == \
        "stdout line 2: vm-unlocked 'Layers: 3', native 'Layers: 2'"
    longer = OutputDigest(b"GPU0\nLayers: 2\nend\nVK_LAYER_capshim\n", "stdout")
    assert longer.first_difference(ref, "b", "a") == "stdout line 4: b 'VK_LAYER_capshim', a <missing>"
    assert ref.first_difference(longer, "a", "b") == "stdout line 4: b 'VK_LAYER_capshim', a <missing>"
    long_line = OutputDigest(b"x" * 500 + b"1\n", "--output-file o.txt")
    assert long_line.first_difference(OutputDigest(b"x" * 500 + b"2\n", "o"), "b", "a").startswith(
        "--output-file o.txt line 1: b 'xxx")  # differs past the cut: the hash of the whole line tells
    crlf = OutputDigest(b"a\r\nb\r\n", "stdout")
    assert "the first 2 lines agree" in crlf.first_difference(OutputDigest(b"a\nb\n", "stdout"), "b", "a")


def test_token_differences_name_the_position():
    w = Workload("x", ["x"])
    assert w.difference([1, 2, 3], [1, 2, 4], "b", "a") == "first at token 3: b 3, a 4"
    assert w.difference([1, 2], [1, 2, 4], "b", "a") == "b generated 2 tokens, a 3"
    assert w.difference({"values": [1.0, 2.0], "rtol": 0.02}, {"values": [1.0, 1.0]}, "b", "a") == \
        "relative L2 distance 0.707 (tolerance 0.02)"
    assert w.difference({"values": [1.0]}, {"values": [1.0, 1.0]}, "b", "a") == "b gave 1 values, a 2"
    assert w.difference("x", "y", "b", "a") == ""


def test_check_output_names_the_first_differing_line(tmp_path):
    """vulkaninfo's layer list differs when the layer is loaded: every shimmed arm was marked wrong
    with no word on where. Here arm b's runs (told apart by their private stdout path, .../b-1/)
    print one more line, as a loaded layer adds one to the list."""
    w = _w(tmp_path, 'echo "GPU0: llvmpipe"\ncase "$(readlink /proc/$$/fd/1)" in */b-1/*) '
                     'echo "Layer: VK_LAYER_capshim";; esac\necho "end"')
    r = _bench(tmp_path, "--metric", "wall", "--check-output", "--", str(w))
    assert "Traceback" not in r.stderr, r.stderr
    arms = json.loads((tmp_path / "b" / "summary.json").read_text())["arms"]
    assert arms["a"]["output_check"] == "same output as a"
    assert arms["b"]["state"] == "wrong-output"
    assert arms["b"]["output_check"] == "output differs from a, stdout line 2: b 'Layer: VK_LAYER_capshim', " \
                                        "a 'end'"
    assert "capshim: arm b: output differs from a, stdout line 2: b 'Layer: VK_LAYER_capshim', a 'end'" in r.stderr
