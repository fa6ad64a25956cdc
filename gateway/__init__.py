"""The gateway: Envoy's config, rendered from a template, and its descriptor set."""
