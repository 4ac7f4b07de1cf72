"""The Russian wiki WordNet (`wiki-ru-wordnet`, MIT): Russian Wiktionary senses in an SQLite file.

The package's `database/wikiwordnet.db` has a table `synsets(synset_id, lemma, definition)`, one row per lemma and
sense; `definition` is `lemma~ru~lemma~ru~TEXT~id~id`, TEXT the wiki text of one Wiktionary definition line. The
file is opened read-only with the standard library's sqlite3 and found without importing the package.

`strip_wiki` turns TEXT into a definition and its examples:
- `{{пример|sentence|author|...}}` is an example (its first unnamed argument); empty ones are dropped;
- templates that write a definition are written out (`DEFINING`): `{{=|X}}` "то же, что X", `{{действие|X}}`
  "действие по значению глагола X", `{{прич.|X}}` "причастие от X", `{{женск.||X}}` "женск. к X", and
  `{{выдел|X}}`, `{{lang|la|X}}` are their text; every other template is a label (`{{разг.}}`, `{{помета|...}}`,
  `{{семантика|...}}`) and is dropped;
- links `[[target|text]]` are their text; bold and italic marks, HTML comments and tags go; what follows a newline
  (the start of the next list item, "#") is not part of the line;
- punctuation left at the start or doubled by a dropped label (", : испытывать") is tidied.
A definition empty once stripped is skipped and counted, as are proper names (a capitalised lemma defined as a
person's name or a place: "мужское имя", "река в России", "город в Германии"), inflection-only definitions
("причастие от X", "сравнительная степень от X") and the rows of wiki project pages ("Шаблон:...").
"""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path

from dictembed.dictionary.builder import DictionaryBuilder, clean_text, without_gc
from dictembed.dictionary.core import Dictionary
from dictembed.dictionary.sources.wiktionary import NO_GLOSS, GlossRules, drop_templates, wiki_text
from dictembed.errors import DataFormatError
from dictembed.extras import package_file
from dictembed.text_files import check_readable

PACKAGE = "wiki_ru_wordnet"
DATABASE = Path("database") / "wikiwordnet.db"
QUERY = "SELECT rowid, lemma, definition FROM synsets ORDER BY rowid"
FIELDS = 7  # lemma~ru~lemma~ru~TEXT~id~id
EMPTY = "definitions empty once wiki markup is stripped"
PROJECT_PAGES = "rows of wiki project pages ('Шаблон:...', 'Викисловарь:...')"
PROJECT_PAGE = re.compile(r"^(?:Викисловарь|Шаблон|Категория|Приложение|Участник|Обсуждение)\s*:")

# Templates that write definition text: name -> (text, the argument written after "; " when given). `{1}`, `{2}`:
# the template's unnamed, non-empty arguments, a language code first left out (`_arguments`).
DEFINING: dict[str, tuple[str, int | None]] = {
    "=": ("то же, что {1}", 2),
    "действие": ("действие по значению глагола {1}", 2),
    "свойство": ("свойство по значению прилагательного {1}", 2),
    "состояние": ("состояние по значению прилагательного {1}", 2),
    "соотн.": ("связанный, соотносящийся по значению с существительным {1}", 2),
    "наречие": ("наречие к {1}", 2),
    "нареч.": ("наречие к {1}", 2),
    "прич.": ("причастие от {1}", None),
    "деепр.": ("деепричастие от {1}", None),
    "дееприч.": ("деепричастие от {1}", None),
    "сравн.": ("сравнительная степень от {1}", None),
    "превосх.": ("превосходная степень от {1}", None),
    "аббр.": ("сокращение от {1}", 2),
    "сокр.": ("сокращение от {1}", 2),
    "хим-элем": ("химический элемент с атомным номером {1} и символом {2}", 3),
    "отчество": ("отчество от {1}", None),
    **{
        name: (name + " к {1}", None)
        for name in ("женск.", "уменьш.", "умласк.", "умласк", "увелич.", "ласк.", "гипокор.")
    },
    **{name: (name + " к {1}", None) for name in ("унич.", "уничиж.", "усилит.", "страд.", "однокр.", "многокр.")},
    "выдел": ("{1}", None),
    "lang": ("{1}", None),
    "fonts": ("{1}", None),
    '"': ("«{1}»", None),
    "кавычки": ("«{1}»", None),
    "-": (" — ", None),
    "--": (" — ", None),
    "итп": ("и т. п.", None),
}
EXAMPLE_TEMPLATES = frozenset({"пример", "Пример"})
EXAMPLE_START, EXAMPLE_END = "\x02", "\x03"  # around an example's text while the line is rendered
EXAMPLE = re.compile(f"{EXAMPLE_START}([^{EXAMPLE_START}{EXAMPLE_END}]*){EXAMPLE_END}")
LANGUAGE_CODE = re.compile(r"[a-z]{2,3}(?:-[a-z]+)?")
NAMED_ARGUMENT = re.compile(r"\s*[\w-]+(?: [\w-]+)?\s*=")
INNER_TEMPLATE = re.compile(r"\{\{([^{}|]*)((?:\|[^{}]*)?)\}\}")
# Punctuation a dropped label leaves: at the start, doubled, or before another mark.
LEADING = re.compile(r"^[\s,;:.—–-]+")
TRAILING = re.compile(r"[\s,;:—–-]+$")
DOUBLED = re.compile(r"\s*([,;:])(?:\s*[,;:])+")
SPACE_BEFORE = re.compile(r"\s+([,;:.)])")
EMPTY_BRACKETS = re.compile(r"\(\s*[,;:]?\s*\)")

