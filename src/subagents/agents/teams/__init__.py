"""Agent teams (SPEC §11, docs/teams.md): team config, shared task list, mailboxes, the lead's
host of teammates and the teammate's idle-and-wake inbox."""
