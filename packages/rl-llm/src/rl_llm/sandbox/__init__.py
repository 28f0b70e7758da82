"""Running model-written Python code in a contained subprocess."""

from rl_llm.sandbox.python_sandbox import PythonSandbox, SandboxResult

__all__ = ["PythonSandbox", "SandboxResult"]
