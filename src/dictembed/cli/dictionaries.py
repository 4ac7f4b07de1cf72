"""`dictembed dictionaries`: every dictionary `--dictionary NAME` can load, with its language, counts and licence."""

from __future__ import annotations

import argparse
from typing import Any

from dictembed.cli.options import add_command, add_wordnet_dir
from dictembed.cli.report import Report
from dictembed.extras import install_hint

COMMANDS = {"dictionaries": "the named dictionaries: language, headwords, definitions, licence and source"}


def register(subparsers: Any) -> None:
    """`dictionaries`."""
    p, (shared, _) = add_command(subparsers, "dictionaries", run_dictionaries, COMMANDS["dictionaries"])
    p.add_argument(
        "--count",
        action="store_true",
        help="load every installed dictionary whose counts are not known yet, to count it (counts are kept in the "
        "cache folder once a dictionary has loaded)",
    )
    add_wordnet_dir(shared)


def _row_text(row: dict[str, Any]) -> str:
    languages = (
        row["language"]
        if row["language"] == row["definition_language"]
        else (f"{row['language']}>{row['definition_language']}")
    )
    counts = (
        f"{row['headwords']:>9,} {row['definitions']:>9,}" if row.get("headwords") is not None else f"{'-':>9} {'-':>9}"
    )
    where = "installed" if row["installed"] else install_hint(row["extra"]) if row["extra"] else "missing"
    return f"  {row['name']:<16} {languages:<6} {counts}  {row['licence'] or 'not stated':<31} {where}"


def run_dictionaries(args: argparse.Namespace) -> Report:
    from dictembed.dictionary.catalog import CATALOG, counts_of, known_counts
    from dictembed.dictionary.load import load_source

    counts = known_counts()
    rows = []
    for named in CATALOG.values():
        row = named.to_dict()
        known = counts_of(named, counts, args.wordnet_dir)
        if known is None and args.count and row["installed"]:
            dictionary = load_source(named.name, wordnet_dir=args.wordnet_dir)
            known = {"headwords": len(dictionary), "definitions": dictionary.num_definitions()}
        row |= {
            "headwords": known["headwords"] if known else None,
            "definitions": known["definitions"] if known else None,
        }
        rows.append(row)
    header = f"  {'name':<16} {'lang':<6} {'headwords':>9} {'defs':>9}  {'licence':<31} data"
    lines = [f"{len(rows)} named dictionaries (counts once loaded; --count loads the installed ones)", header]
    lines += [_row_text(row) for row in rows]
    return Report({"dictionaries": rows}, "\n".join(lines))
