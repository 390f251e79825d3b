"""One gRPC process of the referee and its supervisor: the runtime that serves the adapter (``referee.api``)."""