_ADJECTIVES = r"(?:[а-яё-]+(?:ое|ая|ий|ый|ой|ие|ые|ее|яя) )*(?:и [а-яё-]+ )?"  # "мужское и женское", "русская"
RUSSIAN = GlossRules(
    names=(
        re.compile(
            rf"^{_ADJECTIVES}(?:имя|фамилия|отчество|река|ручей|приток|город|село|деревня|посёлок|поселок|станица|"
            r"остров|озеро|гора|государство|страна|республика|коммуна|провинция|область|штат|полуостров|столица|"
            r"название (?:города|реки|села|деревни|нескольких|ряда))\b"
        ),
    ),
    inflections=re.compile(r"^(?:причастие|деепричастие|сравнительная степень|превосходная степень) от [^.,;:()]*\.?$"),
)


def ru_wordnet_file() -> Path:
    """The SQLite file of the installed `wiki-ru-wordnet` package (found without importing it)."""
    return package_file(PACKAGE, (str(DATABASE),), "ru", "the Russian wiki WordNet", "wiki-ru-wordnet")


def _arguments(call: str) -> list[str]:
    """The unnamed, non-empty arguments of a template call `name|a|b|x=c` ([a, b]), less a language code first
    (`{{женск.|ru|X}}`, `{{lang|la|X}}`)."""
    arguments = [a.strip() for a in call.split("|")[1:] if not NAMED_ARGUMENT.match(a)]
    if arguments and LANGUAGE_CODE.fullmatch(arguments[0]):
        arguments = arguments[1:]
    return [a for a in arguments if a]


def _render(name: str, arguments: list[str]) -> str:
    """The text a defining template writes (see DEFINING), "" for a label."""
    text, tail = DEFINING.get(name, ("", None))
    if "{" in text:
        if not arguments:
            return ""
        slots = dict(enumerate(arguments, start=1))
        text = re.sub(r"\{(\d)\}", lambda m: slots.get(int(m[1]), ""), text)
    if tail is not None and len(arguments) >= tail:
        text += "; " + arguments[tail - 1]
    return text


def tidy(text: str) -> str:
    """`text` with the punctuation dropped labels leave behind removed (see the module), spaces made single."""
    text = " ".join(text.split())
    text = EMPTY_BRACKETS.sub("", SPACE_BEFORE.sub(r"\1", DOUBLED.sub(r"\1", text)))
    return TRAILING.sub("", LEADING.sub("", text))


def strip_wiki(text: str) -> tuple[str, list[str]]:
    """One Wiktionary definition line as (definition, examples), markup stripped as the module describes."""
    text = wiki_text(text.split("\n", 1)[0])

    def template(match: re.Match[str]) -> str:
        name, arguments = match[1].strip(), _arguments(match[0][2:-2])
        if name in EXAMPLE_TEMPLATES:  # kept in place, marked, so that examples keep their order
            return f" {EXAMPLE_START}{arguments[0]}{EXAMPLE_END} " if arguments else " "
        return _render(name, arguments)

    previous = None
    while previous != text:  # innermost templates first
        previous, text = text, INNER_TEMPLATE.sub(template, text)
    examples = [" ".join(example.split()) for example in EXAMPLE.findall(text)]
    return tidy(drop_templates(EXAMPLE.sub(" ", text))), [example for example in examples if example]


def _rows(path: Path, encoding: str = "utf-8") -> list[tuple[int, str, str]]:
    """Every (rowid, lemma, definition) of the synsets table, text decoded as `encoding`; a file that is not that
    SQLite layout raises DataFormatError naming it."""
    check_readable(path)
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as connection:
            connection.text_factory = lambda raw: raw.decode(encoding)
            return connection.execute(QUERY).fetchall()
    except sqlite3.DatabaseError as error:
        message = f"not the wiki-ru-wordnet database, a table synsets(synset_id, lemma, definition) ({error})"
        raise DataFormatError(path, message) from None
    except UnicodeDecodeError as error:
        raise DataFormatError(path, f"text that is not {encoding} ({error.reason})") from None
    except LookupError:
        raise DataFormatError(path, f"unknown encoding {encoding!r}") from None


@without_gc
def load_ru_wordnet(path: str | Path | None = None, encoding: str = "utf-8") -> Dictionary:
    """The Russian wiki WordNet (`path`: its SQLite file; default the installed `wiki-ru-wordnet` package's) as the
    dictionary "ru-wordnet": one sense per row, its examples from the `{{пример}}` templates, no part of speech;
    markup stripped and non-definitions skipped and counted (see the module), their rowids given as line numbers.
    `encoding`: the database's text (UTF-8 in the package)."""
    path = Path(path) if path else ru_wordnet_file()
    builder = DictionaryBuilder("ru-wordnet")
    lemmas: dict[str, int] = {}
    for rowid, lemma, raw in _rows(path, encoding):
        if not isinstance(lemma, str) or not isinstance(raw, str):
            raise DataFormatError(path, f"synsets row {rowid}: lemma and definition must be text")
        fields = raw.split("~")
        if len(fields) < FIELDS:
            raise DataFormatError(
                path, f"synsets row {rowid} ({lemma!r}): definition is not 'lemma~ru~lemma~ru~text~id~id'"
            )
        if PROJECT_PAGE.match(lemma):
            builder.skip_row(PROJECT_PAGES, rowid)
            continue
        lemmas.setdefault(clean_text(lemma), rowid)
        source = "~".join(fields[4:-2])
        definition, examples = strip_wiki(source)
        reason = RUSSIAN.skip_reason(lemma, definition) if definition else (EMPTY if source.strip() else None)
        if reason:
            builder.skip_row(reason, rowid)
        else:
            builder.add(lemma, definition, examples, line=rowid)
    for lemma, rowid in lemmas.items():
        if lemma and lemma not in builder.dictionary:
            builder.skip(NO_GLOSS, rowid)
    return builder.build()
