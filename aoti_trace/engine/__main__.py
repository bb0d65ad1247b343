"""``python -m aoti_trace.engine > rules/rule.schema.json``: export the rule JSON Schema."""

import json

from aoti_trace.engine.validation import rule_json_schema

print(json.dumps(rule_json_schema(), indent=2))
