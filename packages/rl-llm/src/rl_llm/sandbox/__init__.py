"""Running model-written Python code behind an OS boundary (namespaces, seccomp, limits)."""

from rl_llm.sandbox.python_sandbox import (
    KERNEL_LAYERS,
    LAYERS,
    PythonSandbox,
    SandboxResult,
    SandboxUnavailableError,
)

__all__ = ["KERNEL_LAYERS", "LAYERS", "PythonSandbox", "SandboxResult", "SandboxUnavailableError"]
