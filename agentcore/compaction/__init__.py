"""Compaction's one home (SPEC C3–C5): summarizing the older part of a context so it fits.

Pure logic apart from I/O, and each way it runs beside the others:

- ``settings``: ``session.compaction`` and the manual commands (a leaf).
- ``plan``: pure planning — the cut, the chunks, the summary prompts; no I/O.
- ``summary``: the summary requests (the only model calls), each attempt handed back so its
  usage is recorded.
- ``step``: inside an operation — automatic before a model request (C4) and the manual
  ``compact`` phase (C3); a part of the turn engine.
- ``background``: ``compaction.background_tokens`` and the ``compact`` command of the session
  protocol (C5): a session activity whose summary is applied at an input or request boundary.
- ``transcript``: ``compact_agent_messages`` for hosts that keep their own transcript (public).

Nothing is imported here, so ``import agentcore.compaction.settings`` stays cheap.
"""
