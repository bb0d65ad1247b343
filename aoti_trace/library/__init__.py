"""The rule library on disk: finding rule folders and reading their files (:mod:`.loader`), the on-disk cache of
loaded rule sets (:mod:`.cache`) and the maintainer's checks of a library (:mod:`.lint`).

Public API::

    load_rules(path=None) -> RuleSet      rules/ of the checkout, or aoti_trace/_rules of the wheel, by default
    load_library(extra, builtin, env)     the built-in library + $AOTI_TRACE_RULES + extra folders
    default_rules_dir() -> Path
"""

from aoti_trace.library.loader import default_rules_dir, load_library, load_rules

__all__ = ["default_rules_dir", "load_library", "load_rules"]
