"""The gRPC adapter: ``convert`` (protobuf <-> domain and the handlers), ``status`` (exceptions to
gRPC statuses), ``servicer`` (the RefereeService) and ``server`` (wiring and the serve command).

Nothing is imported here, so ``python -m referee.service.server`` runs cleanly and the command
line can use ``convert`` without loading the server.
"""
