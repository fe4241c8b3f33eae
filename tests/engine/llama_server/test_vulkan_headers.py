"""`make vulkan`'s header fetch (maya_server/engine/llama_server/vulkan_headers.py): which mirror it asks, and a fresh
machine's first run, with no `~/.cache/maya` yet, through the machine's own apt configuration. Every mirror and
proxy here is on loopback: no test reaches the network."""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from maya_server.engine.llama_server import vulkan_headers
from maya_server.engine.llama_server.vulkan_headers import configured_mirrors, debian_mirrors, debian_release, private_sources

needs_apt = pytest.mark.skipif(
    shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None or not os.path.exists(vulkan_headers.KEYRING),
    reason="fetching the headers needs apt-get, dpkg-deb and Debian's archive keyring")

ONE_LINE = """\
# the archive, as a company mirrors it
deb [ arch=amd64 signed-by=/usr/share/keyrings/corp.gpg ] http://mirror.corp.example/debian/ bookworm main contrib
deb-src http://mirror.corp.example/debian bookworm main
deb http://mirror.corp.example/debian bookworm-updates main
deb http://security.debian.org/debian-security bookworm-security main
deb https://download.docker.com/linux/debian bookworm stable
deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main
"""
DEB822 = """\
Types: deb deb-src
# a comment inside a stanza
URIs: http://second.corp.example/debian
 http://third.corp.example/debian/
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://disabled.example/debian
Suites: bookworm
Components: main
Enabled: no

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main

Types: deb
URIs: https://deb.nodesource.com/node_20.x
Suites: nodistro
Components: main
"""


def test_the_archive_mirrors_are_read_from_both_formats_and_nothing_else():
    assert debian_mirrors([ONE_LINE], [DEB822], "bookworm") == [
        "http://mirror.corp.example/debian", "http://second.corp.example/debian", "http://third.corp.example/debian"]
    assert debian_mirrors([ONE_LINE], [DEB822], None) == []  # not Debian: the default mirror, said so
    security = "deb http://security.debian.org/debian-security bookworm-security main\n"
    assert debian_mirrors([security], [], "bookworm") == []
    assert private_sources(["http://mirror.corp.example/debian"]) == (
        f"deb [signed-by={vulkan_headers.KEYRING}] http://mirror.corp.example/debian trixie main\n")


def test_a_release_updates_suite_alone_names_the_archive_mirror():
    """`bookworm-updates` is served by the release's archive mirror, so a machine whose sources list only it (or
    list it first) names that mirror, in apt's order; `bookworm-security` is another archive, not a mirror."""
    only_updates = "deb http://updates.corp.example/debian bookworm-updates main\n"
    assert debian_mirrors([only_updates], [], "bookworm") == ["http://updates.corp.example/debian"]
    stanza = "Types: deb\nURIs: http://updates.corp.example/debian/\nSuites: bookworm-updates\nComponents: main\n"
    assert debian_mirrors([], [stanza], "bookworm") == ["http://updates.corp.example/debian"]
    release_after = "deb http://release.corp.example/debian bookworm main\n"
    assert debian_mirrors([only_updates + release_after], [], "bookworm") == [
        "http://updates.corp.example/debian", "http://release.corp.example/debian"]
    security = "deb http://security.debian.org/debian-security bookworm-security main\n"
    assert debian_mirrors([security + only_updates], [], "bookworm") == ["http://updates.corp.example/debian"]


def test_the_machines_release_and_sources_are_found_under_etc(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(DEB822)
    (tmp_path / "sources.list.d" / "corp.list").write_text(ONE_LINE)
    (tmp_path / "sources.list.d" / "old.list.disabled").write_text("deb http://old.example/debian bookworm main\n")
    os_release = tmp_path / "os-release"
    os_release.write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_CODENAME=bookworm\n')
    assert configured_mirrors(tmp_path, os_release) == [
        "http://mirror.corp.example/debian", "http://second.corp.example/debian", "http://third.corp.example/debian"]
    assert debian_release("ID=ubuntu\nVERSION_CODENAME=noble\n") is None
    assert configured_mirrors(tmp_path / "nothing", os_release) == []



def _signed_repository(root: Path, arch: str) -> Path:
    """A Debian repository of one `libvulkan-dev` holding a `vulkan_core.h` that defines what llama.cpp needs,
    signed by a throwaway key (apt checks the signature as it does Debian's): the keyring's path."""
    package = root / "build"
    header = package / "usr" / "include" / "vulkan" / "vulkan_core.h"
    header.parent.mkdir(parents=True)
    header.write_text(f"#define {vulkan_headers.REQUIRED_EXTENSION} 1\n")
    (package / "DEBIAN").mkdir()
    (package / "DEBIAN" / "control").write_text(
        f"Package: libvulkan-dev\nVersion: 1.4.309.0-1\nArchitecture: {arch}\nMaintainer: Maya tests <t@invalid>\n"
        "Description: Vulkan headers (test stand-in)\n")
    pool = root / "repo" / "pool"
    pool.mkdir(parents=True)
    deb = pool / f"libvulkan-dev_1.4.309.0-1_{arch}.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(package), str(deb)], check=True, capture_output=True)
    dist = root / "repo" / "dists" / "trixie"
    packages = dist / "main" / f"binary-{arch}" / "Packages"
    packages.parent.mkdir(parents=True)
    data = deb.read_bytes()
    packages.write_text(
        f"Package: libvulkan-dev\nVersion: 1.4.309.0-1\nArchitecture: {arch}\nMaintainer: Maya tests <t@invalid>\n"
        f"Filename: pool/{deb.name}\nSize: {len(data)}\nSHA256: {hashlib.sha256(data).hexdigest()}\n"
        "Description: Vulkan headers (test stand-in)\n\n")
    listed = packages.read_bytes()
    date = time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime())
    (dist / "Release").write_text(
        f"Suite: trixie\nCodename: trixie\nDate: {date}\nArchitectures: {arch}\nComponents: main\nSHA256:\n"
        f" {hashlib.sha256(listed).hexdigest()} {len(listed)} main/binary-{arch}/Packages\n")
    gpg = ["gpg", "--batch", "--quiet", "--homedir", str(root / "gnupg"), "--passphrase", "", "--pinentry-mode",
           "loopback"]
    (root / "gnupg").mkdir(mode=0o700)
    subprocess.run([*gpg, "--quick-gen-key", "Maya tests <t@invalid>", "ed25519", "sign", "never"], check=True,
                   capture_output=True, timeout=60)
    subprocess.run([*gpg, "--clearsign", "-o", str(dist / "InRelease"), str(dist / "Release")], check=True,
                   capture_output=True, timeout=60)
    keyring = root / "keyring.gpg"
    keyring.write_bytes(subprocess.run([*gpg, "--export"], check=True, capture_output=True, timeout=60).stdout)
    return keyring


