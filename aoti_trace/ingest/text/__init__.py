"""Captured stderr/stdout into frames: line classification, tracebacks and exceptions, faults, device asserts,
the intermediate value printer, and the always-on failure detection."""
