"""Vulkan C++ headers new enough for llama.cpp's Vulkan backend, where the system's are too old (Debian 12).

The pinned llama.cpp's Vulkan backend uses `VK_EXT_layer_settings` without a guard, which Vulkan's headers define
from 1.3.2xx on; Debian 12 (bookworm) ships 1.3.239, and its build then fails minutes in (`'LayerSettingEXT' is not
a member of 'vk'`). The headers are plain files and need nothing else at build time (the loader library they go
with is found at run time, and bookworm's 1.3.239 loader runs them), so `make vulkan` unpacks Debian 13's
(trixie's) `libvulkan-dev` package into Maya's cache, `~/.cache/maya/vulkan-headers/` (under
`MAYA_LLAMA_SERVER_CACHE` when set), with apt's own `apt-get download` against a private list of trixie's
packages: nothing is installed, and the system's apt state is left as it is. The build then takes its headers
from there (`llama_server/backends.py`).

The private list names the mirror(s) the machine's own apt sources use for the Debian archive (`debian_mirrors`:
the entries for the machine's release and its `-updates`, not security or third-party repositories), with
trixie as the suite: a company's mirror keeps serving it, and apt's own configuration (`/etc/apt/apt.conf.d`,
a proxy included) is read as usual, since only the source list and apt's state folders are overridden. Only a
machine with no Debian source at all fetches from `DEFAULT_MIRROR`, and says so.

    python -m maya_server.engine.llama_server.vulkan_headers    # prints the include directory, fetching it if needed
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
DEFAULT_MIRROR = "http://deb.debian.org/debian"
"""Where the package is fetched from when the machine's apt sources name no Debian mirror."""
APT_ETC = Path("/etc/apt")
OS_RELEASE = Path("/etc/os-release")


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


def debian_release(os_release: str) -> str | None:
    """The Debian codename `/etc/os-release` names (`bookworm`); None on another distribution."""
    fields = dict(line.split("=", 1) for line in os_release.splitlines() if "=" in line)
    values = {key.strip(): value.strip().strip('"\'') for key, value in fields.items()}
    return (values.get("VERSION_CODENAME") or None) if values.get("ID") == "debian" else None


def _one_line_entries(text: str) -> list[tuple[list[str], list[str], list[str], list[str]]]:
    """(types, URIs, suites, components) of each entry of a `sources.list` in the one-line format."""
    entries = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith(("deb ", "deb-src ")) and "[" in line.split()[1]:  # options: `[arch=amd64 signed-by=…]`
            kind, _, rest = line.partition(" ")
            line = kind + " " + rest.partition("]")[2]
        words = line.split()
        if len(words) >= 4:
            entries.append(([words[0]], [words[1]], [words[2]], words[3:]))
    return entries


def _deb822_entries(text: str) -> list[tuple[list[str], list[str], list[str], list[str]]]:
    """(types, URIs, suites, components) of each enabled stanza of a `.sources` file (deb822 format)."""
    entries = []
    for stanza in _stanzas(text):
        if stanza.get("enabled", "yes").lower() == "no":
            continue
        entries.append(tuple(stanza.get(key, "").split() for key in ("types", "uris", "suites", "components")))
    return entries


def _stanzas(text: str) -> list[dict[str, str]]:
    stanzas: list[dict[str, str]] = [{}]
    key = None
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if not line.strip():
            stanzas.append({})
            key = None
        elif line[0].isspace() and key:  # a field's continuation line
            stanzas[-1][key] += " " + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            key = key.strip().lower()
            stanzas[-1][key] = value.strip()
    return [stanza for stanza in stanzas if stanza]


