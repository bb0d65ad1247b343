"""TORCH_TRACE logs into frames: the record index and reader, session metadata, chromium events."""
