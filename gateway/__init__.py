"""The gateway in front of the referee: Envoy's configuration from a template, the descriptor set
its JSON transcoder reads, and the OpenAPI description of the JSON routes, all generated from the
proto (``python -m gateway --help``)."""
