"""What is known of each method's paper, without loading its recipe: its name, reference and BibTeX (`Paper`), and
the settings its model card shows (`CARD_KEYS`). The recipes, the model card and the MTEB metadata read them here,
so that writing a card or reading a record imports no training code."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Paper:
    """A method's display name and paper; `bibtex` holds only fields checked against the ACL Anthology / arXiv."""

    name: str
    reference: str
    bibtex: str


PAPERS: dict[str, Paper] = {
    "defsent": Paper(
        "DefSent",
        'Hayato Tsukagoshi, Ryohei Sasano and Koichi Takeda. "DefSent: Sentence Embeddings using Definition '
        'Sentences". ACL-IJCNLP 2021.',
        """@inproceedings{tsukagoshi2021defsent,
  title = {{DefSent}: Sentence Embeddings using Definition Sentences},
  author = {Tsukagoshi, Hayato and Sasano, Ryohei and Takeda, Koichi},
  booktitle = {Proceedings of the 59th Annual Meeting of the Association for Computational Linguistics and the
               11th International Joint Conference on Natural Language Processing (Volume 2: Short Papers)},
  year = {2021},
  pages = {411--418},
  publisher = {Association for Computational Linguistics}
}""",
    ),
    "defsent-plus": Paper(
        "DefSent+",
        'Xiaodong Liu. "DefSent+: Improving sentence embeddings of language models by projecting definition '
        'sentences into a quasi-isotropic or isotropic vector space of unlimited dictionary entries". '
        "arXiv:2405.16153, 2024.",
        """@misc{liu2024defsentplus,
  title = {{DefSent+}: Improving sentence embeddings of language models by projecting definition sentences into a
           quasi-isotropic or isotropic vector space of unlimited dictionary entries},
  author = {Liu, Xiaodong},
  year = {2024},
  eprint = {2405.16153},
  archivePrefix = {arXiv}
}""",
    ),
    "gr-bert": Paper(
        "GR-BERT",
        'Yu Lin, Zhecheng An, Peihao Wu and Zejun Ma. "Improving Contextual Representation with Gloss Regularized '
        'Pre-training". Findings of NAACL 2022.',
        """@inproceedings{lin2022grbert,
  title = {Improving Contextual Representation with Gloss Regularized Pre-training},
  author = {Lin, Yu and An, Zhecheng and Wu, Peihao and Ma, Zejun},
  booktitle = {Findings of the Association for Computational Linguistics: NAACL 2022},
  year = {2022},
  pages = {907--920},
  publisher = {Association for Computational Linguistics}
}""",
    ),
}

# the settings a model card lists for each method, beside the ones every method shares
CARD_KEYS: dict[str, tuple[str, ...]] = {
    "defsent": ("space",),  # `best` is the paper's recipe: nothing measured better on MiniLM
    "defsent-plus": ("entries", "ica", "similarity", "entry_temperature", "pst_steps"),  # the temperature: cosine only
    "gr-bert": ("arch", "gloss_weight", "gloss_temperature"),  # `best` is the paper's: GR-MT on MiniLM left
}


def paper(method: str | None) -> Paper | None:
    """The paper of `method`, or None for no method or one this version does not know (a foreign record)."""
    return PAPERS.get(str(method or "").lower())


def card_keys(method: str | None) -> tuple[str, ...]:
    """The settings the model card of a `method` model lists (none for an unknown method)."""
    return CARD_KEYS.get(str(method or "").lower(), ())


def citation(method: str | None) -> str | None:
    """The BibTeX entry of a method's paper, or None for an unknown method."""
    found = paper(method)
    return found.bibtex if found is not None else None
