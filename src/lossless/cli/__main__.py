"""``python -m lossless.cli``: the ``lossless`` command."""

import sys

from . import main

sys.exit(main())
