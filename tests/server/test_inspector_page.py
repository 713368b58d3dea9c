"""The inspector page's HTTP side: ``/`` and ``/inspector/*`` need no token and hold no data, every data call still
does; content types and security headers; the assets ship in the package (tests/browser drives the page itself)."""

from __future__ import annotations

from importlib.resources import files

import pytest

from memory_ext.server.inspector import ASSETS, PAGE_PATHS

from .conftest import ADMIN, ANA, LiveServer

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


def test_sessions_lists_a_namespaces_sessions_with_sizes_and_dates(live_server: LiveServer) -> None:
    """``GET /v1/sessions`` (the inspector's forget picker): each session with its memories, turns and dates, the
    most recent first; an update counts as a turn, not a memory; a pinned token sees only its user."""
    turns = [{"role": "user", "content": f"Bank note {i}", "session_id": "bank", "external_id": f"bank:{i}",
              "timestamp": f"2026-03-02T09:0{i}:00Z"} for i in range(3)]
    turns += [{"role": "user", "content": f"Trip note {i}", "session_id": "trip",
               "timestamp": f"2026-03-05T10:0{i}:00Z"} for i in range(2)]
    turns += [{"role": "user", "content": "A note without a session", "timestamp": "2026-03-01T08:00:00Z"}]
    with live_server.client() as admin:
        admin.post("/v1/turns", json={"user_id": "ana", "turns": turns}).raise_for_status()
        admin.post("/v1/memories/update", json={"user_id": "ana", "id": "bank:1", "content": "Bank note 1, fixed",
                                                "timestamp": "2026-03-02T11:00:00Z"}).raise_for_status()
        listed = admin.get("/v1/sessions", params={"user_id": "ana"}).raise_for_status().json()
        none = admin.get("/v1/sessions", params={"user_id": "ana", "agent_id": "coach"}).json()
    assert [(s["session_id"], s["memories"], s["turns"]) for s in listed] == \
        [("trip", 2, 2), ("bank", 3, 4), (None, 1, 1)]
    assert listed[1]["first"].startswith("2026-03-02T09:00") and listed[1]["last"].startswith("2026-03-02T11:00")
    assert none == []
    with live_server.client(ANA) as ana:
        assert ana.get("/v1/sessions", params={"user_id": "ana"}).status_code == 200
        assert ana.get("/v1/sessions", params={"user_id": "ben"}).status_code == 403
