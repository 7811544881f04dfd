"""The default backend: namespaces, seccomp, rlimits, cgroups and a warm in-sandbox runner."""
