"""A torch-free forward pass of a BERT sentence encoder (all-MiniLM-L6-v2): numpy and ``tokenizers``.

Use through ``embed.Embedder``; this module only knows a model directory::

    enc = MiniLM.load(path)             # config.json, model.safetensors, tokenizer.json
    vecs = enc.encode(["a", "b"])       # float32 (2, 384), each row of unit length

What it reproduces, so that its vectors are the model's (``tests/test_memory_embed.py`` checks a
few against a reference implementation): WordPiece with the model's own ``tokenizer.json``
(lower-casing, ``[CLS]``/``[SEP]``), truncation at ``MAX_TOKENS`` (the model's
``max_seq_length``), post-LN BERT layers with exact-erf GELU, mean pooling over the real tokens
(padding masked out of attention and of the mean), then L2 normalisation.

``read_safetensors`` reads the weights without the ``safetensors`` package: the format is an
8-byte little-endian header length, a JSON header (dtype, shape, byte offsets per tensor), then
the raw little-endian tensors.
"""

from __future__ import annotations

import contextlib
import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

MAX_TOKENS = 256
"""Tokens per text, ``[CLS]`` and ``[SEP]`` included (the model was trained with this limit)."""
BATCH = 32
SMALL = 4
"""Up to this many texts (a query) are encoded on one BLAS thread: for products this small, threads
cost more than they give, and on a busy machine (other processes on every core) a threaded BLAS
was ten times slower per query (300 ms against 30 ms)."""
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a ``.safetensors`` file, as read-only arrays over one memory map."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {info['dtype']!r}")
        start, end = info["data_offsets"]
        out[name] = raw[start:end].view(np.dtype(dtype).newbyteorder("<")).reshape(info["shape"])
    return out


_CONTROLLER: Any = None


def one_thread() -> contextlib.AbstractContextManager[Any]:
    """BLAS limited to one thread while the block runs (``threadpoolctl``, in the extra; without it, unchanged)."""
    global _CONTROLLER
    if _CONTROLLER is None:
        try:
            from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped,unused-ignore]
        except ImportError:
            _CONTROLLER = False
        else:
            _CONTROLLER = ThreadpoolController()
    if _CONTROLLER is False:
        return contextlib.nullcontext()
    limited: contextlib.AbstractContextManager[Any] = _CONTROLLER.limit(limits=1, user_api="blas")
    return limited


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7): numpy has no erf, and the model's
    # GELU is the exact one, not the tanh approximation.  In place where it can: this runs on
    # the widest activations of the model.
    a = np.abs(x)
    e = np.exp(-(a * a))
    t = a
    t *= 0.3275911
    t += 1.0
    np.reciprocal(t, out=t)
    y = t * 1.061405429
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        y += c
        y *= t
    y *= e
    np.subtract(1.0, y, out=y)
    return np.copysign(y, x, out=y)


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x * np.float32(1 / math.sqrt(2))))


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


@dataclass(frozen=True, slots=True)
class _Layer:
    qkv_w: np.ndarray  # (hidden, 3 * hidden): query, key and value in one product
    qkv_b: np.ndarray
    out_w: np.ndarray
    out_b: np.ndarray
    ln1_w: np.ndarray
    ln1_b: np.ndarray
    up_w: np.ndarray
    up_b: np.ndarray
    down_w: np.ndarray
    down_b: np.ndarray
    ln2_w: np.ndarray
    ln2_b: np.ndarray


class MiniLM:
    """One loaded encoder. ``encode`` is thread-safe (it keeps no state between calls)."""

    def __init__(self, tensors: dict[str, np.ndarray], config: dict[str, Any], tokenizer: Any) -> None:
        def t(name: str) -> np.ndarray:
            return np.ascontiguousarray(tensors[name], dtype=np.float32)

        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.dim = int(config["hidden_size"])
        self.word = t("embeddings.word_embeddings.weight")
        self.pos = t("embeddings.position_embeddings.weight")
        self.type0 = t("embeddings.token_type_embeddings.weight")[0]
        self.ln_w, self.ln_b = t("embeddings.LayerNorm.weight"), t("embeddings.LayerNorm.bias")
        self.layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            qkv = [f"{p}attention.self.{k}" for k in ("query", "key", "value")]
            self.layers.append(_Layer(
                qkv_w=np.concatenate([t(f"{q}.weight") for q in qkv]).T.copy(),
                qkv_b=np.concatenate([t(f"{q}.bias") for q in qkv]),
                out_w=t(f"{p}attention.output.dense.weight").T.copy(), out_b=t(f"{p}attention.output.dense.bias"),
                ln1_w=t(f"{p}attention.output.LayerNorm.weight"), ln1_b=t(f"{p}attention.output.LayerNorm.bias"),
                up_w=t(f"{p}intermediate.dense.weight").T.copy(), up_b=t(f"{p}intermediate.dense.bias"),
                down_w=t(f"{p}output.dense.weight").T.copy(), down_b=t(f"{p}output.dense.bias"),
                ln2_w=t(f"{p}output.LayerNorm.weight"), ln2_b=t(f"{p}output.LayerNorm.bias")))
        tokenizer.enable_truncation(max_length=min(MAX_TOKENS, self.pos.shape[0]))
        tokenizer.no_padding()
        self.tokenizer = tokenizer

    @classmethod
    def load(cls, directory: Path) -> MiniLM:
        """The encoder in ``directory`` (read once; nothing else is opened or fetched)."""
        from tokenizers import Tokenizer

        config = json.loads((directory / "config.json").read_text("utf-8"))
        tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        return cls(read_safetensors(directory / "model.safetensors"), config, tokenizer)

    def encode(self, texts: Sequence[str], *, batch: int = BATCH) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in the order given."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids = [e.ids for e in self.tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # similar lengths share a batch: less padding
        with one_thread() if len(texts) <= SMALL else contextlib.nullcontext():
            for start in range(0, len(order), batch):
                chunk = order[start:start + batch]
                out[chunk] = self._forward([ids[i] for i in chunk])
        return out

    def _forward(self, ids: list[list[int]]) -> np.ndarray:
        n, width = len(ids), max(len(x) for x in ids)
        tok = np.zeros((n, width), dtype=np.int64)
        mask = np.zeros((n, width), dtype=np.float32)
        for i, x in enumerate(ids):
            tok[i, :len(x)] = x
            mask[i, :len(x)] = 1.0
        d = self.dim
        h = (self.word[tok] + self.pos[:width] + self.type0).reshape(n * width, d)  # 2-D: one BLAS call per product
        h = _layer_norm(h, self.ln_w, self.ln_b, self.eps)
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        hd = d // self.heads
        scale = np.float32(1 / math.sqrt(hd))
        for L in self.layers:
            qkv = (h @ L.qkv_w + L.qkv_b).reshape(n, width, 3, self.heads, hd).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            s = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = (s @ v).transpose(0, 2, 1, 3).reshape(n * width, d)
            h = _layer_norm(a @ L.out_w + L.out_b + h, L.ln1_w, L.ln1_b, self.eps)
            f = _gelu(h @ L.up_w + L.up_b) @ L.down_w + L.down_b
            h = _layer_norm(f + h, L.ln2_w, L.ln2_b, self.eps)
        h = h.reshape(n, width, d)
        pooled = (h * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1.0)
        norm = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norm, 1e-12)).astype(np.float32)
