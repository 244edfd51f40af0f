"""One module per manual operation: what it is (``OPERATION``), the inputs it reads (``FIELDS``,
besides the operation, the pipeline and the dry-run switch shared by all), the rules across its
inputs (``check``) and its typed request. :mod:`airflow_kafka_offsets.core.operation_fields`
builds the registry from them, which feeds the trigger form, the operator and the CLI; the
handlers are in the module of the same name in :mod:`airflow_kafka_offsets.service.operations`.

Pure and light: ``airflow --help`` reads these on every invocation.
"""
