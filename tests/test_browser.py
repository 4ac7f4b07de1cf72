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
    page.locator("#pattern").press("Tab")  # the pattern searches again as it changes, as the other filters do
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
    _open(page, base_url, "/?q=something+that+moves+fast&length=4&k=7")  # a link in the API's terms
    page.wait_for_selector("#results .result")
    assert page.locator("#min_length").input_value() == page.locator("#max_length").input_value() == "4"
    assert page.locator("#k").input_value() == "7"
    assert "min_length=4" in page.url and "max_length=4" in page.url and "k=7" in page.url
    assert all(len(word) == 4 for word in page.locator("#results .word").all_text_contents())


def _status_starts(page, text: str) -> None:
    page.wait_for_function(f"document.getElementById('status').textContent.startsWith({text!r})")


def test_the_length_and_initial_controls_filter_the_results(page, base_url) -> None:
    _open(page, base_url)
    page.select_option("#k", "50")
    assert len(_search(page, "something that moves fast")) == len(HEADWORDS) - 2
    page.locator("#min_length").fill("4")
    page.locator("#max_length").fill("5")
    page.locator("#initial").fill("R")
    page.locator("#initial").press("Enter")
    _status_starts(page, "2 results")
    assert sorted(page.locator("#results .word").all_text_contents()) == ["rain", "river"]  # not run (3 letters)
    assert "min_length=4" in page.url and "max_length=5" in page.url and "initial=R" in page.url
    page.locator("#max_length").fill("3")  # over the minimum: the API's message in the page
    page.locator("#max_length").press("Enter")
    page.wait_for_selector("#status.error")
    assert "min_length: 4 is more than max_length 3" in page.locator("#status").text_content()


def _reverse_request(page, action) -> str:
    """The URL of the `/api/reverse` request that `action` makes the page send."""
    with page.expect_request(lambda request: "/api/reverse?" in request.url) as request:
        action()
    return request.value.url


def test_the_similar_words_switch(page, base_url) -> None:
    """The page describes by default, as `predict` does (it tells the API, whose own default is auto); the
    switch to similar words sends that mode and shows the words like the query."""
    _open(page, base_url)
    assert page.locator("#mode-describe").is_checked() and not page.locator("#mode-similar").is_checked()
    page.select_option("#k", "50")
    assert "mode=describe" in _reverse_request(page, lambda: _search(page, "car"))
    _status_starts(page, f"{len(HEADWORDS) - 2} results")  # "car" described, as predict does
    assert "car" in page.locator("#results .word").all_text_contents()
    assert "mode=similar" in _reverse_request(page, lambda: page.get_by_text("Similar words", exact=True).click())
    _status_starts(page, "Words like “car”")
    assert page.locator("#results .result").first.locator(".word").all_text_contents() == ["automobile", "motor car"]
    assert "car" not in page.locator("#results .word").all_text_contents()
    note = page.locator("#score-note").text_content()
    assert "entry vectors" in note and "closest pair of senses" in note  # the score_kind cosine+senses
    assert "mode=similar" in page.url and page.locator("#q").get_attribute("placeholder").startswith("Type a word")
    page.reload()  # the link keeps the mode
    _status_starts(page, "Words like “car”")
    assert page.locator("#mode-similar").is_checked()
    page.locator("#q").fill("zebra")  # no entry: the API's message
    page.keyboard.press("Enter")
    page.wait_for_selector("#status.error")
    assert "not an entry" in page.locator("#status").text_content()
    page.get_by_text("Describe", exact=True).click()  # described
    _status_starts(page, f"{len(HEADWORDS) - 2} results")
    note = page.locator("#score-note").text_content()
    assert "closest definition" in note and "itself uses counts against it" in note  # cosine+definition+words+frequency
    assert "mode=" not in page.url  # the default mode is left out of the link


def test_the_sense_that_matched_shows_first(page, base_url) -> None:
    """`rain`'s card starts with its verb sense (its second) for a description of the verb; the noun follows."""
    _open(page, base_url)
    assert "rain" in _search(page, "to fall as drops of water from the sky")
    card = page.locator("#results .result").filter(has=page.get_by_role("link", name="rain", exact=True))
    assert card.locator(".defs li").all_text_contents() == [
        "verbto fall as drops of water from the sky",
        "nounwater that falls from clouds",
    ]
    assert card.locator(".defs li").first.is_visible()


