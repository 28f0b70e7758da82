"""Wrappers of third-party simulators. Importing this package imports none of them."""
