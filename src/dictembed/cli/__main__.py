"""`python -m dictembed.cli`: the command line, as `dictembed` runs it."""

import sys

from dictembed.cli import main

sys.exit(main())
