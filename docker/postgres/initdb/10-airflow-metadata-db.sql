-- Runs once, when the postgres-data volume is first initialised (as
-- POSTGRES_USER, connected to POSTGRES_DB "ledger"). The ledger stays in
-- "ledger"; Airflow's own metadata gets a database of its own.
CREATE DATABASE airflow;
