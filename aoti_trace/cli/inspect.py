"""`aoti-trace inspect`: placeholder until its owner lands it."""
