"""Trainyard: generated API stubs, the Python SDK and the `trainyard` CLI."""