def test_clicking_a_word_looks_it_up(page, base_url) -> None:
    _open(page, base_url)
    assert "dog" in _search(page, "a domesticated animal that barks")[:3]
    page.get_by_role("link", name="dog", exact=True).click()
    _status_starts(page, "Words like “dog”")
    assert page.locator("#q").input_value() == "dog" and "?q=dog&mode=similar" in page.url
    assert page.locator("#mode-similar").is_checked()  # the switch follows
    assert "dog" not in page.locator("#results .word").all_text_contents()
    page.locator("#results a.word").first.click()  # and on: a word of these results
    page.wait_for_function("document.getElementById('q').value !== 'dog'")
    _status_starts(page, "Words like")
    page.go_back()  # each lookup is a step of the history
    _status_starts(page, "Words like “dog”")
    page.go_back()
    page.wait_for_function("document.getElementById('q').value === 'a domesticated animal that barks'")
    page.wait_for_function("/^\\d+ results/.test(document.getElementById('status').textContent)")
    assert page.locator("#mode-describe").is_checked()


def test_sorting_reorders_the_results_without_a_new_search(page, base_url) -> None:
    _open(page, base_url)
    page.select_option("#k", "50")
    ranked = _search(page, "water that falls from clouds")
    status = page.locator("#status").text_content()
    page.select_option("#sort", "alphabet")
    alphabet = page.locator("#results .result .word:not(.synonym)").all_text_contents()
    assert alphabet == sorted(ranked) and alphabet != ranked and "sort=alphabet" in page.url
    ranks = [int(rank) for rank in page.locator("#results .rank").all_text_contents()]
    assert sorted(ranks) == list(range(1, len(ranked) + 1))  # each keeps its relevance rank
    assert ranked[ranks[0] - 1] == alphabet[0]
    page.select_option("#sort", "length")
    by_length = page.locator("#results .result .word:not(.synonym)").all_text_contents()
    assert [len(w.replace(" ", "")) for w in by_length] == sorted(len(w.replace(" ", "")) for w in ranked)
    page.select_option("#sort", "relevance")
    assert page.locator("#results .result .word:not(.synonym)").all_text_contents() == ranked
    assert page.locator("#status").text_content() == status  # sorted in the page: no new search


def test_the_page_links_the_api_docs(page, base_url) -> None:
    _open(page, base_url)
    assert page.locator("#api").get_attribute("href") == "docs"
    response = page.request.get(base_url + "/openapi.json")
    assert response.ok and "/api/reverse" in response.json()["paths"]


def test_the_api_docs_work_offline(page, base_url) -> None:
    """`/docs` lists the routes with every request to another host refused (as on a machine without a network),
    and its Try it form sends a request to the server."""
    local = base_url.split("://", 1)[1]
    outside: list[str] = []

    def only_local(route) -> None:
        url = route.request.url
        if url.split("://", 1)[-1].startswith(local) or url.startswith("data:"):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    page.context.route("**/*", only_local)
    page.goto(base_url + "/docs")
    page.wait_for_selector("#routes li")
    assert page.locator("#routes .path").all_text_contents() == ["/health", "/api/reverse", "/api/encode"]
    assert page.locator("#routes .method").all_text_contents() == ["GET", "GET", "POST"]
    assert page.locator("#schema-ReverseAnswer").is_visible() and "ResultRow" in page.locator("#schemas").text_content()
    section = page.locator("section#reverse_api_reverse_get")
    assert "the description, or a word (see mode)" in section.text_content()
    section.locator("summary").click()
    section.locator("input[name=q]").fill("water that falls from clouds")
    section.get_by_role("button", name="Send").click()
    section.locator("pre").wait_for()
    assert "→ 200" in section.locator(".status").text_content() and '"rain"' in section.locator("pre").text_content()
    assert outside == []
    page.get_by_role("link", name="Search page").click()
    page.wait_for_function("document.getElementById('model').textContent.includes('entries')")


