"""`/docs`: Swagger UI served from Maya's own process, so the page works on a machine with no internet.

FastAPI's built-in page loads Swagger UI from a CDN (no integrity check, and nothing at all
offline, which is how Maya is often run). The `fastapi-offline` package (MIT) ships Swagger
UI's built files (Apache-2.0) unchanged; Maya serves those three files itself under
`/docs/assets/` and writes FastAPI's own page around them. The files are found with
`importlib.util.find_spec`, without importing the package, and only those three are served.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.responses import FileResponse, HTMLResponse, Response

from ..errors import NotFoundError

ASSETS_URL = "/docs/assets"
ASSETS_PACKAGE = "fastapi_offline"
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon.png": "image/png",
}


def assets_dir() -> Path:
    spec = importlib.util.find_spec(ASSETS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the {ASSETS_PACKAGE} package (Swagger UI's files for /docs) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "static"


def install_docs(app: FastAPI, *, docs_url: str, openapi_url: str) -> None:
    """`docs_url` (the page) and `docs_url/assets/NAME` (its files); neither is in the OpenAPI document."""
    directory = assets_dir()

    @app.get(docs_url, include_in_schema=False)
    async def docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=root + openapi_url, title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            swagger_ui_parameters={"validatorUrl": None},  # Swagger UI's default validator badge calls out
        )

    @app.get(ASSETS_URL + "/{name}", include_in_schema=False)
    async def asset(name: str) -> Response:
        if name not in ASSETS:
            raise NotFoundError(f"No documentation asset named {name!r}.")
        return FileResponse(directory / name, media_type=ASSETS[name],
                            headers={"cache-control": "public, max-age=86400"})
