"""The rule engine: YAML rules compiled to Polars expressions, evaluated over frames, ranked into findings."""
