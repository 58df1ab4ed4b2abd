"""Which executor runs a session's background children: ``SUBAGENTS_EXECUTOR``.

``local`` (or unset) keeps every child on the session's own event loop
(``agents.executor.LOCAL``); ``ray`` places background children on a Ray cluster
(``ray_executor.RayExecutor``: ``RAY_ADDRESS``, default the local ``ray start --head``
cluster; ``SUBAGENTS_RAY_HOSTS`` host actors, default one per CPU). Anything else is an error
naming the variable, never a silent fallback.
"""

from __future__ import annotations

from collections.abc import Mapping

from subagents.agents.executor import LOCAL, Executor

ENV = "SUBAGENTS_EXECUTOR"


def executor_from_env(env: Mapping[str, str], *, model_spec: str) -> Executor:
    value = env.get(ENV, "").strip().lower()
    if value in ("", "local"):
        return LOCAL
    if value == "ray":
        try:
            from subagents.distributed.ray_executor import executor_from
        except ImportError as exc:
            raise ValueError(f"{ENV}=ray needs Ray (pip install 'subagents[ray]'): {exc}") from exc
        return executor_from(env, model_spec=model_spec)
    raise ValueError(f"{ENV}: unknown executor {value!r} (expected 'local' or 'ray')")
