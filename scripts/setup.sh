#!/usr/bin/env bash
# Installs everything defsent needs on a fresh Debian machine with Python 3.11:
# WordNet 3.0 (Debian's wordnet-base) when /usr/share/wordnet is missing, then the package with its
# test extras. torch is pinned to 2.13.0, the CPU wheel already on these machines.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f "${WNSEARCHDIR:-/usr/share/wordnet}/data.noun" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq wordnet-base
fi
python -m pip install -q --disable-pip-version-check -e ".[test]"
