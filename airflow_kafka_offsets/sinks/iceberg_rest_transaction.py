"""Many tables of an Iceberg REST catalog committed at once: the REST protocol's multi-table transaction.

``POST /v1/{prefix}/transactions/commit`` takes one table change per table (the requirements and
updates a single table's commit would send); the server validates every table's requirements before
it commits any, so a reader never sees the batch in one table and not in another. A server lists the
endpoint in its ``/v1/config`` answer when it implements it (PyIceberg keeps that list); one that does
not is committed table by table (:mod:`airflow_kafka_offsets.sinks.multi`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import Endpoint, HttpMethod, RestCatalog
from pyiceberg.catalog.rest.response import _handle_non_200_response
from pyiceberg.exceptions import CommitFailedException, CommitStateUnknownException
from pyiceberg.table import CommitTableRequest, Namespace, TableIdentifier, Transaction
from requests import HTTPError

TRANSACTIONS = Endpoint(http_method=HttpMethod.POST, path="/v1/{prefix}/transactions/commit")


def commits_together(catalog: Catalog) -> bool:
    """True when ``catalog`` is a REST catalog whose server lists the multi-table transaction endpoint."""
    return isinstance(catalog, RestCatalog) and TRANSACTIONS in catalog._supported_endpoints


def transaction_body(staged: Sequence[Transaction]) -> dict[str, list[dict[str, object]]]:
    """The request body: each staged transaction's table, requirements and updates."""
    changes = []
    for transaction in staged:
        name = transaction._table.name()
        request = CommitTableRequest(
            identifier=TableIdentifier(namespace=Namespace(root=list(name[:-1])), name=name[-1]),
            requirements=transaction._requirements,
            updates=transaction._updates,
        )
        changes.append(json.loads(request.model_dump_json()))
    return {"table-changes": changes}


def commit_together(catalog: RestCatalog, staged: Sequence[Transaction]) -> None:
    """Commit every staged table transaction in one request; a table another writer moved meanwhile
    fails them all (:class:`CommitFailedException`: stage them again on the tables as they now are)."""
    response = catalog._session.post(
        catalog.url("transactions/commit"),
        data=json.dumps(transaction_body(staged)).encode("utf-8"),
        headers=catalog._session.headers,
    )
    try:
        response.raise_for_status()
    except HTTPError as exc:
        _handle_non_200_response(
            exc,
            {
                409: CommitFailedException,
                500: CommitStateUnknownException,
                502: CommitStateUnknownException,
                504: CommitStateUnknownException,
            },
        )
