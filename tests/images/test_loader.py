"""Image fetching and decoding: every bad image is a 400 naming its param, nothing reaches the engine,
and no address check ever opens a connection (the resolver and transport here fail the test if asked
to connect). Fetch tests use an HTTP server this test starts on 127.0.0.1, with private addresses allowed."""

from __future__ import annotations

import asyncio
import base64
import io
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from PIL import Image

from maya_server.neutral.conversation import Conversation, ImagePart, Message, TextPart
from maya_server.images.loader import ImageError, ImageLimits, ImageLoader
from maya_server.metrics import Metrics

from tests.no_network import NoNetwork, never_resolve


def png(size=(8, 8), color=(200, 10, 10), fmt="PNG") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format=fmt)
    return out.getvalue()


def data_url(raw: bytes, media_type="image/png") -> str:
    return f"data:{media_type};base64," + base64.b64encode(raw).decode()


def resolving_to(*addresses):
    async def resolve(host, port):
        return list(addresses)
    return resolve


def loader(**limits) -> ImageLoader:
    return ImageLoader(ImageLimits(**limits), Metrics(), resolver=resolving_to("127.0.0.1"), transport=NoNetwork())


def load(image_loader: ImageLoader, *urls: str) -> Conversation:
    parts = tuple(ImagePart(url, param=f"input[0].content[{i}].image_url") for i, url in enumerate(urls))
    return asyncio.run(image_loader.load(Conversation((Message("user", (TextPart("see"), *parts)),))))


def refusal(image_loader: ImageLoader, *urls: str) -> ImageError:
    with pytest.raises(ImageError) as caught:
        load(image_loader, *urls)
    return caught.value


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP", "GIF", "BMP"])
def test_each_format_is_re_encoded_as_png(fmt):
    conversation = load(loader(), data_url(png(fmt=fmt), f"image/{fmt.lower()}"))
    data = conversation.turns[0].content[1].data
    assert Image.open(io.BytesIO(data)).format == "PNG"


@pytest.mark.parametrize("url, reason", [
    ("data:image/png;base64,not base64!!", "base64"),
    ("data:text/plain;base64,aGVsbG8=", "media_type"),
    ("data:image/png,rawtext", "data_url"),
    (data_url(png()[:40]), "decode"),
    (data_url(b"GIF89a-not-really"), "decode"),
    ("ftp://example.com/a.png", "scheme"),
    ("file:///etc/passwd", "scheme"),
])
def test_bad_images_are_refused_at_their_param(url, reason):
    error = refusal(loader(), data_url(png()), url)
    assert (error.param, error.reason, error.status) == ("input[0].content[1].image_url", reason, 400)


def test_a_decompression_bomb_is_refused_before_its_pixels_are_decoded():
    bomb = png(size=(4000, 4000), color=(0, 0, 0))  # tiny compressed, 16 M pixels
    assert len(bomb) < 200_000
    assert refusal(loader(max_pixels=1_000_000), data_url(bomb)).reason == "pixels"


def test_too_big_and_too_many():
    assert refusal(loader(max_bytes=100), data_url(png(size=(64, 64)))).reason == "too_big"
    error = refusal(loader(max_count=2), *[data_url(png())] * 3)
    assert (error.reason, error.param) == ("too_many", "input[0].content[2].image_url")


@pytest.mark.parametrize("address", ["127.0.0.1", "10.1.2.3", "192.168.0.7", "172.16.0.1", "169.254.169.254",
                                     "::1", "fd00:ec2::254", "fe80::1", "0.0.0.0", "::ffff:127.0.0.1"])
def test_private_addresses_are_refused_by_resolved_address_without_connecting(address):
    image_loader = ImageLoader(ImageLimits(), resolver=resolving_to("93.184.216.34", address), transport=NoNetwork())
    error = refusal(image_loader, "https://images.example.com/cat.png")
    assert (error.reason, error.param) == ("address", "input[0].content[0].image_url")


@pytest.mark.parametrize("url", ["http://127.0.0.1/a.png", "http://[::1]:8080/a.png", "http://169.254.169.254/latest"])
def test_literal_private_addresses_are_refused_without_resolving_or_connecting(url):
    assert refusal(ImageLoader(ImageLimits(), resolver=never_resolve, transport=NoNetwork()), url).reason == "address"


def test_a_redirect_to_a_private_address_is_refused_before_following_it():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        if len(seen) > 1:
            pytest.fail("the redirect to a private address was followed")
        return httpx.Response(302, headers={"location": "http://metadata.internal/latest/meta-data"})

    async def resolve(host, port):
        return {"public.example": ["93.184.216.34"], "metadata.internal": ["169.254.169.254"]}[host]

    image_loader = ImageLoader(ImageLimits(), resolver=resolve, transport=httpx.MockTransport(handler))
    assert refusal(image_loader, "http://public.example/a.png").reason == "address"
    assert seen == ["http://93.184.216.34/a.png"]  # the checked address, not a second lookup


class ImageServer:
    """An HTTP server on 127.0.0.1 serving a few image routes."""

    def __init__(self) -> None:
        body = png(size=(16, 16))

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                try:
                    self._route()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the loader gave up (a limit or timeout): what these tests expect

            def _route(self):
                if self.path == "/cat.png":
                    self._send(200, body, {"Content-Type": "image/png"})
                elif self.path.startswith("/hop"):
                    n = int(self.path[4:] or 0)
                    self._send(302, b"", {"Location": "/cat.png" if n == 0 else f"/hop{n - 1}"})
                elif self.path == "/huge":  # no Content-Length: the limit must hold while streaming
                    self.send_response(200)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for _ in range(64):
                        self.wfile.write(b"10000\r\n" + b"\0" * 65536 + b"\r\n")
                    self.wfile.write(b"0\r\n\r\n")
                elif self.path == "/slow":
                    time.sleep(2)
                    self._send(200, body, {})
                else:
                    self._send(404, b"no", {})

            def _send(self, status, payload, headers):
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(payload))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def image_server():
    server = ImageServer()
    yield server
    server.httpd.shutdown()


