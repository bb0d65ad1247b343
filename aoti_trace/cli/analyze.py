"""`aoti-trace analyze`: placeholder until its owner lands it."""
