"""Beyond one machine: background children on a Ray cluster (docs/distributed.md).

``remote`` is the plain data a child crosses the cluster as (``RemoteChild``) and what comes
back (``Progress``, ``Ended``); ``host`` runs such a child on a node, inside a host session of
its own; ``ray_executor`` is the ``agents.executor.Executor`` that places background children
on ``ChildHost`` actors; ``select`` reads ``SUBAGENTS_EXECUTOR``. Importing this package imports
no Ray: only ``ray_executor`` does, and only ``select`` imports it, when Ray is asked for.
"""