class _Files(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@needs_apt
@pytest.mark.skipif(shutil.which("gpg") is None, reason="signing the local test repository needs gpg")
def test_a_fresh_machine_fetches_the_headers_into_a_cache_folder_that_did_not_exist(tmp_path, monkeypatch):
    """An empty HOME and no MAYA_LLAMA_SERVER_CACHE: `~/.cache/maya` does not exist yet (a fresh machine). The
    machine's apt sources name a mirror on loopback (a signed repository made here): nothing leaves the machine."""
    arch = subprocess.run(["dpkg", "--print-architecture"], check=True, capture_output=True, text=True).stdout.strip()
    monkeypatch.setattr(vulkan_headers, "KEYRING", str(_signed_repository(tmp_path, arch)))
    handler = functools.partial(_Files, directory=str(tmp_path / "repo"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("MAYA_LLAMA_SERVER_CACHE", raising=False)
    mirror = f"http://127.0.0.1:{server.server_address[1]}"
    etc, os_release = _machine(tmp_path, f"Types: deb\nURIs: {mirror}\nSuites: bookworm\nComponents: main\n")
    try:
        include = vulkan_headers.fetch(etc, os_release)
    finally:
        server.shutdown()
        thread.join(timeout=10)
    assert include == home / ".cache" / "maya" / "vulkan-headers" / "usr" / "include"
    assert vulkan_headers.REQUIRED_EXTENSION in (include / "vulkan" / "vulkan_core.h").read_text()


class _Recorder(http.server.BaseHTTPRequestHandler):
    """A mirror (or a proxy) that has nothing: it notes what apt asked for and answers 404."""

    asked: list[str] = []

    def do_GET(self):
        self.asked.append(self.path)
        self.send_error(404)

    def log_message(self, *args):
        pass


@pytest.fixture
def recorder():
    _Recorder.asked = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    thread.join(timeout=10)


def _machine(tmp_path: Path, sources: str) -> tuple[Path, Path]:
    etc = tmp_path / "etc-apt"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list.d" / "debian.sources").write_text(sources)
    os_release = tmp_path / "os-release"
    os_release.write_text("ID=debian\nVERSION_CODENAME=bookworm\n")
    return etc, os_release


@needs_apt
def test_apt_asks_the_machines_own_mirror_for_trixie(tmp_path, monkeypatch, recorder):
    monkeypatch.setenv("MAYA_LLAMA_SERVER_CACHE", str(tmp_path / "cache"))
    mirror = f"http://127.0.0.1:{recorder.server_address[1]}/debian"
    etc, os_release = _machine(tmp_path, f"Types: deb\nURIs: {mirror}\nSuites: bookworm\nComponents: main\n")
    with pytest.raises(RuntimeError, match="apt-get update failed") as failed:
        vulkan_headers.fetch(etc, os_release)
    assert "/debian/dists/trixie/InRelease" in _Recorder.asked, _Recorder.asked
    assert "127.0.0.1" in str(failed.value)  # apt's own words name the mirror it could not use
    assert not (tmp_path / "cache").exists()


@needs_apt
def test_apts_own_proxy_configuration_still_applies(tmp_path, monkeypatch, recorder):
    """A proxy set in apt's configuration (here `APT_CONFIG`, read as `/etc/apt/apt.conf` is; apt.conf.d alike)
    carries the request: only the source list and apt's state folders are Maya's own."""
    monkeypatch.setenv("MAYA_LLAMA_SERVER_CACHE", str(tmp_path / "cache"))
    conf = tmp_path / "apt.conf"
    conf.write_text(f'Acquire::http::Proxy "http://127.0.0.1:{recorder.server_address[1]}/";\n')
    monkeypatch.setenv("APT_CONFIG", str(conf))
    etc, os_release = _machine(tmp_path, "Types: deb\nURIs: http://mirror.corp.example/debian\nSuites: bookworm"
                                         "\nComponents: main\n")
    with pytest.raises(RuntimeError, match="apt-get update failed"):
        vulkan_headers.fetch(etc, os_release)
    assert "http://mirror.corp.example/debian/dists/trixie/InRelease" in _Recorder.asked, _Recorder.asked
