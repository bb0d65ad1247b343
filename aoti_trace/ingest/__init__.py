"""Readers that turn raw artifacts (TORCH_TRACE logs, stderr/stdout, exit status, .pt2 packages) into frames."""
