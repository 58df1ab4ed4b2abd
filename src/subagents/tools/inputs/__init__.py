"""The built-in tools' input models, one module per tool, each imported at its tool's first
call: a start-up that only offers the tools creates none of these pydantic classes (~1-2 M
instructions each even unbuilt), and sends their schemas from ``tools/input_schemas.json``
(``tools/input_schemas.py``, ``tools.base.LazyInput``)."""
