"""Deterministic synthetic llama-architecture GGUF models for the built-in bench.

``ensure_model(preset)`` writes, once, a GGUF file with random weights (a fixed
seed) and a synthetic SentencePiece-style vocabulary, using the ``gguf``
package's ``GGUFWriter`` and ``gguf.quants`` (the same code llama.cpp's
``convert_hf_to_gguf.py`` uses). The file is cached under
``$XDG_CACHE_HOME/capshim/models/`` (or ``~/.cache/capshim/models/``), named by
preset, format version and a hash of the preset's parameters, so any change
to the generator invalidates the cache.

Weights are not just noise: the model is built so that greedy decoding is
robust to rounding (fp16 vs fp32 shader paths, quantization). The output
matrix maps each token's embedding to a fixed "successor" token with a large
logit margin, while the transformer layers add a random residual of comparable
size (``residual_ratio``). A layer that computes garbage (NaN, wrong scale)
flips the greedy tokens; a different but correct rounding does not. The
built-in worker reports the smallest top-1 margin it saw, so the correctness
gate's robustness is visible in each run.

Random numbers come from numpy's ``PCG64`` bit generator seeded through
``SeedSequence``; both streams are stable across numpy versions (NEP 19), and
uniform floats are made from the raw bits here, so the bytes of a preset do
not depend on numpy's distribution code.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import tempfile
import zlib
from pathlib import Path

import numpy as np

#: Bump when the generator's output changes for the same preset parameters.
MODEL_FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Preset:
    """Shape and weight type of one synthetic model.

    Attributes:
        name: preset name (``tiny``, ``tinyllama-1.1b``, ...).
        n_vocab: vocabulary size (tokens), including 3 specials and 256 byte tokens.
        n_embd: embedding width.
        n_layer: transformer blocks.
        n_head: attention heads; ``n_embd // n_head`` is the head size.
        n_head_kv: key/value heads (grouped-query attention).
        n_ff: feed-forward width.
        n_ctx_train: ``llama.context_length`` written to the file (tokens).
        matrix_type: GGML type of the 2-D block weights (``F16``, ``Q8_0``, ``Q4_0``).
        embd_type: GGML type of ``token_embd.weight``.
        output_type: GGML type of ``output.weight``.
        seed: base seed of the random weights.
        residual_ratio: RMS of all layers' residual contributions relative to the
            token embedding's RMS (1.0 = as large as the embedding).
        logit_scale: logit of the successor token for a pure embedding (the
            margin scale of greedy decoding, in logits).
    """

    name: str
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_ctx_train: int
    matrix_type: str
    embd_type: str
    output_type: str
    seed: int = 20240601
    residual_ratio: float = 1.0
    logit_scale: float = 24.0

    @property
    def head_dim(self) -> int:
        """Head size (``n_embd // n_head``)."""
        return self.n_embd // self.n_head

    def spec_hash(self) -> str:
        """Short SHA-256 of the parameters and the format version (cache key)."""
        blob = json.dumps(
            {"v": MODEL_FORMAT_VERSION, **dataclasses.asdict(self)}, sort_keys=True
        ).encode()
        return hashlib.sha256(blob).hexdigest()[:10]


PRESETS: dict[str, Preset] = {
    # Small enough for lavapipe on a 2-core CPU (pp512 + tg128 in a few seconds).
    "tiny": Preset(
        name="tiny", n_vocab=1024, n_embd=128, n_layer=2, n_head=2, n_head_kv=1,
        n_ff=384, n_ctx_train=4096, matrix_type="F16", embd_type="F16",
        output_type="F16",
    ),
    # TinyLlama 1.1B shape (TinyLlama/TinyLlama-1.1B config.json), Q4_0 like the
    # DESIGN.md section 4 H200 measurements; output.weight in Q8_0.
    "tinyllama-1.1b": Preset(
        name="tinyllama-1.1b", n_vocab=32000, n_embd=2048, n_layer=22, n_head=32,
        n_head_kv=4, n_ff=5632, n_ctx_train=2048, matrix_type="Q4_0",
        embd_type="Q4_0", output_type="Q8_0",
    ),
    # The same shape, everything in Q8_0 (about 1.17 GB).
    "tinyllama-1.1b-q8_0": Preset(
        name="tinyllama-1.1b-q8_0", n_vocab=32000, n_embd=2048, n_layer=22,
        n_head=32, n_head_kv=4, n_ff=5632, n_ctx_train=2048, matrix_type="Q8_0",
        embd_type="Q8_0", output_type="Q8_0",
    ),
}

N_SPECIAL = 3  # <unk>, <s>, </s>
N_BYTE = 256   # <0x00> .. <0xFF>
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2


def capshim_cache_dir() -> Path:
    """The capshim cache folder: ``$XDG_CACHE_HOME/capshim`` or ``~/.cache/capshim``.

    Follows the XDG Base Directory specification (an empty or relative
    ``XDG_CACHE_HOME`` is ignored). The folder is not created here.
    """
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "capshim"


def model_filename(preset: str) -> str:
    """File name of a preset's model: preset, format version and parameter hash.

    Raises:
        ValueError: unknown preset (the message lists the known ones).
    """
    p = _preset(preset)
    return f"capshim-{p.name}-v{MODEL_FORMAT_VERSION}-{p.spec_hash()}.gguf"


def ensure_model(preset: str = "tiny", cache_dir: Path | None = None) -> Path:
    """Return the path of a preset's synthetic GGUF model, writing it once.

    The file goes to ``cache_dir`` (default ``capshim_cache_dir() / "models"``),
    written to a temporary file in that folder and renamed atomically; an
    exclusive ``flock`` on ``<file>.lock`` keeps two processes from writing it
    at the same time (the second waits, then finds the file). Writing takes
    well under a second for ``tiny`` and tens of seconds for the TinyLlama
    presets (about 0.6 GB for Q4_0, 1.17 GB for Q8_0).

    Args:
        preset: a key of ``PRESETS``.
        cache_dir: folder for the model files.

    Returns:
        The model file's path.

    Raises:
        ValueError: unknown preset.
        OSError: the cache folder cannot be created or written.
    """
    p = _preset(preset)
    folder = Path(cache_dir) if cache_dir is not None else capshim_cache_dir() / "models"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / model_filename(p.name)
    if path.is_file():
        return path
    with _locked(path.with_name(path.name + ".lock")):
        if path.is_file():  # another process wrote it while we waited
            return path
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=folder)
        os.close(fd)
        try:
            write_model(p, Path(tmp))
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return path