def debian_mirrors(one_line: list[str], deb822: list[str], release: str | None) -> list[str]:
    """The URIs of the Debian archive in the machine's apt sources, in the order apt reads them: binary entries
    (`deb`) whose suite is `release` or `release-updates` with the `main` component. Security
    (`release-security`) and third-party repositories (their own suites or components) are not the archive."""
    if not release:
        return []
    mirrors: list[str] = []
    entries = [entry for text in one_line for entry in _one_line_entries(text)]
    entries += [entry for text in deb822 for entry in _deb822_entries(text)]
    for types, uris, suites, components in entries:
        if "deb" not in types or "main" not in components or not {release, f"{release}-updates"} & set(suites):
            continue
        for uri in uris:
            uri = uri.rstrip("/")
            if uri not in mirrors and not uri.startswith("cdrom:"):
                mirrors.append(uri)
    return mirrors


def configured_mirrors(etc: Path = APT_ETC, os_release: Path = OS_RELEASE) -> list[str]:
    """`debian_mirrors` of this machine: `etc/sources.list`, `etc/sources.list.d/*.list` and `*.sources`."""
    def read(path: Path) -> str:
        try:
            return path.read_text(errors="replace")
        except OSError:
            return ""

    parts = sorted((etc / "sources.list.d").glob("*")) if (etc / "sources.list.d").is_dir() else []
    one_line = [read(etc / "sources.list")] + [read(path) for path in parts if path.suffix == ".list"]
    deb822 = [read(path) for path in parts if path.suffix == ".sources"]
    return debian_mirrors(one_line, deb822, debian_release(read(os_release)))


def private_sources(mirrors: list[str]) -> str:
    """The private source list: trixie's `main` from each mirror, checked against Debian's archive keyring."""
    return "".join(f"deb [signed-by={KEYRING}] {mirror} {DEBIAN_SUITE} main\n" for mirror in mirrors)


def fetch(etc: Path = APT_ETC, os_release: Path = OS_RELEASE) -> Path:
    """Unpack Debian trixie's libvulkan-dev into the cache (once) and return its include directory; the mirror is
    the one `etc`'s sources name (`configured_mirrors`)."""
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
        mirrors = configured_mirrors(etc, os_release)
        if not mirrors:
            print(f"maya: no Debian mirror in this machine's apt sources; fetching {DEBIAN_SUITE}'s libvulkan-dev "
                  f"from {DEFAULT_MIRROR}", file=sys.stderr)
        sources.write_text(private_sources(mirrors or [DEFAULT_MIRROR]))
        apt = ["-o", f"Dir::Etc::sourcelist={sources}", "-o", "Dir::Etc::sourceparts=-",
               "-o", f"Dir::State::Lists={state / 'lists'}", "-o", f"Dir::Cache={state / 'cache'}",
               "-o", "APT::Sandbox::User=root"]
        _run("apt-get update", ["apt-get", *apt, "update", "-qq"], state)
        _run("apt-get download", ["apt-get", *apt, "download", "-qq", "libvulkan-dev"], state)
        (package,) = state.glob("libvulkan-dev_*.deb")
        staged = cache_root().with_suffix(".partial")
        shutil.rmtree(staged, ignore_errors=True)
        staged.parent.mkdir(parents=True, exist_ok=True)  # a fresh machine: nothing has made Maya's cache yet
        _run("dpkg-deb -x", ["dpkg-deb", "-x", str(package), str(staged)], state)
        shutil.rmtree(cache_root(), ignore_errors=True)
        staged.replace(cache_root())
    if not headers_suffice(include):
        raise RuntimeError(f"{DEBIAN_SUITE}'s libvulkan-dev has no {REQUIRED_EXTENSION}")
    return include


def _run(step: str, command: list[str], cwd: Path) -> None:
    """Run one step; its failure says what the tool said (apt names the mirror or proxy it could not reach)."""
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[-2000:]
        raise RuntimeError(f"{step} failed (exit {done.returncode}): {said}")


def main() -> int:
    try:
        print(fetch())
    except (RuntimeError, OSError, ValueError) as exc:
        print(f"maya: the Vulkan headers could not be fetched: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
