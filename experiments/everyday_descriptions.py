"""Everyday descriptions -> words: how many of tests/data/everyday_descriptions.tsv a model finds in its top k.

    python experiments/everyday_descriptions.py outputs/minilm-defsent-plus            # hits: N/M in the top 10
    python experiments/everyday_descriptions.py MODEL --k 3 --json                     # one JSON document
    python experiments/everyday_descriptions.py MODEL --split dev                      # only the dev rows
    python experiments/everyday_descriptions.py MODEL --screenshot docs/figures/reverse_dictionary_page.png \\
        --query "something that lasts only a very short time"

One line per description: the rank of the first (grouped) result holding an expected word, or `-`, and the
top three results. `--screenshot` also serves the model on a free local port and saves the search page for
`--query` with headless Chromium (Debian's /usr/bin/chromium, driven by Playwright).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from dictembed.evaluation.descriptions import DESCRIPTION_SPLITS, hit_ranks, load_description_pairs
from dictembed.reverse_dictionary import ReverseDictionary

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "everyday_descriptions.tsv"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync"]
CHROMIUM_FLAGS += ["--disable-background-networking", "--disable-component-update"]


def screenshot(rd: ReverseDictionary, query: str, path: Path, chromium: str = "/usr/bin/chromium") -> None:
    """Serve `rd`, search `query` in the page, and save a screenshot of it to `path`."""
    from playwright.sync_api import sync_playwright

    from dictembed.serve import background_server, create_app

    with background_server(create_app(reverse_dictionary=rd)) as url, sync_playwright() as p:
        with tempfile.TemporaryDirectory() as profile:
            browser = p.chromium.launch_persistent_context(
                profile,
                executable_path=chromium,
                headless=True,
                args=CHROMIUM_FLAGS,
                viewport={"width": 900, "height": 1000},
            )
            page = browser.new_page()
            page.goto(url)
            page.wait_for_function("document.getElementById('model').textContent.includes('entries')")
            page.locator("#q").press_sequentially(query)
            page.keyboard.press("Enter")
            page.wait_for_selector(".result")
            path.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(path))
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a trained model folder (with entry_space/ and dictembed.json)")
    parser.add_argument("--data", type=Path, default=DATA, help="description<TAB>word|word[<TAB>split] TSV")
    parser.add_argument(
        "--split", choices=DESCRIPTION_SPLITS, default=None, help="only the rows of this split (default: all rows)"
    )
    parser.add_argument("--k", type=int, default=10, help="a hit is an expected word in the top k results")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--screenshot", type=Path, default=None, help="also save the page to this PNG")
    parser.add_argument("--query", default="something that lasts only a very short time", help="for --screenshot")
    args = parser.parse_args()

    rd = ReverseDictionary.load(args.model).prepare()
    pairs = load_description_pairs(args.data, split=args.split)
    ranks = hit_ranks(rd, pairs, k=args.k)
    top = rd.search_many([d for d, _ in pairs], k=3, max_definitions=0)
    hits = sum(rank is not None for rank in ranks)
    rows = [
        {"description": d, "expected": e, "rank": r, "top3": [", ".join(x.words) for x in t]}
        for (d, e), r, t in zip(pairs, ranks, top, strict=True)
    ]
    if args.json:
        print(
            json.dumps(
                {"model": args.model, "split": args.split, "k": args.k, "hits": hits, "n": len(pairs), "rows": rows},
                indent=2,
            )
        )
    else:
        for row in rows:
            print(f"{row['rank'] or '-':>3}  {row['description']:<58} {' | '.join(row['top3'])[:90]}")
        rows_of = f", {args.split} rows" if args.split else ""
        print(f"hits: {hits}/{len(pairs)} in the top {args.k} ({args.model}{rows_of})")
    if args.screenshot is not None:
        screenshot(rd, args.query, args.screenshot)
        print(f"saved {args.screenshot}")


if __name__ == "__main__":
    main()
