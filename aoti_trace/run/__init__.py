"""Running a command and capturing what aoti-trace needs, on any machine where torch runs.

* :mod:`.capture` — process supervision: pipes copied crash-safely, signals forwarded, timeouts, the manifest
  (standard library only; ``python3 -m aoti_trace.capture`` is its command).
* :mod:`.probe` — the environment probe run with the command's own Python (standard library only).
* :mod:`.host` — facts about a machine: this one (``nvidia-smi``, ``/proc/cpuinfo``, the installed torch) or the one a
  capture's manifest describes (standard library only).
* :mod:`.ladder` — ``aoti-trace ladder``: reruns with escalating debug variables, each analysed (needs the analysis).
"""
