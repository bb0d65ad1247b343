"""`aoti-trace run`: placeholder until its owner lands it."""