def test_a_dictionary_of_two_languages_shows_the_language_control(page, base_url, bert_path) -> None:
    import numpy as np

    from dictembed.dictionary.core import Dictionary
    from dictembed.encoder import Encoder
    from dictembed.entry_space import DefinitionSpace
    from dictembed.reverse_dictionary import ReverseDictionary
    from dictembed.serve import background_server, create_app

    _open(page, base_url)
    assert page.locator("#script-filter").is_hidden()  # one language: no control
    senses = {"银行": "经营存款、贷款和汇兑的金融机构。", "河岸": "河流两边的陆地。", "bank": "land beside a river"}
    dictionary = Dictionary(name="merged")
    for word, definition in senses.items():
        dictionary.add(word, definition)
    rows = np.random.default_rng(0).normal(size=(len(senses), 32)).astype(np.float32)
    space = DefinitionSpace(list(senses), rows, similarity="cosine", temperature=0.05)
    rd = ReverseDictionary(Encoder.load(str(bert_path), pooling="mean"), space, dictionary=dictionary, name="merged")
    with background_server(create_app(reverse_dictionary=rd)) as url:
        _open(page, url)
        assert page.locator("#script-filter").is_visible()
        page.select_option("#script", "latin")
        assert _search(page, "the side of a river") == ["bank"]
        assert "script=latin" in page.url
        page.select_option("#script", "cjk")
        page.wait_for_function("!document.getElementById('results').hasAttribute('aria-busy')")
        page.wait_for_function("!document.getElementById('results').textContent.includes('bank')")
        assert sorted(page.locator("#results .word:not(.synonym)").all_text_contents()) == ["河岸", "银行"]


def test_several_dictionaries_offer_the_language_of_the_words_wanted(page, language_folders) -> None:
    """Two folders (`dictembed index`: English words, Chinese words): the selector sends `lang=`, an English
    description then finds Chinese words, each labelled with its language and dictionary, and the link keeps it."""
    from conftest import EN_WORDS, ZH_WORDS

    from dictembed.serve import background_server, create_app

    first_words = "#results .result .word:not(.synonym)"
    with background_server(create_app([language_folders["en"], language_folders["zh"]], device="cpu")) as url:
        _open(page, url)
        assert page.locator("#model").text_content() == "en.tsv (en) 8 entries · zh.tsv (zh) 8 entries"
        assert page.locator("#lang option").all_text_contents() == ["English (en) · en.tsv", "Chinese (zh) · zh.tsv"]
        page.select_option("#k", "50")
        assert sorted(_search(page, "a domesticated animal that barks")) == sorted(EN_WORDS)
        assert "lang=" not in page.url  # the default: the first served
        sent = _reverse_request(page, lambda: page.select_option("#lang", label="Chinese (zh) · zh.tsv"))
        assert "lang=zh" in sent and "dictionary=" not in sent
        page.wait_for_function("(document.querySelector('#results .source') || {}).textContent === 'zh · zh.tsv'")
        page.wait_for_function("!document.getElementById('results').hasAttribute('aria-busy')")
        assert sorted(page.locator(first_words).all_text_contents()) == sorted(ZH_WORDS)
        assert set(page.locator("#results .source").all_text_contents()) == {"zh · zh.tsv"}
        assert "lang=zh" in page.url
        page.reload()  # the link keeps the language
        page.wait_for_function("(document.querySelector('#results .source') || {}).textContent === 'zh · zh.tsv'")
        assert page.locator("#lang").input_value() == "1"
        assert sorted(page.locator(first_words).all_text_contents()) == sorted(ZH_WORDS)


def test_similar_words_name_the_opposites_left_out(page, bert_path, tmp_path) -> None:
    """A folder whose dictionary records antonyms (`dictembed index`): the similar words of *hot* leave *cold* out
    and name it below the status; clicking it looks it up, and a description hides the line."""
    from test_sense_relations import WORDS, write_table

    from dictembed.cli import main
    from dictembed.serve import background_server, create_app

    folder = tmp_path / "antonyms"
    table = write_table(tmp_path / "words.jsonl", with_antonyms=True)
    assert main(["index", "-q", "--model", str(bert_path), "--dictionary", str(table), "--output", str(folder)]) == 0
    with background_server(create_app(folder, device="cpu")) as url:
        _open(page, url, "/?q=hot&mode=similar")
        _status_starts(page, "Words like “hot”")
        assert page.locator("#opposites").text_content() == "Opposite, left out: cold"
        assert "cold" not in page.locator("#results .word").all_text_contents()
        page.locator("#opposites a", has_text="cold").click()
        _status_starts(page, "Words like “cold”")
        assert "?q=cold&mode=similar" in page.url and page.locator("#opposites").text_content().endswith(": hot")
        page.locator("#q").fill("xyzzy")  # an error clears the line
        page.keyboard.press("Enter")
        page.wait_for_selector("#status.error")
        assert page.locator("#opposites").is_hidden()
        _search(page, "cold")
        assert page.locator("#opposites").text_content().endswith(": hot")
        page.get_by_text("Describe", exact=True).click()  # a description names no opposites
        _status_starts(page, f"{len(WORDS)} results")  # every entry described
        assert page.locator("#opposites").is_hidden() and not page.locator("#status.error").count()