def model_sha256(path: Path) -> str:
    """SHA-256 (hex) of a model file, cached next to it in ``<file>.sha256``.

    The cache records the file's size (bytes) and mtime (ns) and is used only
    while both match; otherwise the hash is computed again (about 1 s per GB)
    and the cache rewritten. An unwritable folder just skips the cache.

    Raises:
        OSError: the model file cannot be read.
    """
    path = Path(path)
    st = path.stat()
    side = path.with_name(path.name + ".sha256")
    try:
        cached = json.loads(side.read_text())
        if cached.get("size") == st.st_size and cached.get("mtime_ns") == st.st_mtime_ns:
            return str(cached["sha256"])
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    digest = h.hexdigest()
    record = {"sha256": digest, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
              "file": path.name}
    with contextlib.suppress(OSError):
        fd, tmp = tempfile.mkstemp(prefix=side.name + ".", suffix=".tmp", dir=side.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(record, f)
        os.replace(tmp, side)
    return digest


# --------------------------------------------------------------------------
# generation


def _preset(preset: str) -> Preset:
    try:
        return PRESETS[preset]
    except KeyError:
        raise ValueError(
            f"unknown model preset {preset!r} (known: {', '.join(PRESETS)})"
        ) from None


@contextlib.contextmanager
def _locked(lock_path: Path):
    with open(lock_path, "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _rng(p: Preset, name: str) -> np.random.PCG64:
    # One independent stream per tensor: SeedSequence and PCG64 are stable.
    return np.random.PCG64(np.random.SeedSequence([p.seed, zlib.crc32(name.encode())]))


def _uniform(p: Preset, name: str, shape: tuple[int, ...], std: float) -> np.ndarray:
    """Uniform floats with mean 0 and standard deviation ``std``, as float32."""
    n = int(np.prod(shape))
    raw = _rng(p, name).random_raw((n + 1) // 2)
    u32 = raw.view(np.uint32)[:n]
    u = (u32 >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)  # [0, 1)
    half = np.float32(std * np.sqrt(3.0))
    return ((u - np.float32(0.5)) * (2 * half)).reshape(shape)


def _permutation(p: Preset, name: str, n: int) -> np.ndarray:
    """A deterministic permutation of ``range(n)`` (Fisher-Yates on raw PCG64 bits)."""
    raw = _rng(p, name).random_raw(n)
    perm = np.arange(n, dtype=np.int64)
    for i in range(n - 1, 0, -1):
        j = int(raw[i] % np.uint64(i + 1))
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def successor_map(p: Preset) -> np.ndarray:
    """The token -> successor map that ``output.weight`` encodes (array of token ids).

    Ordinary tokens (ids >= 3) form one random permutation; a special token's
    successor is an ordinary token.
    """
    n = p.n_vocab - N_SPECIAL
    perm = _permutation(p, "successor", n) + N_SPECIAL
    succ = np.empty(p.n_vocab, dtype=np.int64)
    succ[N_SPECIAL:] = perm
    succ[:N_SPECIAL] = perm[:N_SPECIAL]
    return succ


def vocabulary(p: Preset) -> tuple[list[str], list[float], list[int]]:
    """Synthetic SentencePiece-style vocabulary: pieces, scores and token types.

    ``<unk>``, ``<s>``, ``</s>``, the 256 byte tokens ``<0xNN>`` (SentencePiece
    byte fallback, type BYTE), then unique pieces made of syllables, half of
    them word-initial (``▁`` prefix), with decreasing scores.
    """
    from gguf import TokenType

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(N_BYTE)]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.BYTE] * N_BYTE
    cons, vows = "bdfghklmnprstvz", "aeiou"
    syll = [c + v for c in cons for v in vows]
    i = 0
    while len(tokens) < p.n_vocab:
        k, word = i // 2, ""
        while True:
            word += syll[k % len(syll)]
            k //= len(syll)
            if k == 0:
                break
        tokens.append(("\u2581" + word) if i % 2 == 0 else word)
        types.append(TokenType.NORMAL)
        i += 1
    scores = [0.0] * (N_SPECIAL + N_BYTE) + [
        -float(j) for j in range(p.n_vocab - N_SPECIAL - N_BYTE)
    ]
    return tokens, scores, [int(t) for t in types]


def _tensor_plan(p: Preset) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, numpy shape (rows, cols), ggml type name) in file order."""
    d, kv = p.n_embd, p.head_dim * p.n_head_kv
    plan = [("token_embd.weight", (p.n_vocab, d), p.embd_type)]
    for i in range(p.n_layer):
        b = f"blk.{i}."
        plan += [
            (b + "attn_norm.weight", (d,), "F32"),
            (b + "attn_q.weight", (d, d), p.matrix_type),
            (b + "attn_k.weight", (kv, d), p.matrix_type),
            (b + "attn_v.weight", (kv, d), p.matrix_type),
            (b + "attn_output.weight", (d, d), p.matrix_type),
            (b + "ffn_norm.weight", (d,), "F32"),
            (b + "ffn_gate.weight", (p.n_ff, d), p.matrix_type),
            (b + "ffn_up.weight", (p.n_ff, d), p.matrix_type),
            (b + "ffn_down.weight", (d, p.n_ff), p.matrix_type),
        ]
    plan += [("output_norm.weight", (d,), "F32"), ("output.weight", (p.n_vocab, d), p.output_type)]
    return plan


def _tensor_values(p: Preset, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """The float32 values of one tensor (see the module docstring for the design)."""
    d = p.n_embd
    if name.endswith("norm.weight"):
        return np.ones(shape, dtype=np.float32)
    if name == "token_embd.weight":
        return _embeddings(p)
    if name == "output.weight":
        # Row j is the (unit) embedding of j's predecessor, scaled so that a
        # normalized hidden state equal to E[t] gives logit `logit_scale` to
        # succ(t) and about logit_scale / sqrt(n_embd) * N(0, 1) to the others.
        e = _embeddings(p)
        unit = e / np.linalg.norm(e, axis=1, keepdims=True)
        succ = successor_map(p)
        w = np.empty_like(unit)
        w[succ[N_SPECIAL:]] = unit[N_SPECIAL:]
        # special tokens are nobody's successor: random unit rows
        others = np.setdiff1d(np.arange(p.n_vocab), succ[N_SPECIAL:])
        w[others] = unit[others][:, ::-1]
        return (w * np.float32(p.logit_scale / np.sqrt(d))).astype(np.float32)
    # Block weights: inputs are RMS-normalized (RMS 1). Projections that feed
    # attention scores and the FFN gate keep RMS ~1; the two projections that
    # write into the residual stream are scaled so that all layers together
    # add about `residual_ratio` times the embedding's RMS.
    per_write = p.residual_ratio / np.sqrt(2 * p.n_layer)
    fan_in = shape[1]
    if name.endswith(("attn_output.weight",)):
        std = per_write / np.sqrt(fan_in) * 2.0  # attention averaging shrinks v
    elif name.endswith("ffn_down.weight"):
        std = per_write / np.sqrt(fan_in) / 0.45  # silu(g) * u has RMS ~0.45
    else:
        std = 1.0 / np.sqrt(fan_in)
    return _uniform(p, name, shape, std)


_EMBD_CACHE: dict[str, np.ndarray] = {}


def _embeddings(p: Preset) -> np.ndarray:
    key = p.spec_hash()
    if key not in _EMBD_CACHE:
        _EMBD_CACHE.clear()
        _EMBD_CACHE[key] = _uniform(p, "token_embd.weight", (p.n_vocab, p.n_embd), 1.0)
    return _EMBD_CACHE[key]


def _encode(values: np.ndarray, type_name: str):
    """Values -> (array to write, raw ggml type or None) with gguf.quants."""
    from gguf import GGMLQuantizationType, quants

    if type_name == "F32":
        return values.astype(np.float32), None
    if type_name == "F16":
        return values.astype(np.float16), None
    qtype = GGMLQuantizationType[type_name]
    return quants.quantize(values, qtype), qtype


def write_model(p: Preset, path: Path) -> None:
    """Write preset ``p`` to ``path`` (overwriting) with ``gguf.GGUFWriter``.

    Tensors are generated, quantized and written one at a time (streaming), so
    peak memory stays near the largest tensor. The keys are those llama.cpp's
    ``llama`` architecture loader reads (``src/llama-model.cpp``,
    ``src/llama-vocab.cpp``): context/embedding/feed-forward lengths, block
    and head counts, RMS epsilon, RoPE dimension and base, SentencePiece
    (``llama``) tokenizer with BOS/EOS/UNK ids.

    Raises:
        ValueError: a quantized row length is not a multiple of 32.
        OSError: the file cannot be written.
    """
    import gguf
    from gguf import GGMLQuantizationType, LlamaFileType

    for _, shape, t in _tensor_plan(p):
        if t not in ("F32", "F16") and shape[-1] % 32:
            raise ValueError(f"{p.name}: row length {shape[-1]} is not a multiple of 32 for {t}")

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(f"capshim synthetic {p.name}")
    w.add_description(
        f"capshim synthetic benchmark model, random weights (seed {p.seed}), "
        f"format v{MODEL_FORMAT_VERSION}, spec {p.spec_hash()}"
    )
    w.add_context_length(p.n_ctx_train)
    w.add_embedding_length(p.n_embd)
    w.add_block_count(p.n_layer)
    w.add_feed_forward_length(p.n_ff)
    w.add_head_count(p.n_head)
    w.add_head_count_kv(p.n_head_kv)
    w.add_rope_dimension_count(p.head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(p.n_vocab)
    ftype = {"F16": LlamaFileType.MOSTLY_F16, "Q8_0": LlamaFileType.MOSTLY_Q8_0,
             "Q4_0": LlamaFileType.MOSTLY_Q4_0}[p.matrix_type]
    w.add_file_type(int(ftype))
    if p.matrix_type not in ("F16", "F32"):
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    tokens, scores, types = vocabulary(p)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(UNK_ID)
    w.add_bos_token_id(BOS_ID)
    w.add_eos_token_id(EOS_ID)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    plan = _tensor_plan(p)
    for name, shape, t in plan:
        if t == "F32":
            w.add_tensor_info(name, shape, np.dtype(np.float32), 4 * int(np.prod(shape)))
        elif t == "F16":
            w.add_tensor_info(name, shape, np.dtype(np.float16), 2 * int(np.prod(shape)))
        else:
            qtype = GGMLQuantizationType[t]
            byte_shape = gguf.quant_shape_to_byte_shape(shape, qtype)
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8),
                              int(np.prod(byte_shape)), raw_dtype=qtype)
    try:
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        for name, shape, t in plan:
            data, _ = _encode(_tensor_values(p, name, shape), t)
            w.write_tensor_data(data)
        w.flush()
    finally:
        w.close()
        _EMBD_CACHE.clear()
