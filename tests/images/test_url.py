"""Every malformed image URL is a 400 `invalid_image` at the image's exact param, on both APIs, before
any work; schemes are case-insensitive on both. The loader here has a resolver and transport that fail
the test if asked to resolve or connect, so a URL that slipped through could not reach the network."""

from __future__ import annotations

import asyncio
import base64
import io

import httpx
import pytest
from PIL import Image

from maya_server.neutral.conversation import Conversation, ImagePart, Message, TextPart
from maya_server.errors import BadImage
from maya_server.images.url import parse_fetch_url, redirect_target
from maya_server.images.loader import ImageError, ImageLimits, ImageLoader
from maya_server.metrics import Metrics

from tests.no_network import NoNetwork, never_resolve

MALFORMED = [
    "http://x:99999/a.png", "http://x:-1/", "http://[::1]:abc/", "http://x:0/a.png", "http://x:65536/",
    "http://x:80:80/", "http://x:８０/", "http://[::1/a.png", "http://[zz]/a.png", "http://[1.2.3.4]/a.png",
    "http://::1/a.png", "http://[fe80::1%25eth0]/a.png", "http://a..b/", "http://.a.com/", "http://a.-b.com/",
    "http://" + "a" * 64 + ".com/a.png", "http://" + ".".join(["a" * 60] * 5) + "/", "http://xn--zz.com/",
    "http://xn--/", "http://ex ample.com/a.png", "http://exa\tmple.com/", "http://host/a b.png",
    "http://host/a\x00.png", "http:\\\\host/x", "http://host\\x/", "http:///a.png", "http://", "https://:443/",
    "http://2130706433/", "http://0x7f.1/", "http://127.1/", "http://01.2.3.4/", "http://1.2.3.4.5/",
    "http://\u2100/", "http://" + "a" * 8200 + ".png", "ftp://host/a.png",
    "file:///etc/passwd", "javascript:alert(1)", "gopher://host/", "//host/a.png", "host/a.png", "",
    "data:image/png;base64", "data:text/plain;base64,aGVsbG8=", "data:image/png,raw", "data:;base64,AAAA",
]


@pytest.mark.parametrize("url", MALFORMED)
def test_a_malformed_url_is_a_bad_image_never_another_error(url):
    loader = ImageLoader(ImageLimits(), Metrics(), resolver=never_resolve, transport=NoNetwork())
    conversation = Conversation((Message("user", (TextPart("x"), ImagePart(url, param="p[0]"))),))
    with pytest.raises(ImageError) as caught:
        loader.check(conversation)
    assert (caught.value.param, caught.value.code, caught.value.status) == ("p[0]", "invalid_image", 400)


@pytest.mark.parametrize("url, host, port, path", [
    ("HTTP://Example.COM/a.png", "example.com", 80, "/a.png"),
    ("hTTpS://example.com:8443/a?b=1#frag", "example.com", 8443, "/a?b=1"),
    ("http://ex\u00e4mple.com/a", "xn--exmple-cua.com", 80, "/a"),
    ("http://user:secret@example.com/a", "example.com", 80, "/a"),
    ("http://example.com.", "example.com.", 80, "/"),
    ("http://a_b.example:/x", "a_b.example", 80, "/x"),
    ("http://[2001:db8::1]:81/x", "2001:db8::1", 81, "/x"),
    ("http://93.184.216.34/x", "93.184.216.34", 80, "/x"),
    ("http://a\u3002b\uff0ec/x", "a.b.c", 80, "/x"),  # IDNA's other dots
])
def test_well_formed_urls_are_taken_apart(url, host, port, path):
    parsed = parse_fetch_url(url)
    assert (parsed.host, parsed.port, parsed.path) == (host, port, path)
    assert "secret" not in str(parsed) and "secret" not in parsed.via("1.2.3.4")


@pytest.mark.parametrize("location, reason", [
    ("http:\\\\host/x", "redirect"), ("data:image/png;base64,AAAA", "redirect"), ("ftp://host/a", "redirect"),
    ("http://x:99999/", "redirect"), ("http://[::1/", "redirect"), ("", "redirect"), ("   ", "redirect"),
    ("//a..b/x", "redirect"), ("javascript:alert(1)", "redirect"),
])
def test_a_redirect_to_an_odd_location_is_refused(location, reason):
    with pytest.raises(BadImage) as caught:
        redirect_target(parse_fetch_url("http://example.com/a/b.png"), location)
    assert caught.value.reason == reason


