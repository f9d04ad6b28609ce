"""Deterministic synthetic llama-architecture GGUF models for the built-in bench.

``ensure_model(preset)`` writes, once, a GGUF file with random weights (a fixed
seed) and a synthetic SentencePiece-style vocabulary, using the ``gguf``
package's ``GGUFWriter`` and ``gguf.quants`` (the same code llama.cpp's
``convert_hf_to_gguf.py`` uses). The file is cached under ``models/`` of the
cache root (:func:`capshim.paths.cache_root`), named by
preset, format version and a hash of the preset's parameters, so any change
to the generator invalidates the cache.

Weights are random but shaped so that greedy decoding is both robust to
rounding (fp16 vs fp32 shaders, integer-dot activation quantization) and
sensitive to wrong results. The blocks write about ``residual_ratio`` (8x)
the embedding's size into the residual stream, and attention mostly reads the
token itself (``attn_q`` repeats ``attn_k``). While writing, the generator
runs each "chain" token alone through the stored (rounded) weights in numpy
and sets ``output.weight`` so that the final hidden state of chain token t
gives its fixed successor succ(t) (one random cycle over the chain) a logit
of ``logit_scale`` (24) against about N(0, 24/sqrt(n_embd)) for the others.
So the greedy tokens depend on every block computing what it should (a
kernel that returns garbage, zeros or NaN changes them), while a correct but
differently rounded path keeps a top-1 margin of several logits. The worker
reports the smallest margin it saw, so the gate's robustness is visible.

Random numbers come from numpy's ``PCG64`` bit generator seeded through
``SeedSequence``; both streams are stable across numpy versions (NEP 19), and
uniform floats are made from the raw bits here, so the bytes of a preset do
not depend on numpy's distribution code.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import tempfile
import zlib
from pathlib import Path

# numpy is imported in the functions that use it (writing a model): the CLI imports this module for the
# presets' names, and capshim's small commands must not pay for numpy (tests/test_import_cost.py).
from capshim import paths
from capshim.contracts.suggest import did_you_mean

#: Bump when the generator's output changes for the same preset parameters.
MODEL_FORMAT_VERSION = 2


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
        logit_scale: logit of the successor token when the hidden state
            matches the writer's own single-token forward (the margin scale of
            greedy decoding, in logits).
        chain_size: tokens in the successor cycle (ids ``[3, 3 + chain_size)``;
            None: every ordinary token). The writer runs each chain token
            through the model in numpy, so big models use a subset.
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
    residual_ratio: float = 8.0
    logit_scale: float = 24.0
    chain_size: int | None = None

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
    # docs/contracts.md "Reference facts: Vulkan and llama.cpp" H200 measurements; output.weight in Q8_0.
    "tinyllama-1.1b": Preset(
        name="tinyllama-1.1b", n_vocab=32000, n_embd=2048, n_layer=22, n_head=32,
        n_head_kv=4, n_ff=5632, n_ctx_train=2048, matrix_type="Q4_0",
        embd_type="Q4_0", output_type="Q8_0", chain_size=256,
    ),
    # The same shape, everything in Q8_0 (about 1.17 GB).
    "tinyllama-1.1b-q8_0": Preset(
        name="tinyllama-1.1b-q8_0", n_vocab=32000, n_embd=2048, n_layer=22,
        n_head=32, n_head_kv=4, n_ff=5632, n_ctx_train=2048, matrix_type="Q8_0",
        embd_type="Q8_0", output_type="Q8_0", chain_size=256,
    ),
    # Llama 3 8B shape (meta-llama/Meta-Llama-3-8B config.json: vocab 128256,
    # hidden 4096, 32 layers, 32 heads, 8 KV heads, FFN 14336, context 8192),
    # Q4_0 weights, output.weight in Q8_0 (about 4.9 GB).
    "llama-8b": Preset(
        name="llama-8b", n_vocab=128256, n_embd=4096, n_layer=32, n_head=32,
        n_head_kv=8, n_ff=14336, n_ctx_train=8192, matrix_type="Q4_0",
        embd_type="Q4_0", output_type="Q8_0", chain_size=256,
    ),
}

N_SPECIAL = 3  # <unk>, <s>, </s>
RMS_EPS = 1e-5
CHAIN_KEY = "capshim.chain_size"  # GGUF key: chain tokens are ids [3, 3 + value)
N_BYTE = 256   # <0x00> .. <0xFF>
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2


def capshim_cache_dir() -> Path:
    """The capshim cache folder: :func:`capshim.paths.cache_root` (not created here)."""
    return paths.cache_root()


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
    about 0.15 s for ``tiny`` (about 1.3 MB) and about 21 s on 2
    cores for ``tinyllama-1.1b`` (Q4_0, 652 MB, peak RSS about 0.9 GB; the
    Q8_0 preset is about 1.17 GB).

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
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp made it 0600
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return path


# --------------------------------------------------------------------------
# generation


def _preset(preset: str) -> Preset:
    try:
        return PRESETS[preset]
    except KeyError:
        raise ValueError(
            f"unknown model preset {preset!r}{did_you_mean(preset, PRESETS)} (known: {', '.join(PRESETS)})"
        ) from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
    import numpy as np
    return np.random.PCG64(np.random.SeedSequence([p.seed, zlib.crc32(name.encode())]))


def _uniform(p: Preset, name: str, shape: tuple[int, ...], std: float) -> np.ndarray:
    """Uniform floats with mean 0 and standard deviation ``std``, as float32."""
    import numpy as np
    n = int(np.prod(shape))
    raw = _rng(p, name).random_raw((n + 1) // 2)
    u32 = raw.view(np.uint32)[:n]
    u = (u32 >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)  # [0, 1)
    half = np.float32(std * np.sqrt(3.0))
    return ((u - np.float32(0.5)) * (2 * half)).reshape(shape)


def _permutation(p: Preset, name: str, n: int) -> np.ndarray:
    """A deterministic permutation of ``range(n)`` (Fisher-Yates on raw PCG64 bits)."""
    import numpy as np
    raw = _rng(p, name).random_raw(n)
    perm = np.arange(n, dtype=np.int64)
    for i in range(n - 1, 0, -1):
        j = int(raw[i] % np.uint64(i + 1))
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def chain_tokens(p: Preset) -> np.ndarray:
    """Token ids of the successor cycle: ``[3, 3 + chain_size)`` (all ordinary
    tokens when ``chain_size`` is None)."""
    import numpy as np
    n = p.n_vocab - N_SPECIAL if p.chain_size is None else min(p.chain_size, p.n_vocab - N_SPECIAL)
    return np.arange(N_SPECIAL, N_SPECIAL + n, dtype=np.int64)


def successor_map(p: Preset) -> dict[int, int]:
    """The token -> successor map that ``output.weight`` encodes.

    The chain tokens form one cycle in a random (seeded) order, so greedy
    decoding from any chain token walks the whole cycle.
    """
    import numpy as np
    chain = chain_tokens(p)
    order = chain[_permutation(p, "successor", len(chain))]
    return {int(a): int(b) for a, b in zip(order, np.roll(order, -1))}


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


def _block_values(p: Preset, i: int) -> dict[str, np.ndarray]:
    """float32 values of block ``i``'s tensors (see the module docstring).

    Inputs of every projection are RMS-normalized (RMS 1). ``attn_q`` repeats
    ``attn_k``'s rows per query head (grouped-query layout of ggml: query head
    h reads key head ``h // (n_head / n_head_kv)``), so a token's query matches
    its own key best (score about ``2 * sqrt(head_dim)`` against N(0, 4) for
    other tokens): attention mostly reads the token itself, which keeps the
    single-token forward of the writer close to what happens deep in a
    context. The two projections that write into the residual stream are
    scaled so that all blocks together add about ``residual_ratio`` times the
    embedding's RMS.
    """
    import numpy as np
    d, hd, nkv = p.n_embd, p.head_dim, p.n_head_kv
    b = f"blk.{i}."
    per_write = p.residual_ratio / np.sqrt(2 * p.n_layer)
    k = _uniform(p, b + "attn_k.weight", (nkv * hd, d), np.sqrt(2.0 / d))
    q = np.repeat(k.reshape(nkv, hd, d), p.n_head // nkv, axis=0).reshape(d, d)
    return {
        b + "attn_norm.weight": np.ones(d, dtype=np.float32),
        b + "attn_q.weight": q,
        b + "attn_k.weight": k,
        b + "attn_v.weight": _uniform(p, b + "attn_v.weight", (nkv * hd, d), 1.0 / np.sqrt(d)),
        b + "attn_output.weight": _uniform(p, b + "attn_output.weight", (d, d),
                                           per_write / np.sqrt(d)),
        b + "ffn_norm.weight": np.ones(d, dtype=np.float32),
        b + "ffn_gate.weight": _uniform(p, b + "ffn_gate.weight", (p.n_ff, d), 1.0 / np.sqrt(d)),
        b + "ffn_up.weight": _uniform(p, b + "ffn_up.weight", (p.n_ff, d), 1.0 / np.sqrt(d)),
        # silu(g) * u has RMS ~0.45 for g, u ~ N(0, 1)
        b + "ffn_down.weight": _uniform(p, b + "ffn_down.weight", (d, p.n_ff),
                                        per_write / np.sqrt(p.n_ff) / 0.45),
    }


def _rms_norm(x: np.ndarray, eps: float = RMS_EPS) -> np.ndarray:
    import numpy as np
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def _forward_block(p: Preset, x: np.ndarray, w: dict[str, np.ndarray], i: int) -> np.ndarray:
    """One llama block (``llm_build_llama``) for tokens alone at position 0,
    where attention returns the token's own value vector."""
    import numpy as np
    b = f"blk.{i}."
    n = len(x)
    xn = _rms_norm(x) * w[b + "attn_norm.weight"]
    v = xn @ w[b + "attn_v.weight"].T
    heads = np.repeat(v.reshape(n, p.n_head_kv, p.head_dim), p.n_head // p.n_head_kv, axis=1)
    x = x + heads.reshape(n, p.n_embd) @ w[b + "attn_output.weight"].T
    xn = _rms_norm(x) * w[b + "ffn_norm.weight"]
    g = xn @ w[b + "ffn_gate.weight"].T
    u = xn @ w[b + "ffn_up.weight"].T
    return x + ((g / (1.0 + np.exp(-g))) * u) @ w[b + "ffn_down.weight"].T


def _output_values(p: Preset, phi: np.ndarray) -> np.ndarray:
    """``output.weight``: row succ(t) is the unit final hidden state of chain
    token t (``phi``, in ``chain_tokens`` order) times ``logit_scale``; rows of
    tokens outside the chain are 0, so they never win."""
    import numpy as np
    chain = chain_tokens(p)
    succ = successor_map(p)
    unit = phi / np.linalg.norm(phi, axis=1, keepdims=True)
    w = np.zeros((p.n_vocab, p.n_embd), dtype=np.float32)
    for row, t in enumerate(chain):
        w[succ[int(t)]] = unit[row] * np.float32(p.logit_scale / np.sqrt(p.n_embd))
    return w


def _encode(values: np.ndarray, type_name: str) -> tuple[np.ndarray, np.ndarray]:
    """Values -> (array to write, the float32 values llama.cpp will see), with
    ``gguf.quants`` (quantize, then dequantize for the writer's own forward)."""
    import numpy as np
    from gguf import GGMLQuantizationType, quants

    if type_name == "F32":
        data = values.astype(np.float32)
        return data, data
    if type_name == "F16":
        data = values.astype(np.float16)
        return data, data.astype(np.float32)
    qtype = GGMLQuantizationType[type_name]
    data = quants.quantize(values, qtype)
    return data, quants.dequantize(data, qtype).reshape(values.shape).astype(np.float32)



def _encode_block(p: Preset, i: int, names: list[str], types: dict[str, str]):
    """Block ``i``'s tensors, in file order: ``[(name, (data, seen)), ...]``."""
    values = _block_values(p, i)
    return [(name, _encode(values.pop(name), types[name])) for name in names]


def _encoded_blocks(p: Preset, plan, types: dict[str, str], workers: int | None):
    """Yield ``(i, encoded block i)`` for every block in order, computing up to
    ``workers`` blocks ahead in a thread pool (1: no threads)."""

    if workers is None:
        workers = min(8, len(os.sched_getaffinity(0)))
    workers = max(1, int(workers))
    names = {i: [n for n, _, _ in plan if n.startswith(f"blk.{i}.")] for i in range(p.n_layer)}
    if workers == 1:
        for i in range(p.n_layer):
            yield i, _encode_block(p, i, names[i], types)
        return
    with cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="capshim-model") as pool:
        pending: dict[int, cf.Future] = {}
        try:
            for i in range(p.n_layer):
                for j in range(i, min(p.n_layer, i + workers)):
                    if j not in pending:
                        pending[j] = pool.submit(_encode_block, p, j, names[j], types)
                yield i, pending.pop(i).result()
        finally:
            for f in pending.values():
                f.cancel()


