"""The protobuf adapter: requests in, replies out, no gRPC (the command line, batch and the server share it)."""
