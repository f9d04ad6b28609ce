"""The synthetic GGUF models: real gguf writer and reader, no mocks."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gguf  # noqa: E402 - required (a dependency of capshim)

from capshim import paths  # noqa: E402
from capshim.bench import model  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _field(reader, key):
    f = reader.get_field(key)
    assert f is not None, key
    return f.contents()


def test_tiny_is_deterministic_across_cache_dirs(tmp_path):
    a = model.ensure_model("tiny", tmp_path / "a")
    b = model.ensure_model("tiny", tmp_path / "b")
    assert a.name == b.name == model.model_filename("tiny")
    assert a.read_bytes() == b.read_bytes()
    assert paths.cached_sha256(a) == paths.cached_sha256(b)


def test_ensure_model_writes_once_and_leaves_no_temp_files(tmp_path):
    first = model.ensure_model("tiny", tmp_path)
    mtime = first.stat().st_mtime_ns
    again = model.ensure_model("tiny", tmp_path)
    assert again == first
    assert again.stat().st_mtime_ns == mtime
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert first.stat().st_mode & 0o044  # readable by others (not mkstemp's 0600)


def test_default_cache_dir_follows_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    path = model.ensure_model("tiny")
    assert path.parent == tmp_path / "xdg" / "capshim" / "models"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    assert model.capshim_cache_dir() == Path.home() / ".cache" / "capshim"


@pytest.mark.slow
def test_two_processes_write_the_same_file(tmp_path):
    code = ("import sys; from pathlib import Path; from capshim.bench import model; "
            "print(model.ensure_model('tiny', Path(sys.argv[1])))")
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], env=env,
                              stdout=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0]
    assert len(set(outs)) == 1
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == sorted([Path(outs[0]).name, Path(outs[0]).name + ".lock"])
    ref = model.ensure_model("tiny", tmp_path / "ref")
    assert Path(outs[0]).read_bytes() == ref.read_bytes()


def test_tiny_reads_back_with_expected_keys_and_shapes(tmp_path):
    p = model.PRESETS["tiny"]
    path = model.ensure_model("tiny", tmp_path)
    r = gguf.GGUFReader(path)
    assert _field(r, "general.architecture") == "llama"
    assert _field(r, "llama.block_count") == p.n_layer
    assert _field(r, "llama.embedding_length") == p.n_embd
    assert _field(r, "llama.feed_forward_length") == p.n_ff
    assert _field(r, "llama.attention.head_count") == p.n_head
    assert _field(r, "llama.attention.head_count_kv") == p.n_head_kv
    assert _field(r, "llama.rope.dimension_count") == p.n_embd // p.n_head
    assert _field(r, "tokenizer.ggml.model") == "llama"
    tokens = _field(r, "tokenizer.ggml.tokens")
    assert len(tokens) == p.n_vocab == len(set(tokens))
    assert tokens[:3] == ["<unk>", "<s>", "</s>"] and tokens[3 + 0x0A] == "<0x0A>"
    assert _field(r, model.CHAIN_KEY) == p.n_vocab - 3

    tensors = {t.name: t for t in r.tensors}
    assert len(tensors) == 3 + 9 * p.n_layer
    kv = p.n_embd // p.n_head * p.n_head_kv
    # GGUF stores ggml's ne order: (columns, rows)
    expect = {
        "token_embd.weight": ((p.n_embd, p.n_vocab), "F16"),
        "output.weight": ((p.n_embd, p.n_vocab), "F16"),
        "output_norm.weight": ((p.n_embd,), "F32"),
        "blk.0.attn_q.weight": ((p.n_embd, p.n_embd), "F16"),
        "blk.0.attn_k.weight": ((p.n_embd, kv), "F16"),
        "blk.1.ffn_down.weight": ((p.n_ff, p.n_embd), "F16"),
        "blk.1.ffn_up.weight": ((p.n_embd, p.n_ff), "F16"),
        "blk.1.ffn_norm.weight": ((p.n_embd,), "F32"),
    }
    for name, (shape, typ) in expect.items():
        assert tuple(int(x) for x in tensors[name].shape) == shape, name
        assert tensors[name].tensor_type.name == typ, name
    # the weights are not all equal (random) and finite
    q = np.asarray(tensors["blk.0.ffn_gate.weight"].data, dtype=np.float32)
    assert np.isfinite(q).all() and q.std() > 0


def test_output_rows_encode_the_successor_cycle(tmp_path):
    p = model.PRESETS["tiny"]
    succ = model.successor_map(p)
    chain = [int(t) for t in model.chain_tokens(p)]
    assert sorted(succ) == chain and sorted(succ.values()) == chain
    # one cycle through every chain token
    t, seen = chain[0], set()
    while t not in seen:
        seen.add(t)
        t = succ[t]
    assert seen == set(chain)
    path = model.ensure_model("tiny", tmp_path)
    out = {t.name: t for t in gguf.GGUFReader(path).tensors}["output.weight"]
    w = np.asarray(out.data, dtype=np.float32).reshape(p.n_vocab, p.n_embd)
    assert not w[:3].any()  # specials are nobody's successor
    norms = np.linalg.norm(w[3:], axis=1)
    assert np.allclose(norms, p.logit_scale / np.sqrt(p.n_embd), rtol=1e-2)


@pytest.mark.parametrize("qtype", ["Q8_0", "Q4_0"])
def test_quantized_preset_reads_back(tmp_path, qtype):
    p = dataclasses.replace(model.PRESETS["tiny"], name="tiny-q", matrix_type=qtype,
                            embd_type=qtype, output_type="Q8_0", chain_size=64)
    path = tmp_path / "q.gguf"
    model.write_model(p, path)
    r = gguf.GGUFReader(path)
    tensors = {t.name: t for t in r.tensors}
    assert tensors["blk.0.ffn_down.weight"].tensor_type.name == qtype
    assert tuple(int(x) for x in tensors["blk.0.ffn_down.weight"].shape) == (p.n_ff, p.n_embd)
    assert tensors["output.weight"].tensor_type.name == "Q8_0"
    assert _field(r, "general.file_type") == {"Q8_0": 7, "Q4_0": 2}[qtype]
    assert _field(r, model.CHAIN_KEY) == 64


def test_quantized_rows_must_be_multiples_of_32(tmp_path):
    p = dataclasses.replace(model.PRESETS["tiny"], name="bad", matrix_type="Q8_0", n_ff=40)
    with pytest.raises(ValueError, match="multiple of 32"):
        model.write_model(p, tmp_path / "bad.gguf")


def test_tinyllama_preset_has_tinyllama_shape():
    # TinyLlama 1.1B as llama-bench reports it (shared/data/cua-metal-evidence):
    # model_n_params 1100048384.
    p = model.PRESETS["tinyllama-1.1b"]
    n_params = sum(int(np.prod(shape)) for _, shape, _ in model._tensor_plan(p))
    assert n_params == 1100048384
    assert (p.n_layer, p.n_embd, p.n_ff, p.n_head, p.n_head_kv, p.n_vocab) == (
        22, 2048, 5632, 32, 4, 32000)
    for _, shape, typ in model._tensor_plan(p):
        if typ not in ("F32", "F16"):
            assert shape[-1] % 32 == 0


def test_llama_8b_preset_has_llama3_8b_shape():
    # Meta-Llama-3-8B has 8,030,261,248 parameters (its model card: "8B"; llama-bench prints 8.03 B).
    p = model.PRESETS["llama-8b"]
    assert sum(int(np.prod(shape)) for _, shape, _ in model._tensor_plan(p)) == 8030261248
    for _, shape, typ in model._tensor_plan(p):
        if typ not in ("F32", "F16"):
            assert shape[-1] % 32 == 0


def test_unknown_preset_names_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match="unknown model preset 'huge'.*tiny"):
        model.ensure_model("huge", tmp_path)


def test_model_sha256_is_cached_and_refreshed(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"abc" * 1000)
    digest = paths.cached_sha256(path)
    assert digest == hashlib.sha256(b"abc" * 1000).hexdigest()
    side = tmp_path / "m.gguf.sha256"
    assert side.is_file() and digest in side.read_text()
    assert paths.cached_sha256(path) == digest
    path.write_bytes(b"changed")  # size changes: the cache is stale
    assert paths.cached_sha256(path) == hashlib.sha256(b"changed").hexdigest()
    with pytest.raises(OSError):
        paths.cached_sha256(tmp_path / "missing.gguf")


@pytest.mark.parametrize("workers", [2, 5])
def test_threaded_generation_writes_the_same_bytes(tmp_path, workers):
    """Blocks computed ahead in threads are written in file order: the file is
    byte-identical to the one-thread file (6 blocks, so some are still pending)."""
    p = dataclasses.replace(model.PRESETS["tiny"], name="tiny-t", n_layer=6, matrix_type="Q4_0",
                            embd_type="Q8_0", output_type="Q8_0", chain_size=64)
    model.write_model(p, tmp_path / "one.gguf", workers=1)
    model.write_model(p, tmp_path / "many.gguf", workers=workers)
    assert (tmp_path / "one.gguf").read_bytes() == (tmp_path / "many.gguf").read_bytes()


def test_a_failing_block_fails_the_write(tmp_path, monkeypatch):
    p = dataclasses.replace(model.PRESETS["tiny"], name="tiny-f", n_layer=4, chain_size=64)
    real = model._block_values

    def broken(pp, i):
        if i == 2:
            raise MemoryError("block 2")
        return real(pp, i)

    monkeypatch.setattr(model, "_block_values", broken)
    with pytest.raises(MemoryError, match="block 2"):
        model.write_model(p, tmp_path / "f.gguf", workers=3)
