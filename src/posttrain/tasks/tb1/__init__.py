"""Import Terminal-Bench 1 tasks into the Harbor layout (importer.py), with their compose files and fidelity checks."""
