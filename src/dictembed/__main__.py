"""`python -m dictembed`: the command line (also what `accelerate launch -m dictembed` runs)."""

import sys

from dictembed.cli import main

sys.exit(main())
