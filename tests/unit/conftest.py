"""Graph drawings are snapshot-tested with syrupy: one Mermaid file per drawing,
``tests/unit/__snapshots__/<test module>/<test name>.mmd``, drawn without
styles so only the graph's shape is compared. A changed graph shows up as a
changed file in review; regenerate with ``python -m pytest --snapshot-update``
and read the diff before committing it."""

import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode


class MermaidSnapshot(SingleFileSnapshotExtension):
    """A drawing as a readable ``.mmd`` text file."""

    _write_mode = WriteMode.TEXT
    file_extension = "mmd"


@pytest.fixture
def mermaid(snapshot):
    """``assert graph.get_graph().draw_mermaid(with_styles=False) == mermaid``."""
    return snapshot.use_extension(MermaidSnapshot)
