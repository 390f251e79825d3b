"""The protobuf adapter: requests in, replies out, no gRPC (the command line, batch and the server share it)."""

from referee.game.compiled import extend

# This package's compiled modules, where built for these sources (``referee.game.compiled``).
__path__ = extend(__path__, __name__)
