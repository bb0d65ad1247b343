"""`aoti-trace rules`: placeholder until its owner lands it."""
