"""``python -m referee.server``: the serve subcommand on its own."""

import sys

from referee.server.logs import quiet_grpc_core

quiet_grpc_core(sys.argv[1:])  # before gRPC is imported

from referee.server.process import main  # noqa: E402

sys.exit(main())
