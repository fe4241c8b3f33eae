"""Vulkan C++ headers new enough for llama.cpp's Vulkan backend, where the system's are too old (Debian 12).

The pinned llama.cpp's Vulkan backend uses `VK_EXT_layer_settings` without a guard, which Vulkan's headers define
from 1.3.2xx on; Debian 12 (bookworm) ships 1.3.239, and its build then fails minutes in (`'LayerSettingEXT' is not
a member of 'vk'`). The headers are plain files and need nothing else at build time (the loader library they go
with is found at run time, and bookworm's 1.3.239 loader runs them), so `make vulkan` unpacks Debian 13's
(trixie's) `libvulkan-dev` package into Maya's cache, `~/.cache/maya/vulkan-headers/` (under
`MAYA_LLAMA_SERVER_CACHE` when set), with apt's own `apt-get download` against a private list of trixie's
packages: nothing is installed, and the system's apt state is left as it is. The build then takes its headers
from there (`llama_server_backends.py`).

    python -m maya_server.engine.vulkan_headers    # prints the include directory, fetching it if needed
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DEBIAN_SUITE = "trixie"
"""Whose `libvulkan-dev` (Vulkan-Headers 1.4.309 in trixie) is unpacked."""
REQUIRED_EXTENSION = "VK_EXT_layer_settings"
"""What llama.cpp's Vulkan backend needs of the headers, looked for in `vulkan_core.h`."""
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


def cache_root() -> Path:
    return Path(os.environ.get("MAYA_LLAMA_SERVER_CACHE") or Path.home() / ".cache" / "maya") / "vulkan-headers"


def cached_include_dir() -> Path:
    return cache_root() / "usr" / "include"


def headers_suffice(include_dir: str | Path) -> bool:
    """Whether `include_dir` holds Vulkan headers that define what llama.cpp's Vulkan backend uses."""
    core = Path(include_dir) / "vulkan" / "vulkan_core.h"
    try:
        return REQUIRED_EXTENSION in core.read_text(errors="replace")
    except OSError:
        return False


def fetch() -> Path:
    """Unpack Debian trixie's libvulkan-dev into the cache (once) and return its include directory."""
    include = cached_include_dir()
    if headers_suffice(include):
        return include
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None or not os.path.exists(KEYRING):
        raise RuntimeError("apt-get, dpkg-deb and Debian's archive keyring are needed to fetch the Vulkan headers")
    with tempfile.TemporaryDirectory(prefix="maya-vulkan-headers-") as work:
        state = Path(work)
        (state / "lists" / "partial").mkdir(parents=True)
        (state / "cache").mkdir()
        sources = state / "sources.list"
        sources.write_text(f"deb [signed-by={KEYRING}] http://deb.debian.org/debian {DEBIAN_SUITE} main\n")
        apt = ["-o", f"Dir::Etc::sourcelist={sources}", "-o", "Dir::Etc::sourceparts=-",
               "-o", f"Dir::State::Lists={state / 'lists'}", "-o", f"Dir::Cache={state / 'cache'}",
               "-o", "APT::Sandbox::User=root"]
        subprocess.run(["apt-get", *apt, "update", "-qq"], check=True, capture_output=True)
        subprocess.run(["apt-get", *apt, "download", "-qq", "libvulkan-dev"], check=True, capture_output=True,
                       cwd=state)
        (package,) = state.glob("libvulkan-dev_*.deb")
        staged = cache_root().with_suffix(".partial")
        shutil.rmtree(staged, ignore_errors=True)
        staged.parent.mkdir(parents=True, exist_ok=True)  # a fresh machine: nothing has made Maya's cache yet
        subprocess.run(["dpkg-deb", "-x", str(package), str(staged)], check=True, capture_output=True)
        shutil.rmtree(cache_root(), ignore_errors=True)
        staged.replace(cache_root())
    if not headers_suffice(include):
        raise RuntimeError(f"{DEBIAN_SUITE}'s libvulkan-dev has no {REQUIRED_EXTENSION}")
    return include


def main() -> int:
    try:
        print(fetch())
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        print(f"maya: the Vulkan headers could not be fetched: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
