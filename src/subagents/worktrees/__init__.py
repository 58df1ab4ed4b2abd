"""Git worktrees for isolated work: creating, settling, listing and removing them.

``git`` creates a child's worktree (``Worktree``) and applies the end-of-run rule (removed after
a success that changed nothing, kept otherwise); ``commands`` is the entry point for isolation
(``create_isolated``: git inside a repository, the configured WorktreeCreate/WorktreeRemove
commands outside one); ``admin`` lists and removes what children left behind. This package knows
nothing of agents: the Agent tool, recovery and the worktree tools use it.
"""
