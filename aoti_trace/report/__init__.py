"""Report formats: text, json, jsonl, sarif, html, markdown."""
