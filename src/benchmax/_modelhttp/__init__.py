"""Model HTTP for BaseEnv: connections, the chat-completions call and reading its replies.

Private to benchmax; it sits between ``benchmax.auth`` and ``benchmax.envs``.
"""
