"""`aoti-trace frames`: placeholder until its owner lands it."""
