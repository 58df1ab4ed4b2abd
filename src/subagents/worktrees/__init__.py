"""Git worktrees for isolated work: creating, settling, listing and removing them.

``lifecycle`` creates a child's worktree and applies the end-of-run rule (removed after a
success that changed nothing, kept otherwise); ``hooks`` is the non-git path through the
WorktreeCreate/WorktreeRemove hooks; ``admin`` lists and removes what children left behind.
This package knows nothing of agents: the Agent tool, recovery and the worktree tools use it.
"""
