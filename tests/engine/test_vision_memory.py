"""Maya's peak memory under the worst images the default limits allow, measured on a real Maya process.

A solid 7680x4320 PNG is 107 KB on the wire and 33,177,600 pixels, the default `image_max_pixels`:
before images were decoded small, one took ~350 MB of Maya's memory and eight in a request ~3 GB
(`bench/image_memory.py` prints the figures). Here Maya runs as its own process (the embedded
engine, SmolLM2 with the seeded test projector), images come as data URLs and from a server this
test runs on 127.0.0.1, singly, eight to a request and from concurrent clients, and Maya's own
high-water mark (`VmHWM`) must stay under its idle RSS plus `image_server_bytes` plus a margin for
the rest of the process (request bodies, the scaled PNGs, Python's own growth). /health keeps
answering throughout, and SIGTERM still ends the process cleanly.
"""

from __future__ import annotations

import base64
import signal
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from bench.image_memory import ImageServer, chat, noisy_jpeg, solid_png, status_kib
from maya_server.config import ServerConfig
from tests.engine.mmproj_fixture import write_test_mmproj

from tests.embedded import start_cli

# serial: it measures the peak RSS of a whole Maya process within time bounds that other workers' load stretches
pytestmark = [pytest.mark.slow, pytest.mark.serial]

MARGIN = 160 * 1024 * 1024
"""What the rest of the process may add at its peak besides the image pool: bodies, scaled PNGs, buffers."""


def test_peak_rss_stays_bounded_under_the_worst_images_the_defaults_allow(tmp_path):
    png, jpeg = solid_png(), noisy_jpeg(ServerConfig.image_max_bytes)
    server = ImageServer({"/solid.png": png, "/noisy.jpg": jpeg})
    files = server.url
    png_url = "data:image/png;base64," + base64.b64encode(png).decode()
    mmproj = write_test_mmproj(tmp_path / "mmproj.gguf")
    process, url = start_cli("--mmproj", str(mmproj), "--slots", "1", "--ctx", "2048", "--image-allow-private",
                             tmp_path=tmp_path)
    stop, health = threading.Event(), []

    def watch() -> None:
        with httpx.Client(timeout=60) as client:
            while not stop.wait(0.1):
                health.append(client.get(url + "/health").status_code)

    try:
        assert chat(url, [f"{files}/solid.png"]) == 200  # warm-up: the image path's first use
        idle = status_kib(process.pid, "VmRSS") * 1024
        watcher = threading.Thread(target=watch)
        watcher.start()
        assert chat(url, [png_url]) == 200
        assert chat(url, [png_url] * 8) == 200
        loads = [[f"{files}/solid.png"] * 3, [f"{files}/noisy.jpg"] * 2, [png_url] * 3]
        with ThreadPoolExecutor(len(loads)) as pool:
            statuses = list(pool.map(lambda images: chat(url, images), loads))
        stop.set()
        watcher.join()
        peak = status_kib(process.pid, "VmHWM") * 1024
        assert set(statuses) <= {200, 429} and 200 in statuses, statuses  # 429: the image pool was full
        print(f"peak RSS {(peak - idle) >> 20} MiB above idle; statuses {statuses}")
        assert peak - idle < ServerConfig.image_server_bytes + MARGIN, (peak - idle) >> 20
        assert health and set(health) == {200}
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        stop.set()
        if process.poll() is None:
            process.kill()
            process.wait()
        server.httpd.shutdown()
