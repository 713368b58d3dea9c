"""The inspector page's HTTP side: ``/`` and ``/inspector/*`` need no token and hold no data, every data call still
does; content types and security headers; the assets ship in the package (tests/browser drives the page itself)."""

from __future__ import annotations

from importlib.resources import files

import pytest

from memory_ext.server.inspector import ASSETS, PAGE_PATHS

from .conftest import ADMIN, LiveServer

PAGES = {
    "/": "text/html; charset=utf-8",
    "/?user_id=ana&view=search&q=beagle": "text/html; charset=utf-8",
    **{f"/inspector/{name}": media for name, media in ASSETS.items()},
}


@pytest.mark.parametrize(("path", "media_type"), sorted(PAGES.items()))
def test_page_and_assets_need_no_token_and_carry_strict_headers(live_server: LiveServer, path: str,
                                                                media_type: str) -> None:
    with live_server.client(token=None) as anonymous:
        response = anonymous.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"] == media_type
    csp = response.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["x-content-type-options"] == "nosniff"


def test_page_holds_no_data_and_nothing_remote(live_server: LiveServer) -> None:
    with live_server.client() as admin:
        admin.post("/v1/turns", json={"user_id": "ana", "turns": [{"role": "user", "content": "Toby the beagle"}]}
                   ).raise_for_status()
    with live_server.client(token=None) as anonymous:
        html = anonymous.get("/?user_id=ana").text
        script = anonymous.get("/inspector/inspector.js").text
    assert "Toby" not in html and "ana" not in html
    for text in (html, script):
        assert "http://" not in text and "https://" not in text, "the page loads nothing from another origin"
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script and "eval(" not in script
    assert "localStorage" not in script, "the token is kept for the tab only (sessionStorage)"


@pytest.mark.parametrize("path", ["/v1/overview", "/v1/memories?user_id=ana", "/v1/info", "/v1/namespaces",
                                  "/inspector/unknown.js", "/inspector/", "/index.html"])
def test_data_calls_and_other_paths_still_need_the_token(live_server: LiveServer, path: str) -> None:
    with live_server.client(token=None) as anonymous:
        assert anonymous.get(path).status_code == 401
    if path.startswith("/inspector/"):
        with live_server.client(ADMIN) as admin:
            assert admin.get(path).status_code == 404


def test_only_the_page_paths_are_public() -> None:
    assert {"/", "/inspector/inspector.js", "/inspector/inspector.css", "/inspector/icon.svg"} == PAGE_PATHS


def test_assets_ship_in_the_package() -> None:
    package = files("memory_ext.server.inspector")
    for name in ["index.html", *ASSETS]:
        assert package.joinpath(name).read_bytes(), name


def test_page_is_not_in_the_openapi_document(open_server: LiveServer) -> None:
    with open_server.client(token=None) as c:
        paths = c.get("/openapi.json").json()["paths"]
    assert "/" not in paths and not any(p.startswith("/inspector") for p in paths)
