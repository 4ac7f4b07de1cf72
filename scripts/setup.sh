#!/usr/bin/env bash
# Installs everything dictembed needs on a fresh Debian machine (Python >= 3.10):
# WordNet 3.0 (Debian's wordnet-base) when /usr/share/wordnet is missing, Debian's chromium (the headless
# browser of tests/test_browser.py, driven by Playwright; never `playwright install`) when /usr/bin/chromium
# is missing, the machine's CPU wheel of torch (2.13.0, already on disk here, so set-up stays offline-safe),
# then the package with every extra and the test tools.
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=()
[ -f "${WNSEARCHDIR:-/usr/share/wordnet}/data.noun" ] || PACKAGES+=(wordnet-base)
[ -x /usr/bin/chromium ] || PACKAGES+=(chromium)
if [ ${#PACKAGES[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${PACKAGES[@]}"
fi
python -m pip install -q --disable-pip-version-check "torch==2.13.0"
python -m pip uninstall -q -y defsent 2>/dev/null || true  # the package's former name
python -m pip install -q --disable-pip-version-check -e ".[test]"
