"""A real ``portamem serve`` and Debian's Chromium driven by Playwright, once per test session.

Chromium is the system one (``apt-get install chromium``; ``PORTAMEM_CHROMIUM`` names another):
Playwright's own browser download is never used. Without it the tests skip, unless
``PORTAMEM_UI_REQUIRE_BROWSER`` is set (as CI does), where a missing browser fails.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the inspector tests need the `server` extra")
pytest.importorskip("playwright", reason="the inspector tests need the `ui-test` extra")

from playwright.sync_api import Browser, Page, sync_playwright  # noqa: E402

from portamem_conformance.remote import ServerProcess  # noqa: E402
from portamem_conformance.served import remote, server, tenant_key, user  # noqa: E402,F401

CHROMIUM = os.environ.get("PORTAMEM_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="session")
def chromium_path() -> str:
    if not os.path.exists(CHROMIUM):
        if os.environ.get("PORTAMEM_UI_REQUIRE_BROWSER"):
            pytest.fail(f"no Chromium at {CHROMIUM}: install Debian's `chromium` (apt-get install chromium)")
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set PORTAMEM_CHROMIUM)")
    return CHROMIUM


@pytest.fixture(scope="module")
def browser(chromium_path: str) -> Iterator[Browser]:
    # one per module: Playwright's sync API holds an event loop on this thread, which async tests of
    # other directories in the same pytest run could not start beside
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser, server: ServerProcess) -> Iterator[Page]:
    """A fresh browser context (no cookies) whose page collects script errors in ``page.errors``."""
    context = browser.new_context(base_url=server.url, locale="zh-CN")
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.errors = errors  # type: ignore[attr-defined]
    yield pg
    context.close()


@pytest.fixture(scope="session")
def artifacts(request: pytest.FixtureRequest) -> Path:
    """Where screenshots are kept: ``artifacts/ui`` of the checkout (or ``PORTAMEM_ARTIFACTS``)."""
    root = Path(os.environ.get("PORTAMEM_ARTIFACTS") or request.config.rootpath / "artifacts") / "ui"
    root.mkdir(parents=True, exist_ok=True)
    return root