def local_loader(**limits) -> ImageLoader:
    return ImageLoader(ImageLimits(allow_private=True, **limits), Metrics())


def test_fetching_over_http_with_redirects(image_server):
    conversation = load(local_loader(), f"{image_server.url}/cat.png", f"{image_server.url}/hop2")
    assert all(Image.open(io.BytesIO(p.data)).size == (16, 16) for p in conversation.turns[0].content[1:])


@pytest.mark.parametrize("path, limits, reason", [
    ("/missing", {}, "http_status"),
    ("/hop5", {"max_redirects": 3}, "redirects"),
    ("/huge", {"max_bytes": 1_000_000}, "too_big"),
    ("/slow", {"fetch_timeout": 0.3}, "timeout"),
])
def test_fetch_failures(image_server, path, limits, reason):
    assert refusal(local_loader(**limits), image_server.url + path).reason == reason


def test_loopback_is_refused_unless_allowed(image_server):
    # the real resolver (a literal 127.0.0.1), but no transport that could connect if the refusal slipped
    assert refusal(ImageLoader(ImageLimits(), transport=NoNetwork()), f"{image_server.url}/cat.png").reason == "address"


def test_over_http_every_bad_image_is_a_400_and_the_engine_is_untouched(start_server):
    server = start_server(["never"])
    server.engine.accepts_images = True  # the scripted engine, standing in for a vision engine
    service = server.app.state.service  # a loader that fails the test if the metadata address slips through
    service.images = ImageLoader(ImageLimits(), service.metrics, resolver=never_resolve, transport=NoNetwork())
    bad = {"type": "input_image", "image_url": "data:image/png;base64,@@@@"}
    body = {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": "x"}, bad]}]}
    with server.http() as http:
        response = http.post("/v1/responses", json=body)
        chat = http.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "http://169.254.169.254/latest/meta-data"}}]}]})
        metrics = http.get("/metrics/prometheus").text
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "input[0].content[1].image_url"
    assert chat.status_code == 400 and chat.json()["error"]["param"] == "messages[0].content[0].image_url.url"
    assert server.engine.calls == 0
    assert 'maya:image_rejections_total{reason="address"} 1.0' in metrics


@pytest.mark.parametrize("address", ["100.100.100.200", "100.64.0.1", "192.0.0.200", "fec0::1", "2002:a9fe:a9fe::",
                                     "64:ff9b::a00:1", "::ffff:a9fe:a9fe", "2001:0:5db8:d822::3f57:fefe",
                                     "::10.0.0.1", "ff02::1", "198.18.0.1", "240.0.0.1"])
def test_the_ranges_pythons_flags_miss_are_refused_without_connecting(address):
    image_loader = ImageLoader(ImageLimits(), resolver=resolving_to(address), transport=NoNetwork())
    assert refusal(image_loader, "https://images.example.com/cat.png").reason == "address"


class Stalling:
    """An image server on 127.0.0.1 that sends a byte every `every` seconds and never finishes; it notes
    when a client asked and when the client closed the connection."""

    def __init__(self, every: float = 0.1) -> None:
        self.requested, self.closed = threading.Event(), threading.Event()
        self.connections = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path == "/fail":  # a refusal that comes once the slow fetch is under way
                    owner.requested.wait(5)
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                owner.connections += 1
                self.send_response(200)
                self.send_header("Content-Length", "100000")
                self.end_headers()
                owner.requested.set()
                try:
                    for _ in range(600):
                        self.wfile.write(b"\0")
                        self.wfile.flush()
                        time.sleep(every)
                except OSError:
                    owner.closed.set()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.url = self.base + "/slow.png"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def stalling():
    server = Stalling()
    yield server
    server.httpd.shutdown()


def test_a_fetch_that_reads_steadily_still_ends_at_its_deadline(stalling):
    error = refusal(local_loader(fetch_timeout=5, fetch_deadline=0.6), stalling.url)
    # the deadline's refusal, not the per-read timeout's nor the body's end: the reason says which ended it
    assert error.reason == "deadline" and "image_fetch_deadline" in error.message
    assert stalling.closed.wait(5)


def test_the_first_refused_image_cancels_the_others_fetches(stalling):
    async def scenario():
        image_loader = local_loader()
        task = asyncio.ensure_future(image_loader.load(Conversation((Message("user", (
            ImagePart(stalling.url, param="p[0]"), ImagePart(stalling.base + "/fail", param="p[1]"))),))))
        with pytest.raises(ImageError) as caught:
            await task
        return caught.value

    error = asyncio.run(scenario())
    assert (error.param, error.reason) == ("p[1]", "http_status")
    assert stalling.closed.wait(5)  # the slow fetch did not outlive the request


def test_a_cancelled_load_closes_its_fetches_and_gives_its_memory_back(stalling):
    metrics = Metrics()
    image_loader = ImageLoader(ImageLimits(allow_private=True), metrics)

    async def scenario():
        task = asyncio.ensure_future(image_loader.load(Conversation((Message("user", (
            ImagePart(stalling.url, param="p[0]"), ImagePart(stalling.url, param="p[1]"))),))))
        for _ in range(200):
            if stalling.connections == 2:
                break
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert stalling.closed.wait(5)
    assert image_loader.memory.in_use == 0
    assert 'maya:image_fetches 0.0' in metrics.render().decode()
