-- Runs once, when the postgres-data volume is first initialised (as
-- POSTGRES_USER): the Iceberg REST catalog's JDBC backend gets a database of
-- its own, "iceberg_rest", as in the local stack.
CREATE DATABASE iceberg_rest;
