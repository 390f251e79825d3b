"""``python -m referee.cli``: the ``remigio-referee`` command."""

import sys

from referee.cli import main

sys.exit(main())
