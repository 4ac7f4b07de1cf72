"""Licences as the Hugging Face Hub names them: those of the base models' weights and of the named dictionaries."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Licence:
    """A licence as the Hub names it: `hub_id` from the Hub's list, else "other" with `hub_name`."""

    hub_id: str
    name: str
    link: str
    hub_name: str | None = None  # the Hub's `license_name` when `hub_id` is "other"

    @property
    def key(self) -> str:
        """One word for the licence: the Hub id, or its `license_name` when the id is "other"."""
        return self.hub_name or self.hub_id


APACHE_2 = Licence("apache-2.0", "Apache 2.0", "https://www.apache.org/licenses/LICENSE-2.0")
MIT = Licence("mit", "MIT", "https://opensource.org/license/mit")
GPL_3 = Licence("gpl-3.0", "GPL-3.0", "https://www.gnu.org/licenses/gpl-3.0.html")
CC_BY_SA_3 = Licence("cc-by-sa-3.0", "CC BY-SA 3.0", "https://creativecommons.org/licenses/by-sa/3.0/")
CC_BY_SA_4 = Licence("cc-by-sa-4.0", "CC BY-SA 4.0", "https://creativecommons.org/licenses/by-sa/4.0/")
WORDNET = Licence(
    "other", "WordNet 3.0 license (BSD-like)", "https://wordnet.princeton.edu/license-and-commercial-use", "wordnet"
)
