"""``python -m referee.server``: the serve subcommand on its own."""

import sys

from referee.server.process import main

sys.exit(main())
