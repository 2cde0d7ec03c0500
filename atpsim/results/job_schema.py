"""The job table's schema, now declared beside the step table's in
:mod:`atpsim.results.schema` (:data:`~atpsim.results.schema.JOB_SCHEMA`). This old import
path stays only until every importer names :mod:`atpsim.results.schema`."""

from atpsim.results.schema import JOB_COLUMNS, JOB_POINT_COLUMNS, JOB_SCHEMA

__all__ = ["JOB_COLUMNS", "JOB_POINT_COLUMNS", "JOB_SCHEMA"]
