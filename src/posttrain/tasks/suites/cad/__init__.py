"""The cad suite: build a described part as a closed triangle mesh, graded by meshscore.py; its probes."""
