"""A resolver and an HTTP transport for image-fetch tests that fail the test if ever asked: an address refusal
that slips then fails here, without a lookup or a connection leaving the machine."""

from __future__ import annotations

import httpx
import pytest


class NoNetwork(httpx.AsyncBaseTransport):
    async def handle_async_request(self, request):
        pytest.fail(f"a connection to {request.url} was attempted")


async def never_resolve(host, port):
    pytest.fail(f"{host} was resolved")
