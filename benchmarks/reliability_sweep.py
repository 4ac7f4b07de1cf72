"""Reliability sweep: `dictembed` and `dictembed serve` tried as a careful user and an attacker would.

    nice -n 10 python benchmarks/reliability_sweep.py                   # the Markdown table, one row a class
    python benchmarks/reliability_sweep.py --verbose --json sweep.json  # and every case; and a JSON record
    python benchmarks/reliability_sweep.py --only disks,push --keep     # some classes; keep the scratch folder

Builds a random 2-layer BERT (hidden 32, the standard uncased vocabulary), trains a tiny DefSent+ reverse
dictionary on a toy dictionary once with `dictembed train`, serves it (and two altered copies) with
`dictembed serve` in subprocesses, then runs each case: a small record saying what to set up in the case's
own scratch folder, what to run (the command line, or a request to a server), and what was
promised. Every case has a timeout.

- **executed**: the case ran to completion within its timeout;
- **handled**: the outcome is the promised one: the right output; or a non-zero exit with exactly one
  `dictembed: error:` line (argparse's `dictembed CMD: error:` for usage errors) naming the file, line, model
  or path; or, from the server, the right status code and body;
- **lost**: data silently lost or wrong: exit 0 but the output missing, short or different from a reference
  (computed in this process with `Encoder.encode`), a file left at the final path by a failed run, a
  previous file clobbered;
- **tracebacks**: stderr, a server response or the server's log during the request contains `Traceback`.

Commands run as `python -m dictembed` would: each in a process of its own, forked from a "zygote" that has
imported dictembed's dependencies once (with a fresh random state), so that a case costs its work rather than
seconds of imports. A case whose environment changes what is read at import (HF_HUB_OFFLINE, proxies,
PYTHONPATH), the interruption and repeat cases, and every case under `--fresh` start a fresh interpreter.

Disk cases mount small tmpfs folders (`mount -t tmpfs`, which needs root); where mounting fails, the same
cases inject the failure instead (ENOSPC or EROFS raised by every write under the folder, through a
`sitecustomize` module on the child's PYTHONPATH). Everything mounted is unmounted at the end of its case and,
as a last resort, when the sweep exits. Cases that can run at the same time do, `--jobs` at a time; the
server's timing cases run first, on an otherwise idle sweep. The exit status is 1 when a case is not handled.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import gzip
import hashlib
import http.client
import io
import json
import logging
import os
import pickle
import platform
import pty
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
import unicodedata
import urllib.parse
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

DICTEMBED = (sys.executable, "-m", "dictembed")  # what the `dictembed` script runs, without its shim
CLASSES = ("server", "model folders", "pipes and text", "disks", "push", "interruptions")
ERROR_LINE = re.compile(r"^dictembed(?: [\w-]+)*: error: ")
STAGING = "*.partial*"  # staging files and folders of every writer (dictembed.io.STAGING_SUFFIX)

# The served dictionary: `car`, `automobile` and `motor car` share their definitions (one result); the long
# headwords give a backtracking regular-expression engine something to choke on.
CAR = ("a vehicle with four wheels and an engine", "a machine you drive on roads")
SERVED: tuple[tuple[str, str, str], ...] = (
    ("dog", "a domesticated animal that barks", "n"),
    ("dog", "a loyal pet that chases cats", "n"),
    ("cat", "a small pet that purrs and catches mice", "n"),
    ("cat", "a feline animal kept at home", "n"),
    *((word, definition, "n") for word in ("car", "automobile", "motor car") for definition in CAR),
    ("rain", "water that falls from clouds", "n"),
    ("rain", "to fall as drops of water from the sky", "v"),
    ("king", "a man who rules a country", "n"),
    ("bread", "food made of baked flour", "n"),
    ("river", "a large natural stream of water", "n"),
    ("run", "to move fast on foot", "v"),
    ("quick", "moving or able to move fast", "a"),
    ("quickly", "with speed, in a fast way", "r"),
    ("ice cream", "a sweet frozen food made from milk", "n"),
    ("supercalifragilisticexpialidocious", "extraordinarily good or wonderful", "a"),
    ("a" * 40 + "b", "a very long scream that ends in a b", "n"),
)
HEADWORDS = tuple(dict.fromkeys(word for word, _, _ in SERVED))
RESULTS = len(HEADWORDS) - 2  # the three synonyms are one result
SENTENCES = tuple(f"a dog barks at the postman number {i}" for i in range(1000))  # 128 kB as float32
LONG = tuple(f"sentence {i} about a river that runs to the sea past {i % 97} mills" for i in range(3000))
ABC = ("a", "b", "c")
WORDS = tuple(f"word{i}" for i in range(10))
TSV = "word\tdefinition\n" + "".join(f"{w}\ta definition of the word {w}\n" for w in WORDS)
NESTED = '{"a":' * 200_000


# ------------------------------------------------------------------------------------ the workspace
@dataclass
class Server:
    """A `dictembed serve` subprocess and what it printed."""

    name: str
    process: subprocess.Popen[bytes]
    port: int
    err: list[bytes] = field(default_factory=list)
    ready: bool = False
    problem: str = ""

    def tracebacks(self) -> int:
        """How many tracebacks the server has logged so far."""
        return b"".join(self.err).count(b"Traceback")


@dataclass
class Workspace:
    """The scratch root, the tiny models and data every case shares, the servers, the references."""

    root: Path
    env: dict[str, str]
    servers: dict[str, Server] = field(default_factory=dict)
    train_reference: Future[Path] | None = None
    zygote: Zygote | None = None
    mountable: bool | None = None
    _refs: dict[str, np.ndarray] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def bert(self) -> Path:
        return self.root / "bert"

    @property
    def model(self) -> Path:
        return self.root / "trained" / "toy-reverse-dictionary"

    @property
    def pooled(self) -> Path:
        return self.root / "bert-pooled"

    def values(self) -> dict[str, str]:
        paths = {"root": self.root, "data": self.data, "bert": self.bert, "pooled": self.pooled, "model": self.model}
        return {key: str(path) for key, path in paths.items()}

    def reference(self, lines: tuple[str, ...]) -> np.ndarray:
        """The float32 embeddings of `lines` by the trained model, computed in this process once."""
        key = hashlib.sha256("\n".join(lines).encode()).hexdigest()
        with self._lock:
            if key not in self._refs:
                import torch
                from transformers.utils import logging as transformers_logging

                from dictembed.encoder import Encoder

                torch.set_num_threads(1)
                transformers_logging.disable_progress_bar()
                encoder = Encoder.load(str(self.model), device="cpu")
                self._refs[key] = np.asarray(encoder.encode(list(lines), batch_size=32), dtype=np.float32)
            return self._refs[key]


@dataclass
class Scratch:
    """One case's own folder, the values its templates are filled with, its environment and what to undo."""

    folder: Path
    workspace: Workspace
    values: dict[str, str]
    env: dict[str, str]
    undo: list[Callable[[], None]] = field(default_factory=list)
    probe: Probe | None = None

    def fill(self, template: str) -> str:
        return template.format(**self.values)

    def path(self, template: str) -> Path:
        return self.folder / self.fill(template)


Step = Callable[[Scratch], None]


@dataclass
class Ran:
    """What a command did: its exit status (None: killed at the timeout), output and time."""

    rc: int | None
    out: str
    err: str
    seconds: float


@dataclass
class Outcome:
    """One case's verdict."""

    cls: str
    name: str
    command: str
    executed: bool
    handled: bool
    lost: bool
    traceback: bool
    seconds: float
    detail: str = ""
    output: str = ""


# ------------------------------------------------------------------------------------ running things
ZYGOTE = r"""
import importlib, io, json, logging, os, signal, sys, traceback

for name in ZYGOTE_MODULES:
    try:
        importlib.import_module(name)
    except Exception:
        pass
from dictembed.cli import main


def command(job):
    os.setsid()
    for fd, path, flags in [(0, job["stdin"], os.O_RDONLY), (1, job["stdout"], os.O_WRONLY),
                            (2, job["stderr"], os.O_WRONLY | os.O_NOCTTY)]:
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    if job["umask"] is not None:
        os.umask(job["umask"])
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                  line_buffering=True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    sys.argv = ["dictembed", *job["argv"]]
    import numpy, torch  # a fresh process's random state, not the zygote's (random reseeds itself at fork)
    torch.seed()
    numpy.random.seed()
    try:
        code = main(job["argv"])
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


def launch(job):
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        command(job)
    with open(job["pid"] + ".tmp", "w") as f:
        f.write(str(pid))
    os.replace(job["pid"] + ".tmp", job["pid"])
    _, status = os.waitpid(pid, 0)
    with open(job["status"] + ".tmp", "w") as f:
        f.write(str(os.waitstatus_to_exitcode(status)))
    os.replace(job["status"] + ".tmp", job["status"])
    os._exit(0)


signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the launchers are reaped as they end
signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in `python -m dictembed` on a terminal
print("ready", flush=True)
buffer = b""
while True:
    chunk = os.read(0, 1 << 16)
    if not chunk:
        break
    buffer += chunk
    while b"\n" in buffer:
        line, buffer = buffer.split(b"\n", 1)
        if os.fork() == 0:
            launch(json.loads(line))
"""
ZYGOTE_MODULES = (  # what the commands import on their way: imported once, before any command is forked
    "torch",
    "transformers",
    "sentence_transformers",
    "dictembed.cli",
    "dictembed.encoder",
    "dictembed.loading",
    "dictembed.reverse_dictionary",
    "dictembed.streaming",
    "dictembed.training",
    "dictembed.recipes",
    "dictembed.dictionary",
    "dictembed.cache",
    "dictembed.hub",
    "dictembed.serve",
    "dictembed.evaluation",
)
ZYGOTE_ENV = {"DICTEMBED_CACHE", "DICTEMBED_PROGRESS_INTERVAL"}  # what may differ: read when used, not at import


class Zygote:
    """A process that has imported what `dictembed` imports and forks each command from there: each command
    runs `dictembed.cli.main` in a fresh process of its own, without the seconds of imports."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self.env = env
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        code = f"ZYGOTE_MODULES = {ZYGOTE_MODULES!r}\n{ZYGOTE}"
        self.log = open(folder / "zygote.err", "wb")  # noqa: SIM115 - open for the zygote's life
        self.process = subprocess.Popen(
            [sys.executable, "-c", code], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log
        )
        self.lock = threading.Lock()
        self.count = 0
        assert self.process.stdout is not None
        self.ready = self.process.stdout.readline().strip() == b"ready"

    def launch(self, job: dict[str, Any]) -> ZygoteChild:
        with self.lock:
            self.count += 1
            job_dir = self.folder / str(self.count)
        job_dir.mkdir()
        job.update(pid=str(job_dir / "pid"), status=str(job_dir / "status"))
        with self.lock:
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps(job).encode() + b"\n")
            self.process.stdin.flush()
        return ZygoteChild(job_dir)

    def fits(self, env: dict[str, str]) -> bool:
        """Whether a command with `env` may be forked from here (what is read at import is the same)."""
        keys = (set(env) | set(self.env)) - ZYGOTE_ENV
        return self.ready and self.process.poll() is None and all(env.get(k) == self.env.get(k) for k in keys)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.log.close()


class ZygoteChild:
    """A command forked by the zygote, with what `run` needs of a `Popen`: pid, poll, wait, send_signal."""

    def __init__(self, job_dir: Path) -> None:
        self.job_dir = job_dir
        deadline = time.monotonic() + 60
        while not (job_dir / "pid").exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the zygote did not fork the command")
            time.sleep(0.01)
        self.pid = int((job_dir / "pid").read_text())
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and (self.job_dir / "status").exists():
            self.returncode = int((self.job_dir / "status").read_text())
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("dictembed", timeout or 0)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)


def run(
    argv: Iterable[str],
    scratch: Scratch,
    timeout: float,
    stdin: bytes | None = None,
    tty: bool = False,
    umask: int | None = None,
    on_start: Callable[[Any, list[bytes]], None] | None = None,
    fresh: bool = False,
) -> Ran:
    """Run `dictembed ARGV` in the case's folder, forked from the zygote where the case's environment allows
    and `fresh` does not ask otherwise, else in a fresh interpreter: stdin fed from a pipe, stderr on a
    pseudo-terminal with `tty`; the whole process group killed at `timeout`. `on_start(process, err_chunks)`
    runs in a thread while it runs."""
    argv = list(argv)
    zygote = scratch.workspace.zygote
    if zygote is not None and not fresh and zygote.fits(scratch.env):
        return _run_forked(zygote, argv, scratch, timeout, stdin, tty, umask, on_start)
    master = slave = -1
    if tty:
        master, slave = terminal()
    process = subprocess.Popen(
        [*DICTEMBED, *argv],
        cwd=scratch.folder,
        env=scratch.env,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave if tty else subprocess.PIPE,
        preexec_fn=lambda: _child(umask),
    )
    err: list[bytes] = []
    out: list[bytes] = []
    readers = [
        threading.Thread(target=_drain, args=(master if tty else process.stderr, err), daemon=True),
        threading.Thread(target=_drain, args=(process.stdout, out), daemon=True),
    ]
    if stdin is not None:
        readers.append(threading.Thread(target=_feed, args=(process.stdin, stdin), daemon=True))
    return _finish(process, readers, out, err, timeout, on_start, slave, master)


def terminal() -> tuple[int, int]:
    """A pseudo-terminal (master, slave) of 24 x 100 characters: tqdm draws nothing on a terminal 0 wide."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    return master, slave


