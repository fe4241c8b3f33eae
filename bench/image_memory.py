"""Peak memory per image at the default image limits, and how fast /health answers meanwhile.

The worst images the defaults allow are large in pixels and small on the wire:
a solid 7680x4320 PNG (33,177,600 pixels, `image_max_pixels`) is ~107 KB, and a
noisy 7680x4320 JPEG just under `image_max_bytes`. Each case runs against a fresh
Maya process (the embedded engine, SmolLM2 with the seeded test projector,
`--image-allow-private` so it may fetch from this script's image server on
127.0.0.1), so the process's own high-water mark (`VmHWM` in /proc/PID/status)
is that case's peak. Printed per case: the answers' statuses, Maya's idle RSS
(MiB, after one small image), its peak RSS above that (in total and per image),
the llama-server child's peak RSS, the slowest /health answer while the case ran
(sampled every 50 ms, ms), and Maya's RSS 2 s after the requests ended.

Measured on the 2-core dev box (another test suite running beside it), at the
branch point (9bfcf17: full-resolution BMP to the engine) and after:

    case                                    statuses        peak +MiB /image  child  health ms  after MiB
    before  1 x PNG, data URL               400 (engine)      351      351     312       428      235
            1 x PNG, fetched                400               349      349     343       677      233
            1 x 19 MiB JPEG, fetched        400               398      398     343       444      282
            8 x PNG in one request          400              3005      376     312      5224     1338
            2 concurrent x 8 PNG            400,400          6143      384     344      5518     2704
            4 concurrent x 8 PNG, fetched   400 x 4          8303      259     408      8074     4864
    after   1 x PNG, data URL               200               139      139     181        10      117
            1 x PNG, fetched                200               140      140     182        20      109
            1 x 19 MiB JPEG, fetched        200                42       42     182        16      108
            8 x PNG in one request          200               141       18     182        58      134
            2 concurrent x 8 PNG            200,200           282       18     184       119      163
            4 concurrent x 8 PNG, fetched   200 x 4           296        9     186       341      173

(idle 105 MiB both times; "before" answered every case with llama-server's 400: the base64 body passed
its 100 MiB limit.)

    .venv/bin/python bench/image_memory.py                    # this checkout
    .venv/bin/python bench/image_memory.py --source DIR       # another checkout's maya_server (before/after)

Nothing here talks to anything but 127.0.0.1.
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import numpy as np
from PIL import Image

for _path in (Path(__file__).resolve().parent, Path(__file__).resolve().parent.parent):  # bench/ and the root
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from maya_process import children, start_maya  # noqa: E402

from tests.engine.mmproj_fixture import write_test_mmproj  # noqa: E402

WIDTH, HEIGHT = 7680, 4320


def solid_png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (WIDTH, HEIGHT), (10, 200, 30)).save(out, format="PNG")
    return out.getvalue()


def noisy_jpeg(limit: int = 20 * 1024 * 1024) -> bytes:
    """A 7680x4320 JPEG of smooth noise, as large as fits under `limit` bytes."""
    rng = np.random.default_rng(7)
    coarse = rng.integers(0, 256, (HEIGHT // 4, WIDTH // 4, 3), dtype=np.uint8)
    image = Image.fromarray(coarse).resize((WIDTH, HEIGHT), Image.Resampling.BILINEAR)
    for quality in (95, 90, 85, 80, 70, 60):
        out = io.BytesIO()
        image.save(out, format="JPEG", quality=quality)
        if out.tell() <= limit:
            return out.getvalue()
    raise RuntimeError("no quality fits")


def data_url(raw: bytes, media_type: str) -> str:
    return f"data:{media_type};base64," + base64.b64encode(raw).decode()


class ImageServer:
    def __init__(self, files: dict[str, bytes]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                body = files.get(self.path, b"")
                self.send_response(200 if body else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def chat(url: str, urls: list[str]) -> int:
    content = [{"type": "text", "text": "Describe."}] + [{"type": "image_url", "image_url": {"url": u}} for u in urls]
    body = {"model": "m", "max_tokens": 1, "temperature": 0, "messages": [{"role": "user", "content": content}]}
    try:
        return httpx.post(url + "/v1/chat/completions", json=body, timeout=300).status_code
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}"  # type: ignore[return-value]


def health_watch(url: str, stop: threading.Event, worst: list[float]) -> None:
    with httpx.Client(timeout=30) as client:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                client.get(url + "/health")
            except httpx.HTTPError:
                pass
            worst[0] = max(worst[0], time.perf_counter() - started)
            time.sleep(0.05)


def run_case(args, mmproj: Path, name: str, requests: list[list[str]]) -> None:
    env_source = ["--mmproj", str(mmproj), "--slots", "1", "--ctx", "2048", "--image-allow-private"]
    command = [sys.executable, "-m", "maya_server", *env_source]
    cwd = os.getcwd()
    os.chdir(args.source)  # `python -m maya_server` imports the package from the working directory first
    try:
        process, url = start_maya(command=command, timeout=120)
    finally:
        os.chdir(cwd)
    try:
        chat(url, [data_url(small_png(), "image/png")])  # warm-up: the first image path is loaded
        time.sleep(0.5)
        idle = status_kib(process.pid, "VmRSS")
        stop, worst = threading.Event(), [0.0]
        watcher = threading.Thread(target=health_watch, args=(url, stop, worst), daemon=True)
        watcher.start()
        with ThreadPoolExecutor(len(requests)) as pool:
            statuses = list(pool.map(lambda urls: chat(url, urls), requests))
        stop.set()
        watcher.join()
        peak = status_kib(process.pid, "VmHWM")
        child_peak = max((status_kib(c, "VmHWM") for c in children(process.pid)), default=0)
        time.sleep(2)
        after = status_kib(process.pid, "VmRSS")
    finally:
        process.terminate()
        process.wait(timeout=60)
    images = sum(len(r) for r in requests)
    grown = (peak - idle) / 1024
    print(f"{name:<44} {','.join(map(str, statuses)):<16} {idle / 1024:6.0f} {grown:8.0f} {grown / images:8.0f} "
          f"{child_peak / 1024:8.0f} {worst[0] * 1000:8.0f} {after / 1024:8.0f}", flush=True)


def small_png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (32, 32), (1, 2, 3)).save(out, format="PNG")
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=str(Path(__file__).resolve().parent.parent),
                        help="the checkout whose maya_server runs (default: this one)")
    parser.add_argument("--cases", default="all", help="comma-separated case numbers (default: all)")
    args = parser.parse_args()
    png, jpeg = solid_png(), noisy_jpeg()
    server = ImageServer({"/solid.png": png, "/noisy.jpg": jpeg})
    png_url, jpeg_url = data_url(png, "image/png"), data_url(jpeg, "image/jpeg")
    cases = [
        ("1 x 7680x4320 PNG (107 KB), data URL", [[png_url]]),
        ("1 x 7680x4320 PNG, fetched", [[server.url + "/solid.png"]]),
        (f"1 x 7680x4320 JPEG ({len(jpeg) >> 20} MiB), fetched", [[server.url + "/noisy.jpg"]]),
        ("8 x 7680x4320 PNG in one request, data URLs", [[png_url] * 8]),
        ("2 concurrent x 8 x 7680x4320 PNG, data URLs", [[png_url] * 8] * 2),
        ("4 concurrent x 8 x 7680x4320 PNG, fetched", [[server.url + "/solid.png"] * 8] * 4),
    ]
    chosen = range(len(cases)) if args.cases == "all" else [int(n) - 1 for n in args.cases.split(",")]
    print(f"source: {args.source}")
    print(f"{'case':<44} {'statuses':<16} {'idle':>6} {'peak +MiB':>8} {'/image':>8} {'child':>8} "
          f"{'health ms':>8} {'after MiB':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        mmproj = write_test_mmproj(Path(tmp) / "mmproj.gguf")
        for i in chosen:
            run_case(args, mmproj, *cases[i])
    server.httpd.shutdown()


if __name__ == "__main__":
    main()
