"""Trainyard's four services and the core they share."""