def _child(umask: int | None) -> None:
    """In a fresh command's process before it starts: a process group of its own (killed whole at the
    timeout), Ctrl-C's default (a sweep started in the background inherits SIGINT ignored, which Python
    keeps), and the case's umask."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if umask is not None:
        os.umask(umask)


def _run_forked(
    zygote: Zygote,
    argv: list[str],
    scratch: Scratch,
    timeout: float,
    stdin: bytes | None,
    tty: bool,
    umask: int | None,
    on_start: Callable[[Any, list[bytes]], None] | None,
) -> Ran:
    """`run` through the zygote. The command opens its stdin, stdout and stderr as this process's pipe ends
    (`/proc/PID/fd/N`: anonymous pipes, as a shell gives them) or the terminal by name."""

    def named(fd: int) -> str:
        return f"/proc/{os.getpid()}/fd/{fd}"

    master = slave = -1
    if tty:
        master, slave = terminal()
    in_read, in_write = os.pipe() if stdin is not None else (-1, -1)
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe() if not tty else (-1, -1)
    job = {
        "argv": argv,
        "cwd": str(scratch.folder),
        "env": scratch.env,
        "umask": umask,
        "stdin": named(in_read) if stdin is not None else os.devnull,
        "stdout": named(out_write),
        "stderr": os.ttyname(slave) if tty else named(err_write),
    }
    err: list[bytes] = []
    out: list[bytes] = []
    readers = [
        threading.Thread(target=_drain, args=(master if tty else err_read, err), daemon=True),
        threading.Thread(target=_drain, args=(out_read, out), daemon=True),
    ]
    for reader in readers:
        reader.start()
    if stdin is not None:
        feeder = os.fdopen(in_write, "wb", buffering=0)  # closed by _feed once written: the command sees the end
        threading.Thread(target=_feed, args=(feeder, stdin), daemon=True).start()
    try:
        process = zygote.launch(job)
        ran = _finish(process, [], out, err, timeout, on_start, slave, -1)
    finally:
        for fd in (out_write, err_write, in_read):  # this process's ends: the readers see the end
            with contextlib.suppress(OSError):
                os.close(fd) if fd >= 0 else None
        for reader in readers:
            reader.join(10)
        for fd in (out_read, err_read, master):
            with contextlib.suppress(OSError):
                os.close(fd) if fd >= 0 else None
    ran.out, ran.err = b"".join(out).decode(errors="replace"), b"".join(err).decode(errors="replace")
    return ran


def _finish(
    process: Any,
    readers: list[threading.Thread],
    out: list[bytes],
    err: list[bytes],
    timeout: float,
    on_start: Callable[[Any, list[bytes]], None] | None,
    slave: int,
    master: int,
) -> Ran:
    """Wait for `process` (killing its process group at `timeout`) while `readers` collect its output."""
    for reader in readers:
        reader.start()
    if on_start is not None:
        threading.Thread(target=on_start, args=(process, err), daemon=True).start()
    start = time.monotonic()
    try:
        rc: int | None = process.wait(timeout)
    except subprocess.TimeoutExpired:
        rc = None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(30)
    seconds = time.monotonic() - start
    if slave >= 0:
        os.close(slave)  # kept open until now: a terminal without any slave open reads as ended
    for reader in readers:
        reader.join(10)
    if master >= 0:
        os.close(master)
    return Ran(rc, b"".join(out).decode(errors="replace"), b"".join(err).decode(errors="replace"), seconds)


def _drain(source: Any, into: list[bytes]) -> None:
    """Read a pipe, a FIFO (by its path) or a pseudo-terminal's master fd to its end into `into`."""
    opened = isinstance(source, Path)
    if opened:
        source = open(source, "rb", buffering=0)  # noqa: SIM115 - closed below
    try:
        while True:
            try:
                if isinstance(source, int):
                    chunk = os.read(source, 1 << 16)
                else:  # what has arrived, not a full buffer: a waiting case reads stderr as it comes
                    chunk = source.read1(1 << 16) if hasattr(source, "read1") else source.read(1 << 16)
            except OSError:  # the terminal's other end closed
                return
            if not chunk:
                return
            into.append(chunk)
    finally:
        if opened:
            source.close()


def _feed(target: Any, data: bytes) -> None:
    """Write `data` to a pipe or a FIFO (by its path), then close it."""
    with contextlib.suppress(BrokenPipeError, OSError):
        stream = open(target, "wb", buffering=0) if isinstance(target, Path) else target  # noqa: SIM115
        try:
            stream.write(data)
        finally:
            stream.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if ERROR_LINE.match(line)]


def shown(argv: Iterable[str], stdin: bytes | None = None, scratch: Scratch | None = None) -> str:
    """The command as a user would type it, with the environment variables the case changed."""
    text = "dictembed " + " ".join(_quote(a) for a in argv)
    if scratch is not None:
        base, env = scratch.workspace.env, scratch.env
        changed = [f"{k}={_quote(v)}" for k, v in sorted(env.items()) if base.get(k) != v and "PROXY" not in k.upper()]
        changed += [f"-u {k}" for k in sorted(set(base) - set(env))]
        changed += [f"*_PROXY={_quote(v)}" for k, v in env.items() if k == "HTTPS_PROXY" and base.get(k) != v]
        text = f"env {' '.join(changed)} {text}" if changed else text
    if stdin is not None:
        text = f"printf {_quote(stdin.decode(errors='replace')[:40])} | {text}"
    return text


def _quote(arg: str) -> str:
    arg = arg if len(arg) < 120 else arg[:60] + "..." + arg[-20:]
    return arg if re.fullmatch(r"[\w@%+=:,./-]+", arg) else "'" + arg.replace("'", "'\\''") + "'"


def tail(*texts: str, limit: int = 1500) -> str:
    text = "\n".join(t.strip() for t in texts if t.strip())
    return text if len(text) <= limit else "..." + text[-limit:]


class Probe:
    """A localhost TCP listener counting connections: the proxy of a case that must not use the network."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(16)
        self.socket.settimeout(0.2)
        self.port = int(self.socket.getsockname()[1])
        self.connections = 0
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                continue
            self.connections += 1
            connection.close()

    def close(self) -> None:
        self.stopped = True
        self.socket.close()


# ------------------------------------------------------------------------------------ setup steps
REMOVE = object()  # edit_json: delete the key


def copy_model(dst: str = "m", src: str = "{model}") -> Step:
    """A copy of the trained model (or of `src`) at `dst`."""
    return lambda s: shutil.copytree(s.fill(src), s.path(dst), symlinks=True) and None


def write(rel: str, data: str | bytes, encoding: str = "utf-8") -> Step:
    """Write `data` to `rel` (text in `encoding`)."""

    def step(s: Scratch) -> None:
        path = s.path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode(encoding))

    return step


def damage(rel: str, how: str) -> Step:
    """Remove the file ("rm"), cut it to half ("half") or to nothing ("empty")."""

    def step(s: Scratch) -> None:
        path = s.path(rel)
        if how == "rm":
            path.unlink()
        else:
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2] if how == "half" else b"")

    return step


def edit_json(rel: str, keys: tuple[str | int, ...], value: Any) -> Step:
    """Set (or with REMOVE delete) the value at `keys` in the JSON file `rel`."""

    def step(s: Scratch) -> None:
        path = s.path(rel)
        data = json.loads(path.read_text())
        node = data
        for key in keys[:-1]:
            node = node[key]
        if value is REMOVE:
            del node[keys[-1]]
        else:
            node[keys[-1]] = s.fill(value) if isinstance(value, str) else value
        path.write_text(json.dumps(data))

    return step


def edit_matrix(rel: str, how: str) -> Step:
    """Put a NaN or an infinity into the entry matrix, or cut it to half its width."""

    def step(s: Scratch) -> None:
        from safetensors.numpy import load_file, save_file

        path = s.path(rel)
        tensors = load_file(str(path))
        matrix = tensors["matrix"].copy()
        if how == "narrow":
            matrix = np.ascontiguousarray(matrix[:, : matrix.shape[1] // 2])
        else:
            matrix[1, 3] = np.nan if how == "nan" else np.inf
        save_file({**tensors, "matrix": matrix}, str(path))

    return step


def link(rel: str, target: str) -> Step:
    def step(s: Scratch) -> None:
        s.path(rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(s.fill(target), s.path(rel))

    return step


def nothing(scratch: Scratch) -> None:
    """No setup: what the case needs is not there."""


def mkdir(rel: str) -> Step:
    return lambda s: s.path(rel).mkdir(parents=True, exist_ok=True)


def fifo(rel: str, data: bytes) -> Step:
    """A FIFO that a daemon thread fills with `data` once a reader opens it, then closes."""

    def step(s: Scratch) -> None:
        path = s.path(rel)
        os.mkfifo(path)

        def feed() -> None:
            with open(path, "wb") as f:
                f.write(data)

        threading.Thread(target=feed, daemon=True).start()

    return step


def array(rel: str, rows: int) -> Step:
    """A small float32 .npy already at `rel` (the file an overwrite must not lose)."""

    def step(s: Scratch) -> None:
        np.save(s.path(rel), np.arange(rows * 32, dtype=np.float32).reshape(rows, 32))

    return step


def mount(rel: str, size: str = "16k", read_only: bool = False) -> Step:
    """A fresh tmpfs of `size` at `rel`; where mounting is impossible, writes under it fail by injection."""

    def step(s: Scratch) -> None:
        folder = s.path(rel)
        folder.mkdir(parents=True, exist_ok=True)
        if s.workspace.mountable is not False:
            options = f"size={size}" + (",ro" if read_only else "")
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, check=False
            )
            s.workspace.mountable = done.returncode == 0
            if done.returncode == 0:
                s.undo.append(lambda: unmount(folder))
                return
        inject(s, folder, errno.EROFS if read_only else errno.ENOSPC)

    return step


def remount_read_only(rel: str) -> Step:
    def step(s: Scratch) -> None:
        folder = s.path(rel)
        if s.workspace.mountable:
            subprocess.run(["mount", "-o", "remount,ro", str(folder)], capture_output=True, check=True)
        else:
            inject(s, folder, errno.EROFS)

    return step


def unmount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


INJECTION = """
import builtins, errno, io, os
_root, _code = os.environ["SWEEP_FAIL_UNDER"], int(os.environ["SWEEP_FAIL_ERRNO"])
_open, _os_open = builtins.open, os.open
def _refuse(path, writing):
    if writing and os.path.abspath(str(path)).startswith(_root):
        raise OSError(_code, os.strerror(_code), str(path))
def _patched_open(file, mode="r", *args, **kwargs):
    _refuse(file, isinstance(file, (str, bytes, os.PathLike)) and any(c in mode for c in "wax+"))
    return _open(file, mode, *args, **kwargs)
