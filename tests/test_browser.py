"""The search page in a real browser: headless Chromium (Debian's `chromium` package), driven by Playwright,
against a uvicorn server on a free localhost port with conftest's tiny served model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import CAR, HEADWORDS

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).is_file(), reason="no Chromium binary (apt-get install chromium)")


@pytest.fixture(scope="module")
def base_url(served_model):
    from dictembed.serve import background_server, create_app

    with background_server(create_app(served_model)) as url:
        yield url


@pytest.fixture()
def page(tmp_path):
    """A fresh browser page with a new, empty profile (`--user-data-dir`); no uncaught script error allowed."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            tmp_path / "profile", executable_path=CHROMIUM, headless=True, args=FLAGS
        )
        context.set_default_timeout(60_000)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        yield page
        context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


def _open(page, base_url: str, path: str = "/") -> None:
    page.goto(base_url + path)
    page.wait_for_function("document.getElementById('model').textContent.includes('entries')")


def _search(page, description: str) -> list[str]:
    """Type `description`, press Enter, and return the first word of every result."""
    page.locator("#q").fill("")
    page.locator("#q").press_sequentially(description)
    page.keyboard.press("Enter")
    page.wait_for_selector("#results .result")
    page.wait_for_function("!document.getElementById('results').hasAttribute('aria-busy')")
    return page.locator("#results .result .word:not(.synonym)").all_text_contents()


def test_typing_a_description_and_enter_shows_the_word(page, base_url, tmp_path) -> None:
    _open(page, base_url)
    assert page.locator("#model").text_content() == f"toy-reverse-dictionary · {len(HEADWORDS)} entries"
    assert "dog" in _search(page, "a domesticated animal that barks")[:3]
    card = page.locator("#results .result").filter(has_text="dog").first
    assert "a loyal pet that chases cats" in card.text_content()
    width = card.locator(".meter > span").evaluate("e => parseFloat(e.style.width)")
    assert 0 < width <= 100
    assert "?q=a+domesticated+animal+that+barks" in page.url  # the search can be linked and reloaded
    page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
    assert (tmp_path / "page.png").stat().st_size > 5_000


def test_grouped_synonyms_and_filters(page, base_url) -> None:
    _open(page, base_url)
    page.select_option("#k", "50")
    _search(page, CAR[0])
    car = page.locator("#results .result").filter(has_text="automobile")
    assert car.count() == 1 and car.locator(".word").all_text_contents() == ["car", "automobile", "motor car"]
    assert car.locator(".defs li").all_text_contents() == ["noun" + CAR[0], "noun" + CAR[1]]  # shown once
    page.select_option("#words", "phrase")
    page.wait_for_function("document.getElementById('status').textContent.startsWith('2 results')")
    assert sorted(page.locator("#results .word").all_text_contents()) == ["ice cream", "motor car"]
    page.select_option("#words", "any")
    page.select_option("#pos", "v")
    page.wait_for_function("document.getElementById('status').textContent.startsWith('2 results')")
    page.locator("#pattern").fill("ru*")
    page.locator("#pattern").press("Enter")
    page.wait_for_function("document.getElementById('status').textContent.startsWith('1 result ')")
    assert page.locator("#results .word").all_text_contents() == ["run"]


def test_errors_show_in_the_page_and_a_link_restores_the_search(page, base_url) -> None:
    _open(page, base_url)
    page.locator("#pattern").fill("/(/")
    page.locator("#q").fill("a small pet")
    page.keyboard.press("Enter")
    page.wait_for_selector("#status.error")
    assert "regular expression" in page.locator("#status").text_content()
    assert page.locator("#results .result").count() == 0
    _open(page, base_url, "/?q=a+small+pet+that+purrs+and+catches+mice&k=20")
    page.wait_for_selector("#results .result")
    assert page.locator("#q").input_value() == "a small pet that purrs and catches mice"
    assert page.locator("#k").input_value() == "20"
