"""User-facing errors: the CLI prints them as one line and exits non-zero."""


class PosttrainError(Exception):
    """An error caused by input the user can fix (bad task, bad config, ...)."""


class TaskError(PosttrainError):
    """A task directory is missing, malformed or has wrong types."""


class ConfigError(PosttrainError):
    """A config file or flag has an unknown key or a wrong value."""


class VerifierError(PosttrainError):
    """The verifier did not produce a usable reward (missing or not a number)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (what Slurm, Kubernetes, systemd and `timeout` send), raised in the main thread
    so that it unwinds like Ctrl-C: every context manager closes its sandboxes and children."""


class SandboxError(PosttrainError):
    """A sandbox could not be created or used."""