def _patched_os_open(path, flags, *args, **kwargs):
    _refuse(path, flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
    return _os_open(path, flags, *args, **kwargs)
builtins.open = io.open = _patched_open
os.open = _patched_os_open
"""


def inject(s: Scratch, folder: Path, code: int) -> None:
    """Fault injection where no tmpfs can be mounted: every write under `folder` in the child raises `code`."""
    site = s.folder / "_inject"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(INJECTION)
    s.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), s.env.get("PYTHONPATH", "")) if p)
    s.env.update(SWEEP_FAIL_UNDER=str(folder), SWEEP_FAIL_ERRNO=str(code))


def setenv(name: str, value: str | None) -> Step:
    """Set (None: remove) an environment variable of the command."""

    def step(s: Scratch) -> None:
        if value is None:
            s.env.pop(name, None)
        else:
            s.env[name] = s.fill(value)

    return step


def hold_port() -> Step:
    """Listen on a free port for the case's length; its number is `{port}`."""

    def step(s: Scratch) -> None:
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        s.values["port"] = str(taken.getsockname()[1])
        s.undo.append(taken.close)

    return step


def no_network(watched: bool = True) -> Step:
    """Every HTTP(S) proxy of the command is a local listener that takes connections and closes them: a
    network that fails. `watched`: the case fails if the command connects at all."""

    def step(s: Scratch) -> None:
        probe = Probe()
        s.undo.append(probe.close)
        if watched:
            s.probe = probe
        proxy = f"http://127.0.0.1:{probe.port}"
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            s.env[name] = proxy
        for name in ("NO_PROXY", "no_proxy"):
            s.env.pop(name, None)

    return step


class PlantedPickle:
    """A pickle that creates the file `marker` when loaded: harmless proof that a data file ran code."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return open, (self.marker, "w")


def planted_pickle(rel: str, marker: str) -> Step:
    return lambda s: s.path(rel).write_bytes(pickle.dumps(PlantedPickle(str(s.path(marker)))))


# ------------------------------------------------------------------------------------ cases
@dataclass(frozen=True)
class Case:
    """A case: its class, its name and its timeout; `execute` runs it in `scratch` and judges it."""

    cls: str
    name: str
    setup: tuple[Step, ...] = ()
    timeout: float = 180.0

    def execute(self, scratch: Scratch) -> Outcome:
        raise NotImplementedError

    def verdict(self, command: str, seconds: float, problems: list[str], lost: list[str], **extra: Any) -> Outcome:
        """An Outcome from the problems (not handled) and the losses (lost) found."""
        executed = extra.pop("executed", True)
        traceback = extra.pop("traceback", False)
        return Outcome(
            self.cls,
            self.name,
            command,
            executed=executed,
            handled=executed and not problems and not lost and not traceback,
            lost=bool(lost),
            traceback=traceback,
            seconds=round(seconds, 2),
            detail="; ".join([*lost, *problems]),
            **extra,
        )


@dataclass(frozen=True)
class Cli(Case):
    """`dictembed ARGV` in a process of its own (`run`); `code` 0: it must succeed and pass the checks; else it
    must exit `code` with one error line naming each of `names`. Lost: an output missing, short or different
    after exit 0, a file matching `absent` left behind, a `kept` file changed, a file missing from a push."""

    argv: tuple[str, ...] = ()
    stdin: bytes | None = None
    code: int = 0
    names: tuple[str, ...] = ()
    names_any: tuple[str, ...] = ()  # the error line holds one of these
    output: str | None = None  # the file written: it exists, has `rows` rows, is the reference encoding of `lines`
    rows: int | None = None
    lines: tuple[str, ...] | None = None
    json_items: int | None = None  # stdout is one JSON list (or object with "files") of this many items
    files_lack: tuple[str, ...] = ()  # push: not in the listed files
    files_have: tuple[str, ...] = ()  # push: in the listed files
    absent: tuple[str, ...] = ()  # globs that must match nothing afterwards (partial or unwanted output)
    never: tuple[str, ...] = ()  # files whose appearance means that a data file ran code
    kept: tuple[str, ...] = ()  # files whose bytes must not change
    out_has: tuple[str, ...] = ()
    err_has: tuple[str, ...] = ()
    err_lacks: tuple[str, ...] = ()
    err_once: tuple[str, ...] = ()  # each exactly once in stderr
    within: float | None = None
    tty: bool = False
    quiet: bool = True
    umask: int | None = None
    mode: int | None = None  # permission bits of `output`
    offline: bool = True  # HF_HUB_OFFLINE=1

    def execute(self, scratch: Scratch) -> Outcome:
        argv = [scratch.fill(a) for a in self.argv] + (["-q"] if self.quiet else [])
        if self.offline:
            scratch.env["HF_HUB_OFFLINE"] = "1"
        else:
            scratch.env.pop("HF_HUB_OFFLINE", None)
        kept = {p: sha256(scratch.path(p)) for p in self.kept}
        ran = run(argv, scratch, self.timeout, self.stdin, self.tty, self.umask)
        command = shown(argv, self.stdin, scratch)
        command += "  # stderr on a terminal" if self.tty else ""
        command = f"umask {self.umask:03o}; {command}" if self.umask is not None else command
        if ran.rc is None:
            return self.verdict(command, ran.seconds, ["timed out"], [], executed=False, output=tail(ran.err))
        problems, lost = self.judge(ran, scratch, kept)
        traceback = "Traceback" in ran.err
        return self.verdict(command, ran.seconds, problems, lost, traceback=traceback, output=tail(ran.out, ran.err))

    def judge(self, ran: Ran, s: Scratch, kept: dict[str, str]) -> tuple[list[str], list[str]]:
        problems: list[str] = []
        lost: list[str] = []
        lines = error_lines(ran.err)
        if self.code == 0 and ran.rc != 0:
            problems.append(f"exit {ran.rc}, expected 0" + (f": {lines[-1]}" if lines else ""))
        elif self.code != 0:
            if ran.rc != self.code:
                problems.append(f"exit {ran.rc}, expected {self.code}")
            if len(lines) != 1:
                problems.append(f"{len(lines)} error lines, expected 1")
            elif missing := [n for n in map(s.fill, self.names) if n not in lines[0]]:
                problems.append(f"the error line does not name {missing}")
            elif self.names_any and not any(n in lines[0] for n in self.names_any):
                problems.append(f"the error line says none of {list(self.names_any)}")
        if ran.rc == 0:
            lost += self.check_output(s, ran.out)
        for pattern in self.absent:
            if found := sorted(str(p.relative_to(s.folder)) for p in s.folder.glob(s.fill(pattern))):
                lost.append(f"left behind: {', '.join(found)}")
        lost += [f"{p} was changed" for p, digest in kept.items() if sha256(s.path(p)) != digest]
        problems += [f"{p} was created: code from a data file ran" for p in self.never if s.path(p).exists()]
        problems += self.check_push(s, ran.out) if ran.rc == 0 and self.files_lack else []
        problems += [f"stdout lacks {t!r}" for t in map(s.fill, self.out_has) if t not in ran.out]
        problems += [f"stderr lacks {t!r}" for t in map(s.fill, self.err_has) if t not in ran.err]
        problems += [f"stderr holds {t!r}" for t in map(s.fill, self.err_lacks) if t in ran.err]
        problems += [
            f"stderr holds {t!r} {n} times" for t in map(s.fill, self.err_once) if (n := ran.err.count(t)) != 1
        ]
        if self.within is not None and ran.seconds > self.within:
            problems.append(f"took {ran.seconds:.1f} s, more than {self.within:g} s")
        if self.mode is not None and self.output and s.path(self.output).exists():
            mode = s.path(self.output).stat().st_mode & 0o777
            if mode != self.mode:
                problems.append(f"mode {oct(mode)}, expected {oct(self.mode)}")
        if s.probe is not None and s.probe.connections:
            problems.append(f"{s.probe.connections} connection(s) to the network (through the proxy)")
        return problems, lost

    def check_output(self, s: Scratch, out: str) -> list[str]:
        """What is missing, short or different in the output of a command that exited 0."""
        lost: list[str] = []
        if self.output is not None and not s.path(self.output).exists():
            return [f"exit 0 but {self.output} is missing"]
        if self.output is not None and (self.rows is not None or self.lines is not None):
            path = s.path(self.output)
            try:
                data = np.load(path)
                matrix = data["embeddings"] if path.suffix == ".npz" else data
            except (OSError, ValueError, KeyError) as err:
                return [f"exit 0 but {self.output} is unreadable or missing ({type(err).__name__})"]
            rows = len(self.lines) if self.rows is None and self.lines is not None else self.rows
            if matrix.shape[0] != rows:
                lost.append(f"exit 0 but {self.output} has {matrix.shape[0]} rows, expected {rows}")
            elif self.lines is not None:
                reference = s.workspace.reference(self.lines)
                if matrix.shape != reference.shape or not np.allclose(matrix, reference, atol=1e-4):
                    lost.append(f"exit 0 but {self.output} differs from the reference encoding")
        if self.json_items is not None or self.files_have:
            items = listed(out)
            if items is None:
                return [*lost, "exit 0 but stdout is no JSON document"]
            if self.json_items is not None and len(items) != self.json_items:
                lost.append(f"exit 0 but {len(items)} items, expected {self.json_items}")
            if missing := [f for f in self.files_have if f not in items]:
                lost.append(f"does not list {missing}")
        return lost

    def check_push(self, s: Scratch, out: str) -> list[str]:
        """The files of `files_lack` that a push lists all the same."""
        items = listed(out) or []
        return [f"lists {leaked}"] if (leaked := [f for f in map(s.fill, self.files_lack) if f in items]) else []


def listed(out: str) -> list[Any] | None:
    """The JSON list on stdout, or the "files" of the JSON object there; None if stdout is no JSON."""
    try:
        data = json.loads(out)
    except ValueError:
        return None
    return data["files"] if isinstance(data, dict) and "files" in data else data


@dataclass(frozen=True)
class Http(Case):
    """One request to a running server: the status, and what the body must and must not hold."""

    server: str = "main"
    method: str = "GET"
    path: str = "/health"
    body: bytes | None = None
    chunked: bool = False
    status: int = 200
    has: tuple[str, ...] = ()
    lacks: tuple[str, ...] = ()
    results: int | None = None  # len(body["results"]) of a 200
    empty: bool = False  # no body (HEAD)
    within: float | None = None
    headers: tuple[tuple[str, str], ...] = ()  # sent with the request
    answer_headers: tuple[tuple[str, str], ...] = ()  # (lower-case name, value) the answer must carry

    def execute(self, scratch: Scratch) -> Outcome:
        server = scratch.workspace.servers.get(self.server)
        command = f"{self.method} {self.path[:100]} ({self.server} server)"
        if server is None or not server.ready:
            problem = f"the {self.server} server did not start" + (f": {server.problem}" if server else "")
            return self.verdict(command, 0.0, [problem], [], executed=False)
        logged = server.tracebacks()
        answer = request(server.port, self.method, self.path, self.body, self.chunked, self.timeout, self.headers)
        time.sleep(0.05)  # the access log and any error log of the request are written
        logged = server.tracebacks() > logged
        if answer.status is None:
            return self.verdict(command, answer.seconds, [answer.problem], [], executed=answer.problem != "timeout")
        text = answer.body.decode(errors="replace")
        problems: list[str] = []
        lost: list[str] = []
        if answer.status != self.status:
            problems.append(f"status {answer.status}, expected {self.status}")
        problems += [f"body lacks {t!r}" for t in map(scratch.fill, self.has) if t not in text]
        problems += [f"body holds {t!r}" for t in map(scratch.fill, self.lacks) if t in text]
        if self.empty and answer.body:
            problems.append(f"a body of {len(answer.body)} bytes")
        problems += [
            f"header {name}: {answer.headers.get(name)!r}, expected {value!r}"
            for name, value in self.answer_headers
            if answer.headers.get(name) != value
        ]
        if self.within is not None and answer.seconds > self.within:
            problems.append(f"answered in {answer.seconds:.2f} s, more than {self.within:g} s")
        if self.results is not None and answer.status == 200:
            try:
                count = len(json.loads(text)["results"])
            except (ValueError, KeyError, TypeError):
                count = -1
            if count != self.results:
                lost.append(f"{count} results, expected {self.results}")
        traceback = logged or "Traceback" in text
        return self.verdict(command, answer.seconds, problems, lost, traceback=traceback, output=text[:600])


@dataclass
class Answer:
    status: int | None
    body: bytes
    seconds: float
    problem: str = ""
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names


def request(
    port: int,
    method: str,
    path: str,
    body: bytes | None,
    chunked: bool,
    timeout: float,
    extra: tuple[tuple[str, str], ...] = (),
) -> Answer:
    """One HTTP request on a new connection (with the `extra` headers); a server that answers before the whole
    body was sent is read."""
    start = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    headers.update(extra)
    try:
        try:
            if chunked and body is not None:
                pieces = (body[i : i + (1 << 16)] for i in range(0, len(body), 1 << 16))
                connection.request(method, path, body=pieces, headers=headers, encode_chunked=True)
            else:
                connection.request(method, path, body=body, headers=headers)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused mid-body: its answer is already there to read
        response = connection.getresponse()
        answer_headers = {name.lower(): value for name, value in response.getheaders()}
        return Answer(response.status, response.read(), time.monotonic() - start, headers=answer_headers)
    except TimeoutError:
        return Answer(None, b"", time.monotonic() - start, "timeout")
    except (OSError, http.client.HTTPException) as err:
        return Answer(None, b"", time.monotonic() - start, f"no answer: {type(err).__name__}: {err}")
    finally:
        connection.close()


@dataclass(frozen=True)
class Race(Case):
    """Slow requests (`attacks`) sent at once, then a normal query and /health that must each answer in
    `limit` seconds; every request must get a 200 or a 4xx."""

    attacks: tuple[str, ...] = ()
    normal: str = "/api/reverse?q=a+small+pet+that+purrs&k=3"
    limit: float = 1.0
    body: bytes | None = None  # the attacks POST this body (a bulk encode) instead of a GET

    def execute(self, scratch: Scratch) -> Outcome:
        server = scratch.workspace.servers.get("main")
        method = "GET" if self.body is None else "POST"
        command = f"{method} " + " & ".join(self.attacks) + f" & {self.normal} & /health"
        if server is None or not server.ready:
            return self.verdict(command, 0.0, ["the main server did not start"], [], executed=False)
        answers: dict[str, Answer] = {}
        logged = server.tracebacks()

        def ask(path: str, method: str = "GET", body: bytes | None = None) -> None:
            answers[path] = request(server.port, method, path, body, False, self.timeout)

        threads = [threading.Thread(target=ask, args=(path, method, self.body)) for path in self.attacks]
        for thread in threads:
            thread.start()
        time.sleep(0.05)  # the attacks are in
        ask(self.normal)
        ask("/health")
        for thread in threads:
            thread.join(self.timeout)
        problems: list[str] = []
        for path in (self.normal, "/health"):
            got = answers[path]
            if got.status != 200 or got.seconds > self.limit:
                problems.append(f"{path.split('?')[0]}: status {got.status} in {got.seconds:.2f} s")
        slow = [p for p in self.attacks if p not in answers or answers[p].status is None]
        bad = [f"{p}: {answers[p].status}" for p in self.attacks if p in answers and (answers[p].status or 0) >= 500]
        problems += [f"{len(slow)} attack(s) unanswered"] if slow else []
        problems += bad
        seconds = max((a.seconds for a in answers.values()), default=0.0)
        time.sleep(0.05)
        traceback = server.tracebacks() > logged or any(b"Traceback" in a.body for a in answers.values())
        timings = ", ".join(f"{p[:40]}: {a.status} in {a.seconds:.2f} s" for p, a in answers.items())
        return self.verdict(command, seconds, problems, [], executed=not slow, traceback=traceback, output=timings)


@dataclass(frozen=True)
class Stop(Case):
    """A signal to a running server: it must stop with exit 0, `server stopped` on stdout, no traceback."""

    server: str = "main"
    signum: int = signal.SIGINT
    codes: tuple[int, ...] = (0,)  # SIGTERM: uvicorn shuts down, then ends by the signal it caught
    said: str | None = "server stopped\n"  # stdout (None: not checked)

    def execute(self, scratch: Scratch) -> Outcome:
        server = scratch.workspace.servers.get(self.server)
        command = f"kill -{signal.Signals(self.signum).name} <dictembed serve> ({self.server} server)"
        if server is None or not server.ready:
            return self.verdict(command, 0.0, [f"the {self.server} server did not start"], [], executed=False)
        start = time.monotonic()
        server.process.send_signal(self.signum)
        try:
            server.process.wait(self.timeout)
            assert server.process.stdout is not None
            out = server.process.stdout.read()
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()
            return self.verdict(command, self.timeout, ["did not stop"], [], executed=False)
        err = b"".join(server.err).decode(errors="replace")
        rc = server.process.returncode
        problems = [] if rc in self.codes else [f"exit {rc}, expected {' or '.join(map(str, self.codes))}"]
        problems += [] if self.said in (None, out.decode()) else [f"stdout {out.decode()[:80]!r}"]
        problems += [] if "Application shutdown complete" in err else ["no graceful shutdown in the log"]
        return self.verdict(
            command, time.monotonic() - start, problems, [], traceback="Traceback" in err, output=tail(err, limit=600)
        )


@dataclass(frozen=True)
class Inspect(Case):
    """A look at a folder the sweep made with the command line: `check` returns what is wrong, or ''."""

    target: str = "{model}"
    check: Callable[[Path], str] = lambda folder: ""
    what: str = ""

    def execute(self, scratch: Scratch) -> Outcome:
        start = time.monotonic()
        problem = self.check(Path(scratch.fill(self.target)))
        return self.verdict(f"inspect {self.what}", time.monotonic() - start, [problem] if problem else [], [])


@dataclass(frozen=True)
class Interrupt(Case):
    """`dictembed ARGV` sent `signum` once `ready` (a file appears, or stderr shows the text); it must exit
    `code` (None: killed by the signal) saying `line`, leave no file at `output`, and the same command run
    again (plus `again`) must end with the output of an uninterrupted run. Both run in fresh interpreters."""

    argv: tuple[str, ...] = ()
    signum: int = signal.SIGINT
    ready: str = ""  # "file:GLOB" or "stderr:TEXT"
    code: int | None = 130
    line: str = "dictembed: interrupted"
    output: str = ""
    lines: tuple[str, ...] | None = None  # the output is the reference encoding of these lines
    again: tuple[str, ...] = ()

    def execute(self, scratch: Scratch) -> Outcome:
        argv = [scratch.fill(a) for a in self.argv]
        scratch.env.update(HF_HUB_OFFLINE="1", DICTEMBED_PROGRESS_INTERVAL="0.2")
        sent: list[float] = []

        def interrupt(process: subprocess.Popen[bytes], err: list[bytes]) -> None:
            kind, what = self.ready.split(":", 1)
            deadline = time.monotonic() + self.timeout
            while process.poll() is None and time.monotonic() < deadline:
                found = what.encode() in b"".join(err) if kind == "stderr" else any(scratch.folder.glob(what))
                if found:
                    sent.append(time.monotonic())
                    process.send_signal(self.signum)
                    return
                time.sleep(0.05)

        first = run(argv, scratch, self.timeout, on_start=interrupt, fresh=True)
        command = (
            f"{shown(argv, None, scratch)}; kill -{signal.Signals(self.signum).name}; {shown([*argv, *self.again])}"
        )
        if first.rc is None:
            return self.verdict(command, first.seconds, ["timed out"], [], executed=False, output=tail(first.err))
        problems: list[str] = []
        lost: list[str] = []
        if not sent:
            problems.append(f"the command ended (exit {first.rc}) before the signal could be sent")
        expected = -self.signum if self.code is None else self.code
        if first.rc != expected:
            problems.append(f"exit {first.rc} after the signal, expected {expected}")
        if self.line and self.line not in first.err:
            problems.append(f"stderr lacks {self.line!r}")
        if scratch.path(self.output).exists():
            lost.append(f"{self.output} exists after the interruption")
        second = run([*argv, *self.again, "-q"], scratch, self.timeout, fresh=True)
        if second.rc != 0:
            problems.append(f"the run again: exit {second.rc}: {tail(second.err, limit=300)}")
        else:
            lost += self.compare(scratch)
        traceback = "Traceback" in first.err + second.err
        seconds = first.seconds + second.seconds
        return self.verdict(command, seconds, problems, lost, traceback=traceback, output=tail(first.err, second.err))

    def compare(self, s: Scratch) -> list[str]:
        path = s.path(self.output)
        if self.lines is not None:
            matrix = np.load(path) if path.is_file() else None
            reference = s.workspace.reference(self.lines)
            if matrix is None or matrix.shape != reference.shape or not np.allclose(matrix, reference, atol=1e-4):
                return [f"{self.output} after the run again is not the uninterrupted output"]
            return []
        assert s.workspace.train_reference is not None
        reference = s.workspace.train_reference.result()
        if sha256(path) == sha256(reference):
            return []
        return [f"{self.output} after --resume differs from an uninterrupted run{differing_tensors(reference, path)}"]


@dataclass(frozen=True)
class Repeat(Case):
    """The same `dictembed ARGV` run twice in fresh interpreters, in two folders: `file` must come out byte for
    byte the same."""

    argv: tuple[str, ...] = ()
    file: str = ""

    def execute(self, scratch: Scratch) -> Outcome:
        argv = [scratch.fill(a) for a in self.argv] + ["-q"]
        scratch.env["HF_HUB_OFFLINE"] = "1"
        runs = []
        for name in ("first", "second"):
            (scratch.folder / name).mkdir()
            runs.append(run(argv, replace(scratch, folder=scratch.folder / name), self.timeout, fresh=True))
        command = f"{shown(argv)}  # twice, in two folders"
        seconds = sum(r.seconds for r in runs)
        traceback = any("Traceback" in r.err for r in runs)
        if any(r.rc is None for r in runs):
            return self.verdict(command, seconds, ["timed out"], [], executed=False)
        problems = [f"run {i + 1}: exit {r.rc}: {tail(r.err, limit=300)}" for i, r in enumerate(runs) if r.rc != 0]
        first, second = (scratch.folder / name / self.file for name in ("first", "second"))
        if not problems and sha256(first) != sha256(second):
            problems.append(f"{self.file} differs between the runs{differing_tensors(first, second)}")
        return self.verdict(command, seconds, problems, [], traceback=traceback, output=tail(runs[-1].err))


def differing_tensors(first: Path, second: Path) -> str:
    """`: in T1 (max abs difference D1), ...` for two safetensors files of the same tensors; '' otherwise."""
    from safetensors.numpy import load_file

    try:
        a, b = load_file(str(first)), load_file(str(second))
    except Exception:  # noqa: BLE001 - not safetensors, or unreadable: no detail
        return ""
    if set(a) != set(b):
        return f": other tensors ({sorted(set(a) ^ set(b))[:5]})"
    differ = [
        f"{key} (max abs difference {np.abs(a[key].astype(np.float64) - b[key]).max():.3g})"
        for key in sorted(a)
        if a[key].shape != b[key].shape or not np.array_equal(a[key], b[key])
    ]
    return f": only in {', '.join(differ)}, of {len(a)} tensors" if differ else ""


# ------------------------------------------------------------------------------------ checks of folders
def no_machine_paths(folder: Path) -> str:
    """No text file of `folder` holds an absolute path of this machine (the scratch root, home, the repo)."""
    needles = {str(folder.parents[1]), str(Path.home()), str(Path.cwd()), tempfile.gettempdir() + "/"}
    found = [
        f"{p.relative_to(folder)}: {needle}"
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.suffix in {".json", ".jsonl", ".md", ".txt", ".csv", ".tsv"}
        for needle in sorted(needles)
        if needle in p.read_text(errors="replace")
    ]
    return "; ".join(found)


def umask_modes(mask: int) -> Callable[[Path], str]:
    """Every file of the folder is 0o666 & ~mask, every folder 0o777 & ~mask."""

    def check(folder: Path) -> str:
        wrong = [
            f"{p.relative_to(folder)} {oct(p.stat().st_mode & 0o777)}"
            for p in sorted(folder.rglob("*"))
            if p.stat().st_mode & 0o777 != (0o777 if p.is_dir() else 0o666) & ~mask
        ]
        return ", ".join(wrong)

    return check


# ------------------------------------------------------------------------------------ the cases
def fails(cls: str, name: str, argv: tuple[str, ...], *names: str, **checks: Any) -> Cli:
    """A command that must stop with exit 1 and one `dictembed: error:` line naming each of `names`."""
    return Cli(cls, name, argv=argv, code=1, names=names, **checks)


def usage(cls: str, name: str, argv: tuple[str, ...], *names: str, **checks: Any) -> Cli:
    """A command that must stop with exit 2 and argparse's one error line naming each of `names`."""
    return Cli(cls, name, argv=argv, code=2, names=names, **checks)


ENCODE = ("encode", "--model", "{model}")
PREDICT = ("predict", "--model", "{w}/m", "a loyal pet that barks")
STATS = ("data", "stats", "--model", "{bert}", "--dictionary")
PREDICT_INPUT = ("predict", "--model", "{model}", "--input", "in.q")
TRAIN = ("train", "--model", "{bert}", "--lr-grid", "1e-3", "--select-on", "mrr", "--dev-limit", "20")
MODEL_FILES = ("model.safetensors", "tokenizer.json", "entry_space/tensors.safetensors", "dictembed.json", "README.md")
NOT_MODELS = ("the folder does not exist", "no such folder", "not found")


def encode_to(output: str, source: str = "{data}/sentences.txt", *extra: str) -> tuple[str, ...]:
    return (*ENCODE, "--input", source, "--output", output, *extra)


def server_cases() -> list[Case]:
    s = "server"
    reverse = "/api/reverse?"
    attacks = {
        "words": r"/(\w|\w|\w)*!/",
        "dot star": "/(.*)*x$/",
        "nested plus": "/(a+)+$/",
        "alternation": "/(a|aa)*b$/",
    }

    def attack(pattern: str) -> str:
        return reverse + urllib.parse.urlencode({"q": "a pet", "pattern": pattern, "k": 100})

    bad = {  # query: (status, part of the message)
        "an empty query": ("q=", 422, "empty"),
        "a blank query": ("q=%20%20", 422, "empty"),
        "no query": ("k=5", 422, "q"),
        "a 2,001-character query": ("q=" + "a" * 2001, 422, "2000"),
        "a 100,000-character query": ("q=" + "a" * 100_000, 422, "2000"),
        "a query that is not UTF-8": ("q=%ff%fe", 400, "UTF-8"),
        "k = 0": ("q=dog&k=0", 422, "k"),
        "k = -3": ("q=dog&k=-3", 422, "k"),
        "k = 101": ("q=dog&k=101", 422, "k"),
        "k = 10**20": ("q=dog&k=1" + "0" * 20, 422, "k"),
        "k = 10**400": ("q=dog&k=1" + "0" * 400, 422, "k"),
        "k = NaN": ("q=dog&k=nan", 422, "k"),
        "k = 1e3": ("q=dog&k=1e3", 422, "k"),
        "an unknown pos": ("q=dog&pos=x", 422, "unknown part of speech"),
        "a pos of 200 characters": ("q=dog&pos=" + "n" * 200, 422, "pos"),
        "a pattern that does not compile": ("q=dog&pattern=/(/", 422, "regular expression"),
        "a pattern with a backreference": ("q=dog&pattern=" + urllib.parse.quote("/(a)\\1/"), 422, "backreferences"),
        "a 101-character pattern": ("q=dog&pattern=" + "x" * 101, 422, "pattern"),
        "min_length over max_length": ("q=dog&min_length=6&max_length=4", 422, "min_length"),
        "similar to no entry": ("q=zebra&mode=similar", 422, "not an entry"),
        "an unknown sort": ("q=dog&sort=size", 422, "sort"),
    }
    bodies = {
        "an empty body": (b"", "body"),
        "a body that is no JSON": (b"{not json", "JSON"),
        "sentences that are numbers": (b'{"sentences": [1, 2]}', "sentences"),
        "257 sentences": (json.dumps({"sentences": ["a"] * 257}).encode(), "256"),
        "a body of invalid UTF-8": (b"\xff\xfe", ""),
        "a JSON body nested 100,000 deep": (b"[" * 100_000 + b"]" * 100_000, "recursion limit"),
        "a 5,000-digit integer": (b'{"sentences": ["a"], "normalize": ' + b"7" * 5000 + b"}", "number out of range"),
    }
    bulk = json.dumps({"sentences": [("a pet that barks " * 125)[:2000]] * 256}).encode()
    big = b'{"sentences": ["' + b"a" * (20 << 20) + b'"]}'
    lacks = ("{root}", "Traceback")
    cases: list[Case] = [
        *(
            Race(s, f"a catastrophic pattern ({n}) next to a normal query", attacks=(attack(p),))
            for n, p in attacks.items()
        ),
        Race(
            s, "every catastrophic pattern at once, three times each", attacks=tuple(map(attack, attacks.values())) * 3
        ),
        Race(s, "twenty 2,000-character queries next to a normal one", attacks=(reverse + "q=" + "a+" * 1000,) * 20),
        Race(s, "a bulk encode of 256 x 2,000 characters next to a normal query", attacks=("/api/encode",), body=bulk),
        Http(
            s,
            "a normal query answers with its results",
            path=reverse + "q=a+domesticated+animal+that+barks&k=3",
            results=3,
            has=("dog",),
        ),
        Http(s, "k = 100 lists every result once", path=reverse + "q=water&k=100", results=RESULTS),
        Http(
            s,
            "a known pos filters",
            path=reverse + "q=something+fast&k=100&pos=v",
            has=('"run"', '"rain"'),
            lacks=('"dog"',),
        ),
        Http(s, "a NUL in the query is answered", path=reverse + "q=a%00pet&k=3", results=3),
        Http(s, "an entry lists its neighbours", path=reverse + "q=dog&k=3&mode=similar", results=3),
        *(Http(s, f"{n}: {st}", path=reverse + q, status=st, has=(m,), lacks=lacks) for n, (q, st, m) in bad.items()),
        *(
            Http(
                s,
                f"POST /api/encode with {n}: 422",
                method="POST",
                path="/api/encode",
                body=b,
                status=422,
                has=(m,),
                lacks=lacks,
            )
            for n, (b, m) in bodies.items()
        ),
        Http(
            s,
            "POST /api/encode of 3 sentences",
            method="POST",
            path="/api/encode",
            body=b'{"sentences": ["a dog", "rain", ""]}',
            has=('"dim":32',),
        ),
        Http(
            s, "a 20 MB POST to /api/encode: 413", method="POST", path="/api/encode", body=big, status=413, timeout=60
        ),
        Http(
            s,
            "a 20 MB chunked POST without a length: 413",
            method="POST",
            path="/api/encode",
            body=big,
            chunked=True,
            status=413,
            timeout=60,
        ),
        Http(s, "/health after the big bodies", has=('"status":"ok"',), within=1.0),
        *(Http(s, f"HEAD {p}", method="HEAD", path=p, empty=True) for p in ("/", "/health", reverse + "q=a+pet")),
        Http(s, "/health names no path of the machine", has=('"definitions.jsonl"',), lacks=lacks),
        Http(s, "/openapi.json names no path of the machine", path="/openapi.json", lacks=lacks),
        Http(s, "an unknown page: 404", path="/no/such/page", status=404, lacks=lacks),
        Http(s, "a path that climbs out: 404", path="/../../../etc/passwd", status=404, lacks=("root:",)),
        Http(s, "an encoded path that climbs out: 404", path="/%2e%2e/%2e%2e/etc/passwd", status=404, lacks=("root:",)),
        Http(
            s,
            "POST to the GET-only API: 405 with Allow",
            method="POST",
            path=reverse + "q=dog",
            status=405,
            answer_headers=(("allow", "GET, HEAD"),),
        ),
        Http(
            s,
            "POST /api/encode with a gzip body: 415 asking for identity",
            method="POST",
            path="/api/encode",
            body=gzip.compress(b'{"sentences": ["a dog"]}'),
            headers=(("Content-Encoding", "gzip"),),
            status=415,
            has=("Content-Encoding",),
            lacks=lacks,
            answer_headers=(("accept-encoding", "identity"), ("content-type", "application/json")),
        ),
        Http(s, "the page loads nothing from outside", path="/", lacks=("http://", "https://")),
        Http(
            "model folders",
            "a moved model folder serves definitions",
            server="moved",
            path=reverse + "q=an+animal+that+barks&k=100&pos=n",
            has=("a loyal pet that chases cats",),
        ),
        Http(s, "/health of a model whose dictionary is gone names no path", server="nodict", lacks=lacks),
        Http(
            s,
            "a pos filter without the dictionary: 422 naming it without its path",
            server="nodict",
            path=reverse + "q=a+pet&pos=n",
            status=422,
            has=("'wordnet'",),
            lacks=lacks,
        ),
        fails(
            s,
            "serve on a port in use: one line, at once",
            ("serve", "--model", "{model}", "--port", "{port}"),
            "{port}",
            setup=(hold_port(),),
            within=30,
        ),
        usage(s, "serve on port 70000: a usage error", ("serve", "--model", "{model}", "--port", "70000"), "--port"),
        fails(s, "serve a model that does not exist", ("serve", "--model", "{w}/none", "--port", "0"), "none"),
    ]
    return cases


def model_cases() -> list[Case]:
    c = "model folders"
    weights, matrix, space, record = (
        "m/model.safetensors",
        "m/entry_space/tensors.safetensors",
        "m/entry_space/space.json",
        "m/dictembed.json",
    )
    damaged = [  # (what is wrong with a copy of the model, the step that makes it so, what the error line names)
        ("model.safetensors removed", damage(weights, "rm"), ("model.safetensors",)),
        ("model.safetensors cut in half", damage(weights, "half"), ("model.safetensors",)),
        ("model.safetensors empty", damage(weights, "empty"), ("model.safetensors",)),
        ("model.safetensors that is text", write(weights, "not a model"), ("model.safetensors",)),
        ("entry_space/tensors.safetensors removed", damage(matrix, "rm"), ("tensors.safetensors",)),
        ("entry_space/tensors.safetensors cut in half", damage(matrix, "half"), ("tensors.safetensors",)),
        ("a NaN in the entry matrix", edit_matrix(matrix, "nan"), ("tensors.safetensors",)),
        ("an infinity in the entry matrix", edit_matrix(matrix, "inf"), ("tensors.safetensors",)),
        ("an entry matrix of half the width", edit_matrix(matrix, "narrow"), ("{w}/m/entry_space", "do not fit")),
        ("space.json words that are integers", edit_json(space, ("words",), list(range(15))), ("space.json",)),
        ("space.json words null", edit_json(space, ("words",), None), ("space.json",)),
        ("space.json words with a null", edit_json(space, ("words",), [None, *HEADWORDS[1:]]), ("space.json",)),
        ("space.json words one short", edit_json(space, ("words",), list(HEADWORDS[1:])), ("{w}/m/entry_space",)),
        ("space.json removed", damage(space, "rm"), ("space.json",)),
        *(
            (
                f"max_length {v!r} in dictembed.json",
                edit_json(record, ("encoder", "max_length"), v),
                ("dictembed.json", repr(v)),
            )
            for v in (-5, 0, "512")
        ),
        (
            "max_seq_length -5 in sentence_bert_config.json",
            edit_json("m/sentence_bert_config.json", ("max_seq_length",), -5),
            ("sentence_bert_config.json", "-5"),
        ),
        *(
            (f"{name} nested 200,000 deep", write(f"m/{name}", NESTED), (name,))
            for name in ("tokenizer.json", "config.json", "modules.json", "dictembed.json")
        ),
        ("tokenizer.json that is a number", write("m/tokenizer.json", "5"), ("tokenizer.json",)),
        ("dictembed.json cut in half", damage(record, "half"), ("dictembed.json",)),
        ("config.json removed", damage("m/config.json", "rm"), ("config.json",)),
        ("a module path out of the folder", edit_json("m/modules.json", (1, "path"), "../../.."), ("modules.json",)),
        ("a module type that is no module", edit_json("m/modules.json", (1, "type"), "os.system"), ("os.system",)),
    ]
    encode_in_m = ("encode", "--model", "{w}/m", "--input", "in.txt", "--output", "v.npy")
    return [
        *(fails(c, name, PREDICT, *named, setup=(copy_model(), step)) for name, step, named in damaged),
        fails(
            c,
            "max_length -5 in dictembed.json refused by encode",
            encode_in_m,
            "dictembed.json",
            "-5",
            setup=(copy_model(), edit_json(record, ("encoder", "max_length"), -5), write("in.txt", "a\n")),
        ),
        Cli(
            c,
            "max_length 1e9 in dictembed.json: cut to the positions",
            setup=(
                copy_model(),
                edit_json(record, ("encoder", "max_length"), 1e9),
                write("in.txt", "a dog barks " * 300 + "\na cat\n"),
            ),
            argv=encode_in_m,
            output="v.npy",
            lines=("a dog barks " * 300, "a cat"),
        ),
        Cli(
            c,
            "a moved model folder predicts with definitions",
            setup=(copy_model("a/toy"), lambda s: s.path("a/toy").rename(s.path("m"))),
            argv=(*PREDICT, "--pos", "n"),
            out_has=("a domesticated animal that barks",),
        ),
        Cli(
            c,
            "a pickle beside the weights is never loaded",
            setup=(
                copy_model(),
                planted_pickle("m/pytorch_model.bin", "ran"),
                planted_pickle("m/training_args.bin", "ran"),
            ),
            argv=PREDICT,
            never=("ran",),
        ),
        fails(
            c,
            "dictembed.json naming a dictionary file outside the folder (definitions.jsonl removed)",
            PREDICT,
            "dictembed.json",
            "--dictionary",
            setup=(
                copy_model(),
                write("secret.tsv", "word\tdefinition\ndog\tSECRET-LINE\n"),
                damage("m/definitions.jsonl", "rm"),
                edit_json(record, ("config", "dictionary"), "{w}/secret.tsv"),
            ),
            err_lacks=("SECRET-LINE",),
        ),
        *(
            fails(
                c,
                f"{name} a link to a file outside the folder",
                PREDICT,
                name,
                "links outside the folder",
                setup=(
                    copy_model(),
                    write(f"outside-{i}", "x"),
                    damage(f"m/{name}", "rm"),
                    link(f"m/{name}", f"{{w}}/outside-{i}"),
                ),
            )
            for i, name in enumerate(("definitions.jsonl", "model.safetensors", "tokenizer.json"))
        ),
        fails(
            c,
            "config.json with num_hidden_layers lowered under the weights",
            PREDICT,
            "config.json",
            "no place",
            setup=(copy_model(), edit_json("m/config.json", ("num_hidden_layers",), 1)),
        ),
        fails(
            c,
            "only a pickled pytorch_model.bin for weights",
            PREDICT,
            "pytorch_model.bin",
            setup=(copy_model(), damage(weights, "rm"), planted_pickle("m/pytorch_model.bin", "ran")),
            never=("ran",),
            err_lacks=("UserWarning", "Warning:"),
        ),
        fails(c, "a file given as the model", PREDICT, "{w}/m", setup=(write("m", "a file"),)),
        fails(c, "an empty folder given as the model", PREDICT, "{w}/m", setup=(mkdir("m"),)),
        Repeat(
            c,
            "train twice from a masked-LM checkpoint: the same model.safetensors",
            argv=(*TRAIN, "--dictionary", "{data}/served.tsv", "--output", "out"),
            file="out/model.safetensors",
            timeout=300,
        ),
        Inspect(
            c,
            "no absolute path of the machine in a trained model's text files",
            check=no_machine_paths,
            what="the trained model's text files",
        ),
        Inspect(
            c,
            "a trained model's files have the umask's modes (022: 0644, 0755)",
            check=umask_modes(0o022),
            what="the trained model's modes",
        ),
        *(
            Cli(
                c,
                f"an encode under umask {oct(mask)} writes {oct(0o666 & ~mask)} ({suffix})",
                argv=encode_to(f"v{suffix}", "{data}/abc.txt"),
                umask=mask,
                output=f"v{suffix}",
                mode=0o666 & ~mask,
                rows=3,
            )
            for mask, suffix in [(0o027, ".npy"), (0o002, ".npz")]
        ),
    ]


def pipe_cases() -> list[Case]:
    c = "pipes and text"
    cafe, nfd = "caf\u00e9", unicodedata.normalize("NFD", "caf\u00e9")
    other = "".join(f"other{i}\tanother definition {i}\n" for i in range(10))
    records = [{"word": w, "definition": f"a definition of {w}"} for w in WORDS]
    records[3]["example"], records[6]["example"], records[7]["pos"] = "an example", "another", "n"
    jsonl = "".join(json.dumps(r) + "\n" for r in records)
    csv = "word,definition\n" + "".join(f"{w},def\n" for w in WORDS)
    ten = "10 rows -> 10 headwords, 10 senses"
    latin = ("le caf\u00e9 est noir", "na\u00efve", "plain")
    text = "\n".join(latin) + "\n"
    read = [  # `data stats` reads the dictionary FILE made by STEP (with EXTRA options); its count line holds COUNTS
        ("a FIFO dictionary is read once", "d.tsv", fifo("d.tsv", TSV.encode()), (), (ten,)),
        (
            "NFC and NFD caf\u00e9 are one entry",
            "d.tsv",
            write("d.tsv", TSV + f"{cafe}\tplace\n{nfd}\tcoffee\n"),
            (),
            ("12 rows -> 11 headwords, 12 senses",),
        ),
        (
            "headwords of only U+200B/U+FEFF/U+2060 are refused and counted",
            "d.tsv",
            write("d.tsv", TSV + "\u200b\tinvisible\n\ufeff\u200b\ttwo\n\u2060\tthree\n"),
            (),
            ("skipped 3 rows whose headword is only invisible",),
        ),
        (
            "two TSVs joined end to end (BOM + repeated header)",
            "d.tsv",
            write("d.tsv", "\ufeff" + TSV + "\ufeffword\tdefinition\n" + other),
            (),
            ("-> 20 headwords", "skipped 1 repeated header"),
        ),
        (
            "JSONL keys that first appear after the first record",
            "d.jsonl",
            write("d.jsonl", jsonl),
            (),
            ("10 headwords, 10 senses, 2 examples",),
        ),
        (
            "a JSONL value that is no string is skipped and counted",
            "d.jsonl",
            write("d.jsonl", jsonl + '{"word": 5, "definition": "x"}\n'),
            (),
            ("10 headwords", "skipped 1"),
        ),
        ("CRLF line endings", "d.tsv", write("d.tsv", TSV.replace("\n", "\r\n")), (), (ten,)),
        (
            "a latin-1 dictionary with --encoding latin-1",
            "d.tsv",
            write("d.tsv", TSV + f"{cafe}\tun lieu\n", "latin-1"),
            ("--encoding", "latin-1"),
            ("11 headwords",),
        ),
        (
            "a 1 MB definition in a TSV",
            "d.tsv",
            write("d.tsv", TSV + "long\t" + "z " * 500_000 + "\n"),
            (),
            ("11 headwords",),
        ),
        (
            "a NUL byte in a definition keeps the row",
            "d.tsv",
            write("d.tsv", TSV.replace("of the", "of\0the")),
            (),
            (ten,),
        ),
    ]
    refused = [  # `data stats` refuses the dictionary FILE made by STEP with one line naming NAMES
        ("a JSONL line that is no JSON", "d.jsonl", write("d.jsonl", jsonl + "{oops\n"), ("d.jsonl:11",)),
        ("lone-CR line endings", "d.tsv", write("d.tsv", TSV.replace("\n", "\r")), ("d.tsv", "carriage return")),
        ("a UTF-16 dictionary", "d.tsv", write("d.tsv", TSV, "utf-16"), ("d.tsv:1",)),
        ("a latin-1 dictionary", "d.tsv", write("d.tsv", TSV + f"{cafe}\tun lieu\n", "latin-1"), ("d.tsv:12",)),
        ("a CSV quote that never ends", "d.csv", write("d.csv", csv.replace(",def\n", ',"def\n')), ("d.csv:2",)),
        ("a CSV field over 131,072 characters", "d.csv", write("d.csv", csv + "x," + "y" * 200_000), ("d.csv:12",)),
        ("a dictionary with only its header", "d.tsv", write("d.tsv", "word\tdefinition\n"), ("d.tsv",)),
        ("a dictionary too small for the split", "d.tsv", write("d.tsv", "word\tdefinition\na\tb\nc\td\n"), ("d.tsv",)),
        ("a folder as the dictionary", "d.tsv", mkdir("d.tsv"), ("d.tsv",)),
        ("a missing dictionary", "gone.tsv", nothing, ("gone.tsv",)),
    ]
    encoded = [  # `encode` reads in.txt made by STEP (with EXTRA options): one row a line, each that of LINES
        ("CRLF and a BOM in encode input: one row a line", write("in.txt", "\ufeffa\r\nb\r\nc\r\n"), (), ABC),
        (
            "U+2028, \\x0c and \\x85 inside lines: one row a line",
            write("in.txt", "a\u2028b\nc\x0cd\ne\x85f\n"),
            (),
            ("a\u2028b", "c\x0cd", "e\x85f"),
        ),
        ("a NUL byte inside an encode line", write("in.txt", "a\0b\nc\n"), (), ("a\0b", "c")),
        (
            "a UTF-16 encode input with --encoding utf-16",
            write("in.txt", text, "utf-16"),
            ("--encoding", "utf-16"),
            latin,
        ),
        (
            "a latin-1 encode input with --encoding latin-1",
            write("in.txt", text, "latin-1"),
            ("--encoding", "latin-1"),
            latin,
        ),
        ("a 1 MB encode line is one row", write("in.txt", "z " * 500_000 + "\nshort\n"), (), ("z " * 500_000, "short")),
    ]
    unread = [  # `encode` refuses in.txt made by STEP with one line naming NAMES, and writes nothing
        ("a UTF-16 encode input", write("in.txt", text, "utf-16"), ("in.txt:1:",)),
        ("a latin-1 encode input", write("in.txt", text, "latin-1"), ("in.txt:1:",)),
        ("a folder as encode input", mkdir("in.txt"), ("in.txt",)),
        ("a missing encode input", nothing, ("in.txt",)),
    ]
    devices = [("tsv", (*STATS, "in.tsv")), ("txt", encode_to("x.npy", "in.txt")), ("q", PREDICT_INPUT)]
    return [
        *(
            Cli(c, name, setup=(step,), argv=(*STATS, file, *extra), quiet=False, err_has=counts)
            for name, file, step, extra, counts in read
        ),
        *(fails(c, name, (*STATS, file), *names, setup=(step,)) for name, file, step, names in refused),
        *(
            Cli(c, name, setup=(step,), argv=encode_to("x.npy", "in.txt", *extra), output="x.npy", lines=lines)
            for name, step, extra, lines in encoded
        ),
        *(
            fails(c, name, encode_to("x.npy", "in.txt"), *names, setup=(step,), absent=("x.npy",))
            for name, step, names in unread
        ),
        *(
            Cli(
                c,
                f"printf 'a\\nb\\nc\\n' | encode --input /dev/stdin ({suffix})",
                stdin=b"a\nb\nc\n",
                argv=encode_to(f"x{suffix}", "/dev/stdin"),
                output=f"x{suffix}",
                lines=ABC,
            )
            for suffix in (".npy", ".npz")
        ),
        Cli(
            c,
            "a piped input without a final newline",
            stdin=b"a\nb\nc",
            argv=encode_to("x.npy", "/dev/stdin"),
            output="x.npy",
            lines=ABC,
        ),
        Cli(
            c, "an empty pipe: an empty array", stdin=b"", argv=encode_to("x.npy", "/dev/stdin"), output="x.npy", rows=0
        ),
        Cli(
            c,
            "a FIFO as encode input",
            setup=(fifo("in.fifo", b"a\nb\nc\n"),),
            argv=encode_to("x.npy", "in.fifo"),
            output="x.npy",
            lines=ABC,
        ),
        Cli(
            c,
            "predict --input /dev/stdin --json: one answer a line",
            stdin=b"a pet\na river\nbread\n",
            argv=(*PREDICT_INPUT[:-1], "/dev/stdin", "--top-k", "2", "--json"),
            json_items=3,
        ),
        *(
            fails(
                c,
                f"a .{ext} symlinked to {dev}: one line, bounded",
                argv,
                f"in.{ext}",
                setup=(link(f"in.{ext}", dev),),
                within=60,
                timeout=120,
            )
            for dev in ("/dev/zero", "/dev/urandom")
            for ext, argv in devices
        ),
        usage(
            c,
            "the encode input as its output, with --overwrite",
            encode_to("in.npy", "in.npy", "--overwrite"),
            setup=(write("in.npy", "a\nb\n"),),
            kept=("in.npy",),
        ),
        fails(
            c,
            "predict --input of invalid UTF-8",
            (*PREDICT_INPUT[:-1], "q.txt"),
            "q.txt:2",
            setup=(write("q.txt", b"a pet\n\xff\xfe\n"),),
        ),
    ]


def disk_cases() -> list[Case]:
    c = "disks"
    full, ro = mount("fs"), mount("fs", read_only=True)
    formats = {".npy": (), ".npz": (), " int8 .npy": ("--quantize", "int8"), " int8 .npz": ("--quantize", "int8")}
    leftovers = ("fs/*",)
    cases: list[Case] = []
    for label, extra in formats.items():
        out = "fs/v" + label.split()[-1]
        cases += [
            fails(
                c,
                f"encode{label} onto a full tmpfs",
                encode_to(out, *("{data}/sentences.txt",), *extra),
                out,
                setup=(full,),
                absent=leftovers,
            ),
            fails(
                c,
                f"encode{label} onto a read-only tmpfs",
                encode_to(out, "{data}/sentences.txt", *extra),
                out,
                setup=(ro,),
                absent=leftovers,
            ),
        ]
    return [
        *cases,
        fails(
            c,
            "encode --overwrite onto a full disk keeps the old file",
            encode_to("fs/v.npy", "{data}/sentences.txt", "--overwrite"),
            "fs/v.npy",
            setup=(mount("fs", "64k"), array("fs/v.npy", 3)),
            kept=("fs/v.npy",),
            absent=("fs/" + STAGING, "fs/*.progress.json"),
        ),
        fails(
            c,
            "encode without --overwrite keeps the old file",
            encode_to("v.npy", "{data}/abc.txt"),
            "v.npy",
            setup=(array("v.npy", 3),),
            kept=("v.npy",),
        ),
        Cli(
            c,
            "encode into a folder that does not exist yet: made",
            argv=encode_to("no/such/v.npy", "{data}/abc.txt"),
            output="no/such/v.npy",
            lines=ABC,
        ),
        fails(
            c,
            "encode onto a folder named like an array",
            encode_to("v.npy", "{data}/abc.txt", "--overwrite"),
            "v.npy",
            setup=(mkdir("v.npy"),),
        ),
        fails(
            c,
            "train --output on a full tmpfs",
            (*TRAIN, "--dictionary", "{data}/served.tsv", "--output", "fs/out"),
            "fs/",
            setup=(mount("fs", "64k"),),
            absent=("fs/out", "fs/" + STAGING),
        ),
        fails(
            c,
            "train --output on a read-only tmpfs",
            (*TRAIN, "--dictionary", "{data}/served.tsv", "--output", "fs/out"),
            "fs/",
            setup=(ro,),
            absent=("fs/out",),
        ),
        fails(
            c,
            "export --output on a full tmpfs",
            ("export", "--model", "{model}", "--output", "fs/onnx"),
            "fs/",
            setup=(mount("fs", "64k"),),
            absent=("fs/onnx", "fs/" + STAGING),
        ),
        Cli(
            c,
            "DICTEMBED_CACHE on a read-only tmpfs: train warns once and goes on",
            setup=(ro, setenv("DICTEMBED_CACHE", "{w}/fs")),
            argv=(*TRAIN, "--dictionary", "{data}/served.tsv", "--output", "out"),
            err_once=("{w}/fs cannot be used",),
            output="out/model.safetensors",
        ),
        Cli(
            c,
            "DICTEMBED_CACHE that is a regular file: train warns once and goes on",
            setup=(write("cachefile", "x"), setenv("DICTEMBED_CACHE", "{w}/cachefile")),
            argv=(*TRAIN, "--dictionary", "{data}/served.tsv", "--output", "out"),
            err_once=("{w}/cachefile cannot be used",),
            output="out/model.safetensors",
            kept=("cachefile",),
        ),
        fails(
            c,
            "cache list with DICTEMBED_CACHE a regular file",
            ("cache", "list"),
            "cachefile",
            setup=(write("cachefile", "x"), setenv("DICTEMBED_CACHE", "{w}/cachefile")),
            kept=("cachefile",),
        ),
        fails(
            c,
            "cache clear with DICTEMBED_CACHE a regular file",
            ("cache", "clear", "--yes"),
            "cachefile",
            setup=(write("cachefile", "x"), setenv("DICTEMBED_CACHE", "{w}/cachefile")),
            kept=("cachefile",),
        ),
        Cli(
            c,
            "cache list on a read-only tmpfs",
            setup=(ro, setenv("DICTEMBED_CACHE", "{w}/fs")),
            argv=("cache", "list"),
        ),
        fails(
            c,
            "cache clear of a read-only cache: one line",
            ("cache", "clear", "--yes"),
            "fs",
            setup=(
                mount("fs", "1m"),
                lambda s: copy_cache(s),
                remount_read_only("fs"),
                setenv("DICTEMBED_CACHE", "{w}/fs"),
            ),
        ),
    ]


def copy_cache(s: Scratch) -> None:
    """The workspace's entry-space cache copied into the case's tmpfs."""
    for path in Path(s.workspace.env["DICTEMBED_CACHE"]).iterdir():
        if path.is_file():
            shutil.copy2(path, s.path("fs") / path.name)


def push_cases() -> list[Case]:
    c = "push"
    dry = ("push", "--model", "{w}/m", "--repo", "user/name", "--dry-run", "--json")
    m = copy_model()
    planted = {
        "a symlink to a file outside the folder": (link("m/passwd", "/etc/passwd"), "passwd"),
        "a symlink to a folder outside": (link("m/home", "{root}"), "home"),
        "a symlink inside entry_space leading out": (link("m/entry_space/up", "../../.."), "entry_space/up"),
        ".env": (write("m/.env", "HF_TOKEN=hf_secret\n"), ".env"),
        "a nested .env": (write("m/entry_space/.env", "KEY=1\n"), "entry_space/.env"),
        ".git/config": (write("m/.git/config", "[core]\n"), ".git/config"),
        "a stale model.safetensors.partial": (write("m/model.safetensors.partial", "x"), "model.safetensors.partial"),
        "a stale staging folder": (write("m/entry_space.partial/space.json", "{}"), "entry_space.partial/space.json"),
    }
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE=\n-----END OPENSSH PRIVATE KEY-----\n"
    refused = {  # left out and named, one line each, in the table (on stderr with --json)
        "an OpenSSH private key id_rsa": (write("m/id_rsa", key), "id_rsa"),
        "secrets/credentials.json": (
            write("m/secrets/credentials.json", '{"password": "x"}'),
            "secrets/credentials.json",
        ),
        "a dangling link": (link("m/gone.json", "{w}/nowhere"), "gone.json"),
    }
    weights_outside = (
        write("weights.safetensors", "x"),
        damage("m/model.safetensors", "rm"),
        link("m/model.safetensors", "{w}/weights.safetensors"),
    )
    not_found = ("predict", "--model", "models/tinyy", "a pet")
    return [
        *(
            Cli(
                c,
                f"push --dry-run {verb} {n}",
                setup=(m, step),
                argv=dry,
                files_lack=(name,),
                files_have=MODEL_FILES,
                err_has=(f"  {name}: ",) if verb == "refuses and names" else (),
            )
            for verb, cases in (("refuses and names", refused), ("leaves out", planted))
            for n, (step, name) in cases.items()
        ),
        fails(
            c,
            "push --dry-run of a folder whose model.safetensors links outside: one line",
            dry,
            "/m has no weights to push",
            "model.safetensors is a link leading outside",
            setup=(m, *weights_outside),
        ),
        fails(c, "push --dry-run of a folder that does not exist", dry, "m"),
        usage(c, "push --repo that is no repository id", (*dry[:4], "bad name", "--dry-run"), "--repo", setup=(m,)),
        fails(
            c,
            "push through a network that fails: one line",
            dry[:5],
            "user/name",
            setup=(m, no_network(watched=False), setenv("HF_TOKEN", "hf_x")),
            offline=False,
        ),
        fails(
            c,
            "predict --model models/tinyy beside models/tiny: no folder, no network",
            not_found,
            "models/tinyy",
            setup=(mkdir("models/tiny"), no_network()),
            names_any=NOT_MODELS,
        ),
        fails(
            c,
            "predict --model models/tinyy without a models folder",
            not_found,
            "models/tinyy",
            setup=(no_network(),),
            names_any=NOT_MODELS,
        ),
        fails(
            c,
            "predict --model models/tinyy online: no folder, no network",
            not_found,
            "models/tinyy",
            setup=(mkdir("models/tiny"), no_network()),
            offline=False,
            names_any=NOT_MODELS,
        ),
        fails(
            c,
            "encode --model ./tinyy: no folder, no network",
            ("encode", "--model", "./tinyy", "--input", "{data}/abc.txt", "--output", "v.npy"),
            "./tinyy",
            setup=(no_network(),),
            offline=False,
            names_any=NOT_MODELS,
        ),
        fails(
            c,
            "serve --model models/tinyy: one line before listening",
            ("serve", "--model", "models/tinyy", "--port", "0"),
            "models/tinyy",
            setup=(mkdir("models/tiny"), no_network()),
            offline=False,
            names_any=NOT_MODELS,
        ),
        fails(
            c,
            "predict --model of an absolute path that does not exist",
            ("predict", "--model", "{w}/gone/model", "a pet"),
            "{w}/gone/model",
            setup=(no_network(),),
            offline=False,
            names_any=NOT_MODELS,
        ),
    ]


def interrupt_cases() -> list[Case]:
    c = "interruptions"
    long_train = (
        *(a.replace("{bert}", "{pooled}") for a in TRAIN),
        "--dictionary",
        "{data}/long.tsv",
        "--batch-size",
        "2",
        "--epochs",
        "2",
        "--checkpoint-every",
        "5",
        "--output",
        "out",
    )
    long_encode = (
        "encode",
        "--model",
        "{model}",
        "--input",
        "{data}/long.txt",
        "--output",
        "v.npy",
        "--chunk-size",
        "100",
        "--batch-size",
        "2",
    )
    bars = ("it/s]", "%|")
    small = ("--input", "{data}/sentences.txt", "--output", "v.npy", "--batch-size", "8")
    evaluate = ("evaluate", "sts", "--model", "{model}", "--tasks", "STSB")
    return [
        *(
            Interrupt(
                c,
                f"{signal.Signals(n).name} during train, then --resume: the same weights",
                argv=long_train,
                signum=n,
                ready="stderr:train: step",
                output="out/model.safetensors",
                again=("--resume",),
                line="--resume",
                timeout=400,
            )
            for n in (signal.SIGINT, signal.SIGTERM)
        ),
        Interrupt(
            c,
            "SIGINT during encode, then again: the whole output",
            argv=long_encode,
            ready="file:v.npy.progress.json",
            output="v.npy",
            lines=LONG,
            timeout=300,
        ),
        Interrupt(
            c,
            "SIGTERM during encode, then again: the whole output",
            argv=long_encode,
            signum=signal.SIGTERM,
            ready="file:v.npy.progress.json",
            output="v.npy",
            lines=LONG,
            code=None,
            line="",
            timeout=300,
        ),
        Interrupt(
            c,
            "SIGKILL during encode, then again: the whole output",
            argv=long_encode,
            signum=signal.SIGKILL,
            ready="file:v.npy.progress.json",
            output="v.npy",
            lines=LONG,
            code=None,
            line="",
            timeout=300,
        ),
        Cli(c, "encode -q on a terminal draws no progress bar", argv=(*ENCODE, *small), tty=True, err_lacks=bars),
        Cli(
            c,
            "encode on a terminal draws its progress bar",
            argv=(*ENCODE, *small),
            tty=True,
            quiet=False,
            err_has=("%|",),
        ),
        Cli(c, "evaluate -q on a terminal draws no progress bar", argv=evaluate, tty=True, err_lacks=bars),
        Cli(c, "evaluate on a terminal draws its progress bar", argv=evaluate, tty=True, quiet=False, err_has=("%|",)),
        Stop(c, "SIGINT stops serve: exit 0, 'server stopped'", server="main"),
        Stop(
            c,
            "SIGTERM stops serve after a graceful shutdown",
            server="moved",
            signum=signal.SIGTERM,
            codes=(0, -signal.SIGTERM),
            said=None,
        ),
        Stop(c, "SIGINT stops serve of a model without its dictionary", server="nodict"),
    ]


def all_cases() -> list[Case]:
    return [*server_cases(), *model_cases(), *pipe_cases(), *disk_cases(), *push_cases(), *interrupt_cases()]


# ------------------------------------------------------------------------------------ the workspace's making
def tiny_bert(path: Path, pooler: bool = False) -> None:
    """A random 2-layer BERT (hidden 32, 128 positions) with the standard uncased vocabulary and an MLM head;
    with `pooler`, its pooler too (a pre-training checkpoint), else none (a masked-LM checkpoint)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, BertForPreTraining

    from dictembed.paths import default_model

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(default_model())
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        initializer_range=0.2,
    )
    with contextlib.redirect_stderr(io.StringIO()):  # the progress bar of the shards
        (BertForPreTraining if pooler else BertForMaskedLM)(config).save_pretrained(path)
    tokenizer.save_pretrained(path)


def write_data(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "served.tsv").write_text("word\tdefinition\tpos\n" + "".join(f"{w}\t{d}\t{p}\n" for w, d, p in SERVED))
    (folder / "sentences.txt").write_text("".join(f"{s}\n" for s in SENTENCES))
    (folder / "long.txt").write_text("".join(f"{s}\n" for s in LONG))
    (folder / "abc.txt").write_text("a\nb\nc\n")
    nouns = ("river", "stone", "bird", "lamp", "song", "field", "coat", "bell", "ship", "road", "cloud", "wheel")
    rows = [f"thing{i}\ta {nouns[i % 12]} that is {nouns[i * 7 % 12]} of kind {i}\n" for i in range(300)]
    (folder / "long.tsv").write_text("word\tdefinition\n" + "".join(rows))


def dictembed(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """`dictembed ARGV -q` under umask 022, for the workspace's own models."""
    return subprocess.run(
        [*DICTEMBED, *argv, "-q"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=lambda: _child(0o022),
        check=False,
    )


def train_reference(ws: Workspace) -> Path:
    """The model.safetensors of an uninterrupted run of the interruption cases' training."""
    folder = ws.root / "reference"
    folder.mkdir()
    argv = [a.format(**ws.values()) for a in interrupt_cases()[0].argv]  # type: ignore[attr-defined]
    done = dictembed(argv, folder, ws.env, 600)
    if done.returncode != 0:
        raise RuntimeError(f"the reference training failed: {tail(done.stderr)}")
    return folder / "out" / "model.safetensors"


def prepare(root: Path, start_zygote: Callable[[dict[str, str]], Future[Zygote] | None]) -> Workspace:
    """The tiny BERT, the data, the trained reverse dictionary; the zygote started on the way."""
    env = {k: v for k, v in os.environ.items() if k != "DICTEMBED_PROGRESS_INTERVAL"}
    env.update(
        DICTEMBED_CACHE=str(root / "cache"),
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
    )
    ws = Workspace(root, env)
    zygote = start_zygote(env)
    write_data(ws.data)
    tiny_bert(ws.bert)
    tiny_bert(ws.pooled, pooler=True)
    ws.model.parent.mkdir()
    argv = ["train", "--model", str(ws.bert), "--dictionary", str(ws.data / "served.tsv"), "--lr-grid", "1e-3"]
    done = dictembed([*argv, "--output", str(ws.model)], ws.model.parent, env, 600)
    if done.returncode != 0:
        raise SystemExit(f"training the tiny reverse dictionary failed:\n{tail(done.stderr)}")
    if zygote is not None:
        ws.zygote = zygote.result()
        if not ws.zygote.ready:
            raise SystemExit(f"the zygote did not start: {(root / 'zygote' / 'zygote.err').read_text()[-2000:]}")
    logging.getLogger().setLevel(logging.ERROR)  # this process's references: no warnings, no bars
    os.environ["TQDM_DISABLE"] = "1"
    return ws


def start_servers(ws: Workspace) -> None:
    """`dictembed serve` of the model, of a moved copy and of a copy whose dictionary is gone (no definitions.jsonl,
    its record names WordNet, and the server's WordNet folder, $WNSEARCHDIR, is not there: a --dictionary file
    that is not there is refused before the server starts)."""
    moved = ws.root / "servers" / "elsewhere" / "toy-moved"
    moved.parent.mkdir(parents=True)
    shutil.copytree(ws.model, ws.root / "servers" / "toy")
    (ws.root / "servers" / "toy").rename(moved)
    nodict = ws.root / "servers" / "toy-nodict"
    shutil.copytree(ws.model, nodict)
    (nodict / "definitions.jsonl").unlink()
    record = json.loads((nodict / "dictembed.json").read_text())
    record["config"]["dictionary"] = "wordnet"
    (nodict / "dictembed.json").write_text(json.dumps(record))
    gone = {**ws.env, "WNSEARCHDIR": str(ws.root / "gone" / "wordnet")}
    for name, folder, env in [("main", ws.model, ws.env), ("moved", moved, ws.env), ("nodict", nodict, gone)]:
        port = free_port()
        argv = [*DICTEMBED, "serve", "--model", str(folder), "--port", str(port)]
        process = subprocess.Popen(
            argv,
            cwd=ws.root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=lambda: _child(None),
        )
        server = Server(name, process, port)
        threading.Thread(target=_drain, args=(process.stderr, server.err), daemon=True).start()
        ws.servers[name] = server


def wait_for_servers(ws: Workspace, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    for server in ws.servers.values():
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                server.problem = f"exit {server.process.returncode}: {tail(b''.join(server.err).decode(), limit=400)}"
                break
            answer = request(server.port, "GET", "/health", None, False, 5)
            if answer.status == 200:
                server.ready = True
                break
            time.sleep(0.5)
        else:
            server.problem = f"no answer on /health within {timeout:.0f} s"


def stop_servers(ws: Workspace) -> None:
    for server in ws.servers.values():
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()


def unmount_all(root: Path) -> None:
    """Unmount whatever is still mounted under `root` (deepest first)."""
    with open("/proc/mounts") as mounts:
        points = [line.split()[1] for line in mounts if line.split()[1].startswith(str(root))]
    for point in sorted(points, key=len, reverse=True):
        unmount(Path(point))


# ------------------------------------------------------------------------------------ running the sweep
def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def execute(case: Case, ws: Workspace, index: int) -> Outcome:
    """Set up the case's scratch folder, run it, undo what it set up; a crash of the sweep is a finding too."""
    folder = ws.root / "cases" / f"{index:03d}-{slug(case.cls)}-{slug(case.name)}"
    folder.mkdir(parents=True)
    scratch = Scratch(folder, ws, {**ws.values(), "w": str(folder)}, dict(ws.env))
    try:
        for step in case.setup:
            step(scratch)
        return case.execute(scratch)
    except Exception as err:  # noqa: BLE001 - the sweep reports it as this case's outcome
        return Outcome(case.cls, case.name, "", False, False, False, False, 0.0, f"sweep error: {err!r}")
    finally:
        for undo in reversed(scratch.undo):
            with contextlib.suppress(Exception):
                undo()


def sweep(cases: list[Case], ws: Workspace, jobs: int, log: Callable[[Outcome], None]) -> list[Outcome]:
    """The server's cases first (timing cases on an otherwise idle sweep), the servers stopped, then the rest
    `jobs` at a time, the longest (training) first."""
    indexed = list(enumerate(cases))
    served = [(i, c) for i, c in indexed if isinstance(c, (Http, Race))]
    stops = [(i, c) for i, c in indexed if isinstance(c, Stop)]
    rest = [(i, c) for i, c in indexed if not isinstance(c, (Http, Race, Stop))]
    rest.sort(key=lambda ic: -ic[1].timeout)
    outcomes: dict[int, Outcome] = {}
    if served or stops:
        start_servers(ws)
        wait_for_servers(ws)
        for i, case in [*served, *stops]:
            outcomes[i] = execute(case, ws, i)
            log(outcomes[i])
        stop_servers(ws)
    with ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(execute, case, ws, i): i for i, case in rest}
        for future in futures:
            outcomes[futures[future]] = future.result()
            log(outcomes[futures[future]])
    return [outcomes[i] for i in sorted(outcomes)]


def table(outcomes: list[Outcome]) -> str:
    """The per-class Markdown table, with a total row."""
    rows = ["| class | cases | handled | lost | executed | tracebacks |", "|---|---|---|---|---|---|"]
    groups = [(cls, [o for o in outcomes if o.cls == cls]) for cls in CLASSES]
    for cls, group in [*groups, ("**total**", outcomes)]:
        if not group:
            continue
        counts = [
            len(group),
            *(sum(getattr(o, k) for o in group) for k in ("handled", "lost", "executed", "traceback")),
        ]
        rows.append(f"| {cls} | " + " | ".join(map(str, counts)) + " |")
    return "\n".join(rows)


def status(outcome: Outcome) -> str:
    if not outcome.executed:
        return "NOT EXECUTED"
    if outcome.lost:
        return "LOST"
    return "handled" if outcome.handled else "NOT HANDLED"


def case_list(outcomes: list[Outcome]) -> str:
    lines = []
    for o in outcomes:
        lines.append(
            f"- **{status(o)}** {o.cls}: {o.name} ({o.seconds:.1f} s)" + (" — traceback" if o.traceback else "")
        )
        lines.append(f"  `{o.command}`")
        if o.detail:
            lines.append(f"  {o.detail}")
    return "\n".join(lines)


def machine() -> str:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        model = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Model name"))
    except (OSError, StopIteration):
        model = platform.processor() or platform.machine()
    return f"{model}, {os.cpu_count()} cores"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="cases run at the same time (default: 2)")
    parser.add_argument("--only", default="", help="comma list of classes (or parts of case names) to run")
    parser.add_argument("--verbose", action="store_true", help="list every case with its command and verdict")
    parser.add_argument("--json", type=Path, help="write every outcome and the table to this JSON file")
    parser.add_argument("--root", type=Path, help="the scratch folder (default: a new temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument(
        "--fresh", action="store_true", help="every command in a fresh interpreter, none forked from the zygote (slow)"
    )
    args = parser.parse_args(argv)
    cases = all_cases()
    if args.only:
        wanted = [w.strip() for w in args.only.split(",") if w.strip()]
        cases = [c for c in cases if any(w == c.cls or w in c.name for w in wanted)]
    started = time.monotonic()
    root = args.root or Path(tempfile.mkdtemp(prefix="dictembed-sweep-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"scratch folder {root}; {len(cases)} cases", file=sys.stderr)
    try:
        ws = prepare(
            root, lambda env: None if args.fresh else ThreadPoolExecutor(1).submit(Zygote, env, root / "zygote")
        )
        if any(isinstance(c, Interrupt) and not c.lines for c in cases):
            ws.train_reference = ThreadPoolExecutor(1).submit(train_reference, ws)
        print(f"tiny model trained in {time.monotonic() - started:.0f} s", file=sys.stderr)

        def log(outcome: Outcome) -> None:
            print(f"{status(outcome):>13}  {outcome.seconds:6.1f} s  {outcome.cls}: {outcome.name}", file=sys.stderr)

        outcomes = sweep(cases, ws, args.jobs, log)
    finally:
        if "ws" in locals():
            stop_servers(ws)
            if ws.zygote is not None:
                ws.zygote.close()
        unmount_all(root)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    wall = time.monotonic() - started
    print(table(outcomes))
    if args.verbose:
        print("\n" + case_list(outcomes))
    print(f"\n{len(outcomes)} cases in {wall:.0f} s on {machine()}")
    if args.json:
        record = {
            "wall_s": round(wall, 1),
            "machine": machine(),
            "table": table(outcomes),
            "cases": [vars(o) for o in outcomes],
        }
        args.json.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    return 0 if all(o.handled for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
