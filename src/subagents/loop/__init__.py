"""The agent loop: turns, tool scheduling, budgets. Knows nothing of sub-agents."""
