"""Tasks in the Harbor format: read, write, generate. Never runs anything."""

from posttrain.tasks.config import TaskConfig
from posttrain.tasks.task import Task, load_tasks, read_task, write_task

__all__ = ["Task", "TaskConfig", "load_tasks", "read_task", "write_task"]