@pytest.mark.parametrize("location, target", [
    ("/c.png", "http://example.com/c.png"), ("c.png", "http://example.com/a/c.png"),
    ("HTTPS://Other.example/x", "https://other.example/x"), ("//cdn.example/y", "http://cdn.example/y"),
])
def test_a_redirect_is_resolved_against_the_url(location, target):
    assert str(redirect_target(parse_fetch_url("http://example.com/a/b.png"), location)) == target


def png_bytes() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 8), (1, 2, 3)).save(out, format="PNG")
    return out.getvalue()


def serving_png(request: httpx.Request) -> httpx.Response:
    """A stand-in for the image's server: it answers in-process, so nothing leaves this machine."""
    return httpx.Response(200, content=png_bytes())


def vision_server(start_server, transport: httpx.AsyncBaseTransport, resolver=never_resolve):
    server = start_server(["A picture."])
    server.engine.accepts_images = True  # the scripted engine, standing in for a vision engine
    service = server.app.state.service
    service.images = ImageLoader(ImageLimits(), service.metrics, resolver=resolver, transport=transport)
    return server


def chat_body(url: str) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": url}}]}]}


def responses_body(url: str, **extra) -> dict:
    return {"model": "m", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": "see"}, {"type": "input_image", "image_url": url}]}], **extra}


@pytest.mark.parametrize("url", MALFORMED)
def test_over_http_both_apis_answer_a_malformed_url_with_invalid_image_at_its_param(start_server, url):
    server = vision_server(start_server, NoNetwork())
    with server.http() as http:
        chat = http.post("/v1/chat/completions", json=chat_body(url))
        responses = http.post("/v1/responses", json=responses_body(url))
        background = http.post("/v1/responses", json=responses_body(url, background=True, store=True))
    for answer, param in ((chat, "messages[0].content[1].image_url.url"), (responses, "input[0].content[1].image_url"),
                          (background, "input[0].content[1].image_url")):
        assert answer.status_code == 400, answer.text
        assert (answer.json()["error"]["code"], answer.json()["error"]["param"]) == ("invalid_image", param)
    assert server.engine.calls == 0


@pytest.mark.parametrize("scheme", ["HTTP", "Http", "hTTps"])
def test_schemes_are_case_insensitive_on_both_apis(start_server, scheme):
    async def public(host, port):
        return ["93.184.216.34"]

    server = vision_server(start_server, httpx.MockTransport(serving_png), public)
    url = f"{scheme}://images.example/cat.png"
    data_url = "DATA:image/PNG;base64," + base64.b64encode(png_bytes()).decode()
    with server.http() as http:
        for body in (chat_body(url), chat_body(data_url)):
            assert http.post("/v1/chat/completions", json=body).status_code == 200
        for body in (responses_body(url), responses_body(data_url)):
            assert http.post("/v1/responses", json=body).status_code == 200


def test_a_redirect_to_a_data_url_or_a_backslash_url_is_a_400_at_the_param(start_server):
    locations = iter(["data:image/png;base64,AAAA", "http:\\\\169.254.169.254/x"])

    def redirecting(request: httpx.Request) -> httpx.Response:
        return httpx.Response(302, headers={"location": next(locations)})

    async def public(host, port):
        return ["93.184.216.34"]

    server = vision_server(start_server, httpx.MockTransport(redirecting), public)
    with server.http() as http:
        chat = http.post("/v1/chat/completions", json=chat_body("http://images.example/a.png"))
        responses = http.post("/v1/responses", json=responses_body("http://images.example/a.png"))
    assert chat.status_code == responses.status_code == 400
    assert chat.json()["error"]["param"] == "messages[0].content[1].image_url.url"
    assert responses.json()["error"]["param"] == "input[0].content[1].image_url"
    assert {chat.json()["error"]["code"], responses.json()["error"]["code"]} == {"invalid_image"}
    assert server.engine.calls == 0


def test_the_loader_refuses_a_malformed_url_the_same_way_without_the_routes():
    loader = ImageLoader(ImageLimits(), Metrics(), resolver=never_resolve, transport=NoNetwork())
    conversation = Conversation((Message("user", (ImagePart("http://x:99999/", param="q"),)),))
    with pytest.raises(ImageError) as caught:
        asyncio.run(loader.load(conversation))
    assert (caught.value.param, caught.value.reason) == ("q", "url")
