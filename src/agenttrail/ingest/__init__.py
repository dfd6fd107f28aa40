"""Ways in: the recorder a live agent writes with (:mod:`.recorder`, its turns :mod:`.turn`
and their assistant messages :mod:`.assistant`, the asyncio form :mod:`.async_recorder`, and
functions recorded as tools :mod:`.tool`), the importer of files, ``migrate`` (the
sessions of another log, chains intact), and the writing of trace rows beside the events they
come from (:mod:`.traces`).

All of them build events of :mod:`agenttrail.model` (and trace rows of
:mod:`agenttrail.evidence.traces`) and append them through the store (docs/architecture.md).
"""
