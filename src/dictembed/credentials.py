"""Credentials: files that a model folder must not publish (private keys, login, token and password files), told
by their names or by a private-key header at their start.

The list is built in. Secret scanners on PyPI (detect-secrets) look for secret-looking strings inside text, line
by line: they would read multi-gigabyte weights whole, flag the random-looking strings of tokenizer vocabularies,
and know no credential file names, which is what a model folder's stray `id_rsa` or `credentials.json` is.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

# (pattern, what such a file is): shell patterns matched against each part of a relative path, lower-cased.
NAME_PATTERNS: tuple[tuple[str, str], ...] = (
    *((name, "an SSH private key") for name in ("id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_*_sk")),
    ("*.pem", "a PEM key or certificate"),
    ("*.key", "a private key"),
    ("*.ppk", "a PuTTY private key"),
    *((pattern, "a key store") for pattern in ("*.p12", "*.pfx", "*.jks", "*.keystore")),
    *((pattern, "a password database") for pattern in ("*.kdbx", "*.kdb", "*.keychain", "*.keychain-db")),
    *((name, "a login file") for name in (".netrc", "_netrc", ".pgpass", ".htpasswd", "htpasswd")),
    *((name, "a login file of a package index") for name in (".pypirc", ".npmrc", ".gem_credentials")),
    (".git-credentials", "git's stored passwords"),
    *((pattern, "an environment file") for pattern in (".env", ".env.*", "*.env")),
    *((pattern, "a credentials file") for pattern in ("credentials*", "*[_.-]credentials*")),
    *((pattern, "a secrets file") for pattern in ("secret*", "*[_.-]secret*", "client_secret*")),
    # "token" as a word of the name: `token`, `hf_token`, `api-token.txt`, `auth.token`; never the tokenizer's
    # own files (`tokenizer.json`, `special_tokens_map.json`, `added_tokens.json`).
    *((pattern, "a token file") for pattern in ("token", "token.*", "*.token", "*[_-]token", "*[_-]token.*")),
    ("stored_tokens", "a token file"),
)
# A PEM or OpenSSH private key ("-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN OPENSSH PRIVATE KEY-----",
# "-----BEGIN ENCRYPTED PRIVATE KEY-----"), a PGP secret key block or a PuTTY key, at the start of a file.
PRIVATE_KEY_START = re.compile(
    rb"\A(?:\xef\xbb\xbf)?\s*(?:-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-)"
)
HEAD_BYTES = 1024  # the start of a file read for a key header


def credential_name(relative: str) -> str | None:
    """What the relative path `relative` names by one of its parts when that is a credential file's name
    (e.g. "an SSH private key"), else None."""
    for part in reversed(Path(relative).parts):  # the file's own name first, then its folders'
        lowered = part.lower()
        for pattern, kind in NAME_PATTERNS:
            if fnmatch.fnmatchcase(lowered, pattern):
                return f"{kind} (named {part})"
    return None


def starts_as_private_key(path: Path) -> bool:
    """Whether the plain file `path` starts with a private-key header; a file that cannot be read is not."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return False
    return PRIVATE_KEY_START.match(head) is not None


def credential(path: Path, relative: str) -> str | None:
    """Why the plain file `path` (at `relative` in its folder) looks like a credential, or None."""
    if (kind := credential_name(relative)) is not None:
        return kind
    return "a private key (its first line)" if starts_as_private_key(path) else None