def write_model(p: Preset, path: Path, workers: int | None = None) -> None:
    """Write preset ``p`` to ``path`` (overwriting) with ``gguf.GGUFWriter``.

    Tensors are generated, quantized and written one block at a time
    (streaming). Up to ``workers`` blocks (default: the CPUs this process may
    use, at most 8) are generated and quantized ahead in threads (numpy
    releases the GIL in the heavy parts); they are written in file order and
    every tensor has its own seeded stream, so the bytes do not depend on
    ``workers``. Peak memory is about ``workers + 1`` blocks (float32 values
    plus their rounded copies: about 1.9 GB per block of ``llama-8b``). Meanwhile the
    chain tokens are run through the stored (rounded) weights in numpy to
    build ``output.weight``. The keys are those llama.cpp's ``llama``
    architecture loader reads (``src/llama-model.cpp``, ``src/llama-vocab.cpp``):
    context/embedding/feed-forward lengths, block and head counts, RMS
    epsilon, RoPE dimension and base, SentencePiece (``llama``) tokenizer with
    BOS/EOS/UNK ids; plus ``capshim.chain_size``.

    Raises:
        ValueError: a quantized row length is not a multiple of 32.
        OSError: the file cannot be written.
    """
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType, LlamaFileType

    plan = _tensor_plan(p)
    for _, shape, t in plan:
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
    w.add_layer_norm_rms_eps(RMS_EPS)
    w.add_vocab_size(p.n_vocab)
    ftype = {"F16": LlamaFileType.MOSTLY_F16, "Q8_0": LlamaFileType.MOSTLY_Q8_0,
             "Q4_0": LlamaFileType.MOSTLY_Q4_0}[p.matrix_type]
    w.add_file_type(int(ftype))
    if p.matrix_type not in ("F16", "F32"):
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    tokens, scores, token_types = vocabulary(p)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(token_types)
    w.add_unk_token_id(UNK_ID)
    w.add_bos_token_id(BOS_ID)
    w.add_eos_token_id(EOS_ID)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    # Read by capshim.bench.builtin: prompt ids are drawn from the chain.
    w.add_uint32(CHAIN_KEY, len(chain_tokens(p)))
    w.add_uint32("capshim.model_format_version", MODEL_FORMAT_VERSION)

    types = {name: t for name, _, t in plan}
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
        embd = _rms_norm(_uniform(p, "token_embd.weight", (p.n_vocab, p.n_embd), 1.0), 0.0)
        data, seen = _encode(embd, types["token_embd.weight"])
        w.write_tensor_data(data)
        x = seen[chain_tokens(p)].astype(np.float32)
        del embd, data, seen
        for i, encoded in _encoded_blocks(p, plan, types, workers):
            stored = {}
            for name, (data, seen) in encoded:
                w.write_tensor_data(data)
                stored[name] = seen
            x = _forward_block(p, x, stored, i)
            del encoded, stored
        norm = np.ones(p.n_embd, dtype=np.float32)
        w.write_tensor_data(norm)
        phi = _rms_norm(x) * norm
        data, _ = _encode(_output_values(p, phi), types["output.weight"])
        w.write_tensor_data(data)
        w.flush()
    finally:
        w.close()
