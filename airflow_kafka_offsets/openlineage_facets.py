"""The ``kafkaOffsets`` OpenLineage run facet: which batch a task read or committed.

Imported only when the OpenLineage provider asks an operator for its lineage (it is optional).
"""

from __future__ import annotations

from typing import Any, ClassVar

import attr
from airflow.providers.common.compat.openlineage.facet import RunFacet


@attr.define
class KafkaOffsetsRunFacet(RunFacet):
    """The batch: pipeline, batch id, epoch, ``[start, end)`` per partition, records, output location.

    Its ``_schemaURL`` is the base RunFacet schema, which it extends with these fields."""

    pipeline: str
    batchId: int  # OpenLineage facets use camelCase field names
    epoch: int
    ranges: list[dict[str, Any]]
    records: int
    outputUri: str
    _additional_skip_redact: ClassVar[list[str]] = ["pipeline", "ranges", "outputUri"]
