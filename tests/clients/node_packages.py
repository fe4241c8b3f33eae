"""The real Node clients (Codex CLI, the Vercel AI SDK), installed once from npm and cached outside the repo.

`tests/clients/package.json` pins them and the committed `package-lock.json` pins every
transitive package; `npm ci` installs exactly that tree into
`~/.cache/maya/node-clients-HASH/` (override the root with `MAYA_NODE_CLIENTS_CACHE`),
keyed by a hash of the lockfile, so a second run finds it there and a changed lockfile
gets a fresh tree. Codex CLI's package carries its platform binary (~450 MB), which is
why the tree lives outside the repository. `make test` runs this module first.

    python -m tests.clients.node_packages    # prints the node_modules path, installing it if needed
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFESTS = ("package.json", "package-lock.json")
READY = ".installed"


def lock_hash() -> str:
    return hashlib.sha256((HERE / "package-lock.json").read_bytes()).hexdigest()[:16]


def cache_dir() -> Path:
    root = os.environ.get("MAYA_NODE_CLIENTS_CACHE") or str(Path.home() / ".cache" / "maya")
    return Path(root) / f"node-clients-{lock_hash()}"


def ensure_installed() -> Path:
    """The cached `node_modules`, installed first when it is missing (one installer at a time)."""
    target = cache_dir()
    if (target / READY).is_file():
        return target / "node_modules"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent install waits here, then finds the tree
        if not (target / READY).is_file():
            _install(target)
    return target / "node_modules"


def _install(target: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not on PATH; the Node client tests need Node.js 20+ and npm")
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=target.parent))
    try:
        for name in MANIFESTS:
            shutil.copy2(HERE / name, staging / name)
        result = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=staging,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0:
            sys.stderr.write(result.stdout[-8000:])
            raise RuntimeError(f"npm ci failed (exit {result.returncode})")
        (staging / READY).touch()
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)  # atomic: a half-installed tree is never taken for the cache
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"installed the Node clients in {target} in {time.monotonic() - started:.0f}s", file=sys.stderr)


def main() -> int:
    try:
        print(ensure_installed())
    except (RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
